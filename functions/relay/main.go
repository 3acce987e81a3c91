// Command relay is fed by the DynamoDB Streams event source mapping on the
// table: it puts the new event items on the environment's EventBridge bus
// and queues the webhook deliveries they trigger (internal/relay).
package main

import "github.com/conveyor/conveyor/internal/handler"

func main() { handler.Start(handler.Relay) }
