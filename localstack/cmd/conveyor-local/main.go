// Command conveyor-local is `make run`: the whole of Conveyor on localhost,
// working — emulators (moto and DynamoDB Local), provisioning, simulator,
// API gateway, queue pollers, S3 notifications and schedules. By default
// every function runs as its own bootstrap binary (built for this host)
// under the local Lambda Runtime API, and the stream function answers at
// its own URL; -in-process calls the handlers in this process instead.
// Ctrl-C stops every process it started.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"time"
	_ "time/tzdata" // the local scheduler reads the schedules' zones on any host, as the schedules function does

	"github.com/conveyor/conveyor/localstack/stack"
)

func main() {
	inProcess := flag.Bool("in-process", false, "call the functions' handlers in this process instead of running their binaries")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	mode := "each function's own binary under the local Lambda Runtime API"
	if *inProcess {
		mode = "the functions' handlers in process"
	}
	fmt.Fprintf(os.Stderr, "starting Conveyor locally (%s)…\n", mode)
	s, err := stack.Start(ctx, stack.Options{Binaries: !*inProcess})
	if err != nil {
		fmt.Fprintf(os.Stderr, "conveyor-local: %v\n", err)
		os.Exit(1)
	}
	defer s.Close()
	if err := s.WriteEnv(".local/env"); err != nil {
		fmt.Fprintf(os.Stderr, "conveyor-local: writing .local/env: %v\n", err)
		os.Exit(1)
	}
	env := s.Env()
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	fmt.Println("Conveyor is running. Environment (also in .local/env):")
	for _, k := range keys {
		fmt.Printf("  %s=%s\n", k, env[k])
	}
	fmt.Printf("\n  API        %s   (curl %s/healthz)\n  streams    %s   (GET /v1/events, /v1/jobs/{id}/events)\n  simulator  %s\n  moto       %s   (every service but DynamoDB)\n  DynamoDB   %s   (DynamoDB Local)\n",
		s.APIURL, s.APIURL, s.StreamURL, s.SimulatorURL, s.Endpoints.Default, s.Endpoints.DynamoDB)
	if s.DynamoDBStart > 0 {
		fmt.Printf("  started in moto %s, DynamoDB Local %s; logs %s\n", s.EmulatorStart.Round(time.Millisecond), s.DynamoDBStart.Round(time.Millisecond), strings.Join(s.EmulatorLogs, ", "))
	}
	fmt.Printf("\nCtrl-C stops everything.\n")
	<-ctx.Done()
	fmt.Fprintln(os.Stderr, "stopping…")
}
