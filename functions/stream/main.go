// Command stream serves GET /v1/jobs/{id}/events and GET /v1/events as
// Server-Sent Events behind a Lambda function URL in RESPONSE_STREAM mode
// (built with -tags lambda.norpc on provided.al2023). It checks the bearer
// token itself: the function URL's auth type is NONE.
package main

import (
	"context"
	"log"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/conveyor/conveyor/internal/handler"
	fn "github.com/conveyor/conveyor/internal/handler/streamfn"
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
