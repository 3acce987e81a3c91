// Command stream serves GET /v1/jobs/{id}/events and GET /v1/events as
// Server-Sent Events behind a Lambda function URL in RESPONSE_STREAM mode
// (built with -tags lambda.norpc on provided.al2023). It checks the bearer
// token itself: the function URL's auth type is NONE.
package main

import (
	"context"
	"log"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/conveyor/conveyor/internal/app"
	"github.com/conveyor/conveyor/internal/resources"
)

func main() {
	a, err := app.FromEnv(context.Background(), resources.FuncStream)
	if err != nil {
		log.Fatalf("stream: %v", err)
	}
	lambda.Start(a.StreamHandler())
}
