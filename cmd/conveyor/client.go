package main

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strings"

	"github.com/conveyor/conveyor/internal/apiclient"
)

// api is the API client of target t: its URL and token, the CLI's HTTP
// client (and so its timeout). A call that reaches no server fails with an
// *unreachableError that says what to do about it.
func (c *cli) api(t target) *apiclient.Client {
	h := *c.http
	base := h.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	h.Transport = unreachableHint{base: base, t: t}
	opts := []apiclient.Option{apiclient.WithToken(t.token), apiclient.WithHTTPClient(&h), apiclient.WithUserAgent("conveyor-cli")}
	if t.streamURL != "" {
		opts = append(opts, apiclient.WithStreamURL(t.streamURL))
	}
	return apiclient.New(t.url, opts...)
}

// unreachableError: nothing answers at the environment's URL (connection
// refused, no such host, unreachable network).
type unreachableError struct {
	t   target
	err error
}

func (e *unreachableError) Error() string {
	origin := e.t.url
	if e.t.name == localEnv {
		msg := fmt.Sprintf("no Conveyor stack answers at %s: start one with `make run`, or pass --env-file", origin)
		if e.t.envFile != "" {
			msg += fmt.Sprintf(" (the address came from %s", e.t.envFile)
			if others := otherEnvFiles(e.t.envFile); len(others) > 0 {
				msg += "; other stacks wrote " + strings.Join(others, ", ")
			}
			msg += ")"
		}
		return msg
	}
	return fmt.Sprintf("no Conveyor API answers at %s (environment %q): check its url in the environments file (--config) and your network", origin, e.t.name)
}

func (e *unreachableError) Unwrap() error { return e.err }

// otherEnvFiles lists the env files of other local stacks beside path
// (make run writes .local/env, or .local/env.<port> when .local/env
// belongs to another running stack).
func otherEnvFiles(path string) []string {
	matches, _ := filepath.Glob(filepath.Join(filepath.Dir(path), "env*"))
	var out []string
	for _, m := range matches {
		if m != path && !strings.HasSuffix(m, "~") {
			out = append(out, m)
		}
	}
	return out
}

// unreachableHint turns a failure to connect into an *unreachableError.
type unreachableHint struct {
	base http.RoundTripper
	t    target
}

func (u unreachableHint) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := u.base.RoundTrip(r)
	if err != nil && r.Context().Err() == nil && isUnreachable(err) {
		return nil, &unreachableError{t: u.t, err: err}
	}
	return resp, err
}

// isUnreachable: the error is a failed dial (refused, no route, no such
// host), not a failure of a server that answered.
func isUnreachable(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	var dns *net.DNSError
	return errors.As(err, &dns)
}

// friendly drops the transport's wrapping ("Get \"http://…\": dial tcp …")
// from an unreachable environment's error, leaving what to do about it.
func friendly(err error) error {
	var ue *unreachableError
	if errors.As(err, &ue) {
		return ue
	}
	return err
}
