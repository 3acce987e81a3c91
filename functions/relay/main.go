// Command relay is fed by the DynamoDB Streams event source mapping on the
// table: it puts the new event items on the environment's EventBridge bus
// and queues the webhook deliveries they trigger (internal/relay).
package main

import (
	"github.com/conveyor/conveyor/internal/aws/bus"
	"github.com/conveyor/conveyor/internal/handler"
)

// The environment's bus on EventBridge: the only function that links the
// EventBridge client.
func main() { handler.Start(handler.Relay(bus.For)) }
