// Command conveyor-local is the local stack's tool. Run without a
// subcommand (or with run) it is `make run`: the whole of Conveyor on
// localhost, working — emulators (moto and DynamoDB Local), provisioning, simulator,
// API gateway, queue pollers, S3 notifications and schedules. By default
// every function runs as its own bootstrap binary (built for this host)
// under the local Lambda Runtime API, and the stream function answers at
// its own URL; -in-process calls the handlers in this process instead.
// Ctrl-C stops every process it started. Its other subcommands (commands.go,
// `conveyor-local help`) are the tools that drive or measure that stack.
//
// The secret that signs local tokens is kept in .local/jwt-secret, so the
// tokens a developer minted stay valid across restarts; -fresh (make run
// FRESH=1) makes a new one. The emulators keep their data in .local/data
// (DynamoDB Local's -dbPath, moto's state file), so jobs, uploads, accounts
// and queued messages outlive a restart; -fresh empties it first. The environment goes to .local/env, unless
// another running stack wrote that file: then to .local/env.<API port>,
// so that each stack's file is its own. A stack removes its file when it
// stops.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"
	_ "time/tzdata" // the local scheduler reads the schedules' zones on any host, as the schedules function does

	"golang.org/x/term"

	"github.com/conveyor/conveyor/localstack/stack"
)

// runStack is the run subcommand: the stack until Ctrl-C.
func runStack(args []string) int {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	inProcess := fs.Bool("in-process", false, "call the functions' handlers in this process instead of running their binaries")
	logFormat := fs.String("log", "auto", "how the functions' and the runtime's logs print: text (time, level, [function], message, fields), json (as CloudWatch Logs receives them) or auto (text on a terminal)")
	fresh := fs.Bool("fresh", false, "start empty: a new secret for local tokens (tokens minted before stop working) and no data of an earlier run")
	if code, done := parse(fs, args); done {
		return code
	}
	secretNote, err := keepJWTSecret(localDir, *fresh)
	if err != nil {
		fmt.Fprintf(os.Stderr, "conveyor-local: %v\n", err)
		return 1
	}
	dataDir, unlock, dataNote, err := keepData(localDir, *fresh)
	if err != nil {
		fmt.Fprintf(os.Stderr, "conveyor-local: %v\n", err)
		return 1
	}
	defer unlock()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	mode := "each function's own binary under the local Lambda Runtime API"
	if *inProcess {
		mode = "the functions' handlers in process"
	}
	fmt.Fprintf(os.Stderr, "starting Conveyor locally (%s)…\n", mode)
	opts := stack.Options{Binaries: !*inProcess, DataDir: dataDir}
	switch *logFormat {
	case "json":
	case "text", "auto":
		if *logFormat == "text" || term.IsTerminal(int(os.Stderr.Fd())) {
			view := stack.NewLogView(os.Stderr, term.IsTerminal(int(os.Stderr.Fd())))
			opts.FunctionOutputs = view.For
			opts.Logger = slog.New(slog.NewJSONHandler(view.For("local"), &slog.HandlerOptions{Level: slog.LevelInfo}))
		}
	default:
		fmt.Fprintf(os.Stderr, "conveyor-local: -log %q: want text, json or auto\n", *logFormat)
		return 2
	}
	s, err := stack.Start(ctx, opts)
	if err != nil {
		fmt.Fprintf(os.Stderr, "conveyor-local: %v\n", err)
		return 1
	}
	defer s.Close()
	envFile := envFileFor(localDir, s.APIURL)
	if err := s.WriteEnv(envFile); err != nil {
		fmt.Fprintf(os.Stderr, "conveyor-local: writing %s: %v\n", envFile, err)
		return 1
	}
	defer os.Remove(envFile)
	env := s.Env()
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	fmt.Printf("Conveyor is running. Environment (also in %s):\n", envFile)
	for _, k := range keys {
		fmt.Printf("  %s=%s\n", k, env[k])
	}
	fmt.Printf("\n  API        %s   (curl %s/healthz)\n  dashboard  %s/dashboard/\n  streams    %s   (GET /v1/events, /v1/jobs/{id}/events)\n  simulator  %s\n  moto       %s   (every service but DynamoDB)\n  DynamoDB   %s   (DynamoDB Local)\n",
		s.APIURL, s.APIURL, s.APIURL, s.StreamURL, s.SimulatorURL, s.Endpoints.Default, s.Endpoints.DynamoDB)
	fmt.Printf("\n  tokens     %s\n  data       %s\n", secretNote, dataNote)
	if envFile != filepath.Join(localDir, "env") {
		fmt.Printf("  env file   another stack is running and owns %s; this one's is %s (conveyor --env-file %s …)\n", filepath.Join(localDir, "env"), envFile, envFile)
	}
	if s.DynamoDBStart > 0 {
		fmt.Printf("  started in moto %s, DynamoDB Local %s; logs %s\n", s.EmulatorStart.Round(time.Millisecond), s.DynamoDBStart.Round(time.Millisecond), strings.Join(s.EmulatorLogs, ", "))
	}
	fmt.Printf("\nCtrl-C stops everything.\n")
	<-ctx.Done()
	fmt.Fprintln(os.Stderr, "stopping…")
	return 0
}
