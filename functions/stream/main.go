// Command stream serves GET /v1/jobs/{id}/events and GET /v1/events as
// Server-Sent Events behind a Lambda function URL in RESPONSE_STREAM mode
// (built with -tags lambda.norpc on provided.al2023). It checks the bearer
// token itself: the function URL's auth type is NONE.
package main

import "github.com/conveyor/conveyor/internal/handler"

func main() { handler.Start(handler.Stream) }
