// Command system consumes the system tier's FIFO queue: webhook deliveries
// (and, later, e-mail and billing work).
package main

import (
	"context"
	"log"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/conveyor/conveyor/internal/app"
	"github.com/conveyor/conveyor/internal/resources"
)

func main() {
	a, err := app.FromEnv(context.Background(), resources.FuncSystem)
	if err != nil {
		log.Fatalf("system: %v", err)
	}
	lambda.Start(a.SystemHandler())
}
