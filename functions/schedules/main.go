// Command schedules is the schedules function behind API Gateway (HTTP
// API, payload v2): /v1/schedules and the routes under it.
package main

import (
	// The schedules' time zones: this function validates them and computes
	// next runs (time.LoadLocation), and provided.al2023 is built on the
	// AL2023 minimal image, which has shipped without /usr/share/zoneinfo.
	// Only the programs that load zones link the database (0.45 MB): Go's
	// advice is to import it from a program, not from a library.
	_ "time/tzdata"

	"github.com/conveyor/conveyor/internal/handler"
)

func main() { handler.Start(handler.Schedules) }
