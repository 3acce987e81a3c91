// Command relay is fed by the DynamoDB Streams event source mapping on the
// table: it puts the new event items on the environment's EventBridge bus
// and queues the webhook deliveries they trigger (internal/relay).
package main

import (
	"context"
	"log"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/conveyor/conveyor/internal/app"
	"github.com/conveyor/conveyor/internal/resources"
)

func main() {
	a, err := app.FromEnv(context.Background(), resources.FuncRelay)
	if err != nil {
		log.Fatalf("relay: %v", err)
	}
	lambda.Start(a.RelayHandler())
}
