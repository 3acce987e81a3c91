// Command confirm is the function the upload bucket's ObjectCreated
// notification invokes: it checks each new object and confirms or rejects
// its upload.
package main

import (
	"context"
	"log"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/conveyor/conveyor/internal/handler"
	fn "github.com/conveyor/conveyor/internal/handler/confirmfn"
)

func main() {
	ctx := context.Background()
	env, err := handler.Load(ctx, fn.Name, fn.Resolve)
	if err != nil {
		log.Fatalf("%s: %v", fn.Name, err)
	}
	h, err := fn.New(ctx, env)
	if err != nil {
		log.Fatalf("%s: %v", fn.Name, err)
	}
	lambda.Start(h)
}
