// Command simulator serves the external-API simulator on its own (make run
// starts one inside the local stack):
//
//	go run ./localstack/cmd/simulator -addr 127.0.0.1:8090
//
// The address defaults to $CONVEYOR_SIMULATOR_ADDR, else 127.0.0.1:8090. It
// prints the base URL on stdout, logs JSON on stderr, and stops on SIGINT or
// SIGTERM.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/conveyor/conveyor/localstack/simulator"
)

// addrDefault is the listen address when neither -addr nor
// CONVEYOR_SIMULATOR_ADDR says otherwise.
const addrDefault = "127.0.0.1:8090"

func main() {
	def := os.Getenv("CONVEYOR_SIMULATOR_ADDR")
	if def == "" {
		def = addrDefault
	}
	addr := flag.String("addr", def, "listen address (env CONVEYOR_SIMULATOR_ADDR)")
	flag.Parse()
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))

	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	_, url, stop, err := simulator.Start(*addr, simulator.Options{})
	if err != nil {
		log.Error("starting the simulator", "addr", *addr, "error", err)
		os.Exit(1)
	}
	fmt.Println(url)
	log.Info("simulator listening", "url", url)
	<-ctx.Done()
	log.Info("simulator stopping")
	stop()
}
