// Command uploads is the uploads function behind API Gateway (HTTP API,
// payload v2): the routes under /v1/uploads/ (sign, confirm, get).
package main

import "github.com/conveyor/conveyor/internal/handler"

func main() { handler.Start(handler.Uploads) }
