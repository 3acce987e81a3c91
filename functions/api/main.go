// Command api is the HTTP API function behind API Gateway (HTTP API,
// payload v2): uploads, account connection and jobs.
package main

import (
	"context"
	"log"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/conveyor/conveyor/internal/app"
	"github.com/conveyor/conveyor/internal/resources"
)

func main() {
	a, err := app.FromEnv(context.Background(), resources.FuncAPI)
	if err != nil {
		log.Fatalf("api: %v", err)
	}
	lambda.Start(a.APIHandler())
}
