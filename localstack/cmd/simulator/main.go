// Command simulator runs the external-API simulator alone (make run starts
// one itself): `go run ./localstack/cmd/simulator -addr 127.0.0.1:8090`.
package main

import (
	"context"
	"flag"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/conveyor/conveyor/localstack/simulator"
)

func main() {
	def := os.Getenv("CONVEYOR_SIMULATOR_ADDR")
	if def == "" {
		def = "127.0.0.1:8090"
	}
	addr := flag.String("addr", def, "listen address")
	flag.Parse()
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	_, url, stop, err := simulator.Start(*addr, simulator.Options{})
	if err != nil {
		log.Error("simulator failed to start", "error", err)
		os.Exit(1)
	}
	log.Info("simulator listening", "url", url)
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	<-ctx.Done()
	stop()
}
