// Command confirm is the function the upload bucket's ObjectCreated
// notification invokes: it checks each new object and confirms or rejects
// its upload.
package main

import (
	"github.com/conveyor/conveyor/internal/handler"
	fn "github.com/conveyor/conveyor/internal/handler/confirmfn"
)

func main() { handler.Start(fn.Name, fn.Resolve, fn.New) }
