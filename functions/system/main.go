// Command system consumes the system tier's FIFO queue: webhook deliveries
// (and, later, e-mail and billing work).
package main

import "github.com/conveyor/conveyor/internal/handler"

func main() { handler.Start(handler.System) }
