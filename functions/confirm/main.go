// Command confirm is the function the upload bucket's ObjectCreated
// notification invokes: it checks each new object and confirms or rejects
// its upload.
package main

import (
	"context"
	"log"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/conveyor/conveyor/internal/app"
	"github.com/conveyor/conveyor/internal/resources"
)

func main() {
	a, err := app.FromEnv(context.Background(), resources.FuncConfirm)
	if err != nil {
		log.Fatalf("confirm: %v", err)
	}
	lambda.Start(a.ConfirmHandler())
}
