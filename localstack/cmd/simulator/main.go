// Command simulator serves the external-API simulator on its own (make run
// starts one inside the local stack):
//
//	go run ./localstack/cmd/simulator -addr 127.0.0.1:8090
//
// The address defaults to $CONVEYOR_SIMULATOR_ADDR, else 127.0.0.1:8090. The
// token endpoint accepts only the client in $CONVEYOR_DEVIANTART_CLIENT_ID and
// $CONVEYOR_DEVIANTART_CLIENT_SECRET (else the simulator's default client);
// CONVEYOR_SIMULATOR_TOKEN_TTL, _RATE_LIMIT, _RATE_WINDOW, _LATENCY and
// _LATENCY_JITTER set the rest (see simulator.OptionsFromEnv). It prints the
// base URL on stdout, logs JSON on stderr, and stops on SIGINT or SIGTERM.
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
	opts, err := simulator.OptionsFromEnv(os.Getenv)
	if err != nil {
		log.Error("configuring the simulator", "error", err)
		os.Exit(2)
	}
	sim, url, stop, err := simulator.Start(*addr, opts)
	if err != nil {
		log.Error("starting the simulator", "addr", *addr, "error", err)
		os.Exit(1)
	}
	fmt.Println(url)
	set := sim.Settings()
	log.Info("simulator listening", "url", url, "client_id", sim.ClientID(), "latency_ms", set.LatencyMs,
		"rate_limit", set.RateLimit, "access_token_ttl_ms", set.AccessTokenTTLMs)
	<-ctx.Done()
	log.Info("simulator stopping")
	stop()
}
