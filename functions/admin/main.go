// Command admin is the admin function behind API Gateway (HTTP API,
// payload v2): the operators' routes under /v1/admin/.
package main

import (
	"github.com/conveyor/conveyor/internal/handler"
	fn "github.com/conveyor/conveyor/internal/handler/adminfn"
)

func main() { handler.Start(fn.Name, fn.Resolve, fn.New) }
