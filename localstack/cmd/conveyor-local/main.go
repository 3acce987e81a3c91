// Command conveyor-local is `make run`: the whole of Conveyor on localhost,
// working — emulators (moto and DynamoDB Local), provisioning, simulator, API gateway, queue pollers,
// S3 notifications and schedules. Ctrl-C stops every process it started.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/conveyor/conveyor/localstack/stack"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	fmt.Fprintln(os.Stderr, "starting Conveyor locally…")
	s, err := stack.Start(ctx, stack.Options{})
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
	fmt.Printf("\n  API        %s   (curl %s/healthz)\n  simulator  %s\n  moto       %s   (every service but DynamoDB)\n  DynamoDB   %s   (DynamoDB Local)\n",
		s.APIURL, s.APIURL, s.SimulatorURL, s.Endpoints.Default, s.Endpoints.DynamoDB)
	if s.DynamoDBStart > 0 {
		fmt.Printf("  started in moto %s, DynamoDB Local %s; logs %s\n", s.EmulatorStart.Round(time.Millisecond), s.DynamoDBStart.Round(time.Millisecond), strings.Join(s.EmulatorLogs, ", "))
	}
	fmt.Printf("\nCtrl-C stops everything.\n")
	<-ctx.Done()
	fmt.Fprintln(os.Stderr, "stopping…")
}
