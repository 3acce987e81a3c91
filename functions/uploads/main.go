// Command uploads is the uploads function behind API Gateway (HTTP API,
// payload v2): the routes under /v1/uploads/ (sign, confirm, get).
package main

import (
	"github.com/conveyor/conveyor/internal/handler"
	fn "github.com/conveyor/conveyor/internal/handler/uploadsfn"
)

func main() { handler.Start(fn.Name, fn.Resolve, fn.New) }
