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

// simulatorAddrDefault is the simulator's listen address when neither
// -addr nor CONVEYOR_SIMULATOR_ADDR says otherwise.
const simulatorAddrDefault = "127.0.0.1:8090"

// runSimulator is the simulator subcommand: the external-API simulator on
// its own (the run subcommand starts one inside the stack),
//
//	conveyor-local simulator -addr 127.0.0.1:8090
//
// The address defaults to $CONVEYOR_SIMULATOR_ADDR, else
// simulatorAddrDefault. The token endpoint accepts only the client in
// $CONVEYOR_DEVIANTART_CLIENT_ID and $CONVEYOR_DEVIANTART_CLIENT_SECRET
// (else the simulator's default client); CONVEYOR_SIMULATOR_TOKEN_TTL,
// _RATE_LIMIT, _RATE_WINDOW, _LATENCY and _LATENCY_JITTER set the rest (see
// simulator.OptionsFromEnv). It prints the base URL on stdout, logs JSON on
// stderr, and stops on SIGINT or SIGTERM.
func runSimulator(args []string) int {
	fs := flag.NewFlagSet("simulator", flag.ContinueOnError)
	def := os.Getenv("CONVEYOR_SIMULATOR_ADDR")
	if def == "" {
		def = simulatorAddrDefault
	}
	addr := fs.String("addr", def, "listen address (env CONVEYOR_SIMULATOR_ADDR)")
	if code, done := parse(fs, args); done {
		return code
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))

	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	opts, err := simulator.OptionsFromEnv(os.Getenv)
	if err != nil {
		log.Error("configuring the simulator", "error", err)
		return 2
	}
	sim, url, stop, err := simulator.Start(*addr, opts)
	if err != nil {
		log.Error("starting the simulator", "addr", *addr, "error", err)
		return 1
	}
	fmt.Println(url)
	set := sim.Settings()
	log.Info("simulator listening", "url", url, "client_id", sim.ClientID(), "latency_ms", set.LatencyMs,
		"rate_limit", set.RateLimit, "access_token_ttl_ms", set.AccessTokenTTLMs)
	<-ctx.Done()
	log.Info("simulator stopping")
	stop()
	return 0
}
