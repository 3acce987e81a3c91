// Command confirm is the function the upload bucket's ObjectCreated
// notification invokes: it checks each new object and confirms or rejects
// its upload.
package main

import "github.com/conveyor/conveyor/internal/handler"

func main() { handler.Start(handler.Confirm) }
