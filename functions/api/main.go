// Command api is the HTTP API function behind API Gateway (HTTP API,
// payload v2): uploads, account connection and jobs.
package main

import (
	"github.com/conveyor/conveyor/internal/handler"
	fn "github.com/conveyor/conveyor/internal/handler/apifn"
)

func main() { handler.Start(fn.Name, fn.Resolve, fn.New) }
