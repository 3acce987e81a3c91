// Command publisher consumes the high, medium and low tier FIFO queues
// (event source mappings with ReportBatchItemFailures) and publishes each
// job to the external API.
package main

import (
	"context"
	"log"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/conveyor/conveyor/internal/handler"
	fn "github.com/conveyor/conveyor/internal/handler/publisherfn"
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
