// Command publisher consumes the high, medium and low tier FIFO queues
// (event source mappings with ReportBatchItemFailures) and publishes each
// job to the external API.
package main

import (
	"context"
	"log"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/conveyor/conveyor/internal/app"
	"github.com/conveyor/conveyor/internal/resources"
)

func main() {
	a, err := app.FromEnv(context.Background(), resources.FuncPublisher)
	if err != nil {
		log.Fatalf("publisher: %v", err)
	}
	lambda.Start(a.PublisherHandler())
}
