// Command recovery runs on EventBridge Scheduler: every 5 minutes it
// re-enqueues stuck jobs and moves finished ones through retention; every
// minute it releases scheduled jobs whose time came.
package main

import (
	"context"
	"log"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/conveyor/conveyor/internal/app"
	"github.com/conveyor/conveyor/internal/resources"
)

func main() {
	a, err := app.FromEnv(context.Background(), resources.FuncRecovery)
	if err != nil {
		log.Fatalf("recovery: %v", err)
	}
	lambda.Start(a.RecoveryHandler())
}
