// Command system consumes the system tier's FIFO queue: webhook deliveries
// (and, later, e-mail and billing work).
package main

import (
	"context"
	"log"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/conveyor/conveyor/internal/handler"
	fn "github.com/conveyor/conveyor/internal/handler/systemfn"
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
