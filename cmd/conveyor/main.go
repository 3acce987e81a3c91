// Command conveyor is the operator CLI.
//
//	conveyor token [--sub ID] [--role user|admin|service] [--plan PLAN] [--ttl 24h]
//	conveyor overview [--env staging,prod-ru,prod-en] [--json] [--watch 5s]
//	conveyor jobs restart <jobId…> [--item itemId] [--env E]
//	conveyor jobs stop <jobId…> [--env E]
//	conveyor dlq peek <tier> [--limit 10] [--json] [--env E]
//	conveyor dlq redrive <tier> [jobId…] [--batch 100] [--task] [--env E]
//	conveyor tier pause|resume <tier> [--env E]
//	conveyor breaker list [--env E] · conveyor breaker reset <key> [--env E]
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
// progress bars go to stderr.
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
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	c := &cli{stdout: os.Stdout, stderr: os.Stderr, getenv: os.Getenv, http: &http.Client{Timeout: 30 * time.Second}, now: time.Now}
	err := c.run(ctx, os.Args[1:])
	var ee *exitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		if ee.msg != "" {
			fmt.Fprintf(os.Stderr, "conveyor: %s\n", ee.msg)
		}
		os.Exit(ee.code)
	default:
		fmt.Fprintf(os.Stderr, "conveyor: %v\n", err)
		os.Exit(2)
	}
}

// cli is one invocation's world: where it writes, what it reads.
type cli struct {
	stdout, stderr io.Writer
	getenv         func(string) string
	http           *http.Client
	now            func() time.Time
}

// exitError ends the command with code; msg (if any) goes to stderr.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

// errPartial: some environment or some job failed; what worked was printed.
var errPartial = &exitError{code: 1}

const usage = `usage:
  conveyor token [--sub ID] [--role user|admin|service] [--plan PLAN] [--ttl 24h]
  conveyor overview [--env a,b,…] [--json] [--watch 5s] [--config FILE]
  conveyor jobs restart <jobId…> [--item itemId] [--env E]
  conveyor jobs stop <jobId…> [--env E]
  conveyor dlq peek <tier> [--limit 10] [--json] [--env E]
  conveyor dlq redrive <tier> [jobId…] [--batch 100] [--task] [--env E]
  conveyor tier pause|resume <tier> [--env E]
  conveyor breaker list|reset [key] [--env E]`

func (c *cli) run(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return errors.New(usage)
	}
	sub := func(want string) (string, []string, error) {
		if len(args) < 2 {
			return "", nil, fmt.Errorf("usage: conveyor %s %s …", args[0], want)
		}
		return args[1], args[2:], nil
	}
	switch args[0] {
	case "token":
		return c.token(args[1:])
	case "overview":
		return c.overview(ctx, args[1:])
	case "jobs":
		verb, rest, err := sub("restart|stop")
		if err != nil {
			return err
		}
		return c.jobs(ctx, verb, rest)
	case "dlq":
		verb, rest, err := sub("peek|redrive")
		if err != nil {
			return err
		}
		return c.dlq(ctx, verb, rest)
	case "tier":
		verb, rest, err := sub("pause|resume")
		if err != nil {
			return err
		}
		return c.tier(ctx, verb, rest)
	case "breaker", "breakers":
		verb, rest, err := sub("list|reset")
		if err != nil {
			return err
		}
		return c.breaker(ctx, verb, rest)
	case "help", "-h", "--help":
		_, err := fmt.Fprintln(c.stdout, usage)
		return err
	default:
		return fmt.Errorf("unknown command %q\n%s", args[0], usage)
	}
}
