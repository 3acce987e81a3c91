// Command system consumes the system tier's FIFO queue: webhook deliveries
// (and, later, e-mail and billing work).
package main

import (
	"github.com/conveyor/conveyor/internal/handler"
	fn "github.com/conveyor/conveyor/internal/handler/systemfn"
)

func main() { handler.Start(fn.Name, fn.Resolve, fn.New) }
