// Command relay is fed by the DynamoDB Streams event source mapping on the
// table: it puts the new event items on the environment's EventBridge bus
// and queues the webhook deliveries they trigger (internal/relay).
package main

import (
	"context"
	"log"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/conveyor/conveyor/internal/handler"
	fn "github.com/conveyor/conveyor/internal/handler/relayfn"
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
