// Command conveyor is the operator CLI: one cobra command tree.
//
//	conveyor token [--sub ID] [--role user|admin|service] [--plan PLAN] [--ttl 24h] [--json]
//	conveyor overview [--env staging,prod-ru,prod-en] [--json] [--watch 5s]
//	conveyor jobs list [--status S] [--tier T] [--owner U] [--type K] [--error-code C] [--created-from T] [--created-to T] [--limit N] [--cursor C]
//	conveyor jobs get <jobId>
//	conveyor jobs orphans
//	conveyor jobs restart <jobId…> [--item itemId]
//	conveyor jobs stop <jobId…>
//	conveyor dlq peek <tier> [--limit 10]
//	conveyor dlq redrive <tier> [jobId…] [--batch 100] [--task]
//	conveyor tier pause|resume <tier>
//	conveyor breaker list · conveyor breaker reset <key>
//	conveyor relay replay [--dry-run] [--json]
//	conveyor completion bash|zsh|fish|powershell
//	conveyor version · conveyor --version
//
// Every command that talks to an API takes --env, --config and --env-file;
// every command that prints takes --json. Help goes to stdout and exits 0;
// a usage mistake exits 2, a failure (of the API, or of some of the jobs or
// environments) exits 1.
//
// Environments come from a config file (--config, default
// ~/.config/conveyor/environments.json), each with a url and a token source:
//
//	{"environments": {
//	  "staging": {"url": "https://api.staging.example", "tokenEnv": "CONVEYOR_TOKEN_STAGING"},
//	  "prod-ru": {"url": "https://api.example.ru", "tokenFile": "~/.config/conveyor/prod-ru.token"},
//	  "prod-en": {"url": "https://api.example.com", "token": "eyJ…"}}}
//
// The environment "local" needs no entry: its URL and secret come from
// .local/env (written by `make run`), and the CLI mints itself an admin
// token. `overview` reads every named environment at once, in parallel; an
// environment that fails prints its error and the others still print.
// Actions name exactly one environment. Tables go to stdout, sorted;
// progress bars go to stderr, and only when stderr is a terminal.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"golang.org/x/term"

	"github.com/conveyor/conveyor/internal/aws/awsclient"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := newCLI().main(ctx, os.Args[1:])
	stop()
	os.Exit(code)
}

func newCLI() *cli {
	return &cli{
		stdout: os.Stdout, stderr: os.Stderr, getenv: os.Getenv,
		http: &http.Client{Timeout: 30 * time.Second}, now: time.Now,
		tty:       term.IsTerminal(int(os.Stderr.Fd())),
		awsConfig: awsclient.Load,
	}
}

// cli is one invocation's world: where it writes, what it reads.
type cli struct {
	stdout, stderr io.Writer
	getenv         func(string) string
	http           *http.Client
	now            func() time.Time
	// tty: stderr is a terminal, so a progress bar may redraw itself.
	tty bool
	// opPoll is how often a bulk operation is read while the CLI waits
	// for it (0: apiclient.OperationPollDefault).
	opPoll time.Duration
	// awsConfig is the SDK configuration (the usual chain: profile,
	// region, AWS_ENDPOINT_URL), for `token --env` only.
	awsConfig func(ctx context.Context, opts ...func(*config.LoadOptions) error) (aws.Config, error)
}

// Exit codes.
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
)

// exitError ends the command with code; msg (if any) goes to stderr.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

// errPartial: some environment or some job failed; what worked was printed.
var errPartial = &exitError{code: exitFailure}

// usageError is a mistake in how the command was called: exit 2, with a
// hint to the command's help.
type usageError struct {
	err     error
	command string // the command path, for the hint
}

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error {
	return &usageError{err: fmt.Errorf(format, args...)}
}

// exitCode is the process's exit status for the error run returned.
func exitCode(err error) int {
	var ee *exitError
	var ue *usageError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ue):
		return exitUsage
	case errors.As(err, &ee):
		return ee.code
	default:
		return exitFailure
	}
}

// main runs the command, prints its error (if any) to stderr and returns
// the exit status.
func (c *cli) main(ctx context.Context, args []string) int {
	err := friendly(c.run(ctx, args))
	var ee *exitError
	var ue *usageError
	switch {
	case err == nil:
	case errors.As(err, &ue):
		fmt.Fprintf(c.stderr, "conveyor: %v\n", err)
		if ue.command != "" {
			fmt.Fprintf(c.stderr, "Run '%s --help' for usage.\n", ue.command)
		}
	case errors.As(err, &ee):
		if ee.msg != "" {
			fmt.Fprintf(c.stderr, "conveyor: %s\n", ee.msg)
		}
	default:
		fmt.Fprintf(c.stderr, "conveyor: %v\n", err)
	}
	return exitCode(err)
}

// run executes the command tree on args.
func (c *cli) run(ctx context.Context, args []string) error {
	root := c.root()
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return nil
	}
	var ue *usageError
	if errors.As(err, &ue) {
		if ue.command == "" && cmd != nil {
			ue.command = cmd.CommandPath()
		}
		return err
	}
	// Cobra's own argument and flag complaints are usage errors too.
	if cobraUsage(err) {
		path := ""
		if cmd != nil {
			path = cmd.CommandPath()
		}
		return &usageError{err: err, command: path}
	}
	return err
}
