// Command publisher consumes the high, medium and low tier FIFO queues
// (event source mappings with ReportBatchItemFailures) and publishes each
// job to the external API.
package main

import "github.com/conveyor/conveyor/internal/handler"

func main() { handler.Start(handler.Publisher) }
