package publish_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/conveyor/conveyor/internal/accounts"
	"github.com/conveyor/conveyor/internal/aws/store"
	"github.com/conveyor/conveyor/internal/breaker"
	"github.com/conveyor/conveyor/internal/deviantart"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/publish"
	"github.com/conveyor/conveyor/internal/retry"
	"github.com/conveyor/conveyor/internal/worker"
	"github.com/conveyor/conveyor/localstack/simulator"
)

// guardedBundle is a publisher whose API calls go through the shared
// circuit breaker (one failure opens it), logging into logs.
type guardedBundle struct {
	*pubBundle
	logs    *bytes.Buffer
	hostKey string
}

func setupGuarded(t *testing.T) *guardedBundle {
	t.Helper()
	b := setupPublisher(t)
	g := &guardedBundle{pubBundle: b, logs: &bytes.Buffer{}}
	log := slog.New(slog.NewJSONHandler(g.logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	api, err := deviantart.New(deviantart.Config{BaseURL: b.simURL, ClientID: simulator.ClientIDDefault, ClientSecret: simulator.ClientSecretDefault, CallTimeout: 20 * time.Second, UploadRateMin: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	br, err := breaker.New(breaker.Options{Config: breaker.Config{Window: time.Minute, Threshold: 1, Cooldown: 5 * time.Minute, ProbeLease: time.Minute},
		Store: store.New(b.db, b.table, b.clk.Now), Owner: "w-test", Now: b.clk.Now, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	g.hostKey = breaker.Key("host", "sim.test")
	b.tokens = accounts.New(accounts.Config{Store: b.st, Sealer: b.sealer, Refresher: api, Now: b.clk.Now, Logger: log})
	b.pub = worker.New(worker.Config{Store: b.st,
		Policy: retry.Policy{Base: 2 * time.Second, Max: 15 * time.Minute, MaxAttempts: 7, ParkAfter: time.Minute}, Worker: "w-test", Now: b.clk.Now, Logger: log,
		Kinds: job.NewRegistry(publish.New(publish.Config{Store: b.st, Objects: b.objects, Tokens: b.tokens, Logger: log,
			API: breaker.GuardedAPI{API: api, Breaker: br, HostKey: g.hostKey}}))})
	return g
}

// TestCircuitOpenWaitSaysWhichBreakerAndIsNotAFailure: a job refused by an
// open circuit says why it waits (circuit_open, the breaker's key, until
// when) and is logged as a wait at INFO, never as "job failed" at WARN;
// before that, the failure that opened the circuit shows as a backoff with
// its error.
func TestCircuitOpenWaitSaysWhichBreakerAndIsNotAFailure(t *testing.T) {
	t.Parallel()
	g := setupGuarded(t)
	ctx := context.Background()
	j := g.job(t, job.Medium, 1)
	g.sim.AddFault(simulator.Fault{Path: "/api/v1/oauth2/stash/submit", Status: 503, Count: 1})

	if _, err := g.pub.Run(ctx, worker.Delivery{JobID: j.ID, Receives: 1}); err != nil {
		t.Fatal(err)
	}
	got := g.get(t, j.ID)
	if got.Wait == nil || got.Wait.Reason != job.WaitBackoff || got.Wait.Until == nil || !got.Wait.Until.Equal(*got.RetryAt) || got.Wait.Detail == "" {
		t.Fatalf("after a 503: wait %+v retryAt %v; want backoff until retryAt with the error", got.Wait, got.RetryAt)
	}

	g.clk.Advance(time.Minute) // past the backoff; the circuit stays open 5m
	g.logs.Reset()
	v, err := g.pub.Run(ctx, worker.Delivery{JobID: j.ID, Receives: 2})
	if err != nil {
		t.Fatal(err)
	}
	got = g.get(t, j.ID)
	// The 503 opened the token's circuit (a threshold of 1); the host's
	// counts it as one of the tokens it needs.
	if got.Status != job.Queued || got.Wait == nil || got.Wait.Reason != job.WaitCircuitOpen || !strings.HasPrefix(got.Wait.Breaker, "token:") ||
		got.Wait.Until == nil || !got.Wait.Until.After(g.clk.Now()) || !strings.Contains(got.Wait.Detail, "circuit open") {
		t.Fatalf("refused by the open circuit (verdict %+v): status %s wait %+v; want queued, circuit_open on the job's token until a later time", v, got.Status, got.Wait)
	}
	if got.Waiting != job.WaitCircuitOpen {
		t.Errorf("a 5m wait should park the job: waiting %q", got.Waiting)
	}
	logs := g.logs.String()
	if strings.Contains(logs, `"msg":"job failed"`) || jobWarned(logs) {
		t.Errorf("the circuit-open wait was logged as a failure or a warning:\n%s", logs)
	}
	if !strings.Contains(logs, `"msg":"job waits: circuit open`) {
		t.Errorf("no INFO line says the job waits:\n%s", logs)
	}
}

// TestRateLimitedWaitHonoursRetryAfter: a 429 with Retry-After shows as a
// rate_limited wait until then, saying what the API sent.
func TestRateLimitedWaitHonoursRetryAfter(t *testing.T) {
	t.Parallel()
	g := setupGuarded(t)
	ctx := context.Background()
	j := g.job(t, job.Medium, 1)
	g.sim.AddFault(simulator.Fault{Path: "/api/v1/oauth2/stash/submit", Status: 429, RetryAfter: 120, Count: 1})
	if _, err := g.pub.Run(ctx, worker.Delivery{JobID: j.ID, Receives: 1}); err != nil {
		t.Fatal(err)
	}
	got := g.get(t, j.ID)
	if got.Wait == nil || got.Wait.Reason != job.WaitRateLimited || got.Wait.Until == nil ||
		got.Wait.Until.Before(g.clk.Now().Add(2*time.Minute)) || !strings.Contains(got.Wait.Detail, "Retry-After 2m0s") || got.Attempts != 0 {
		t.Fatalf("after a 429 with Retry-After 120: wait %+v attempts %d; want rate_limited until ≥ now+2m, the Retry-After said, no attempt spent", got.Wait, got.Attempts)
	}
	if jobWarned(g.logs.String()) || !strings.Contains(g.logs.String(), `"msg":"job waits: rate limited`) {
		t.Errorf("a 429 wait was not logged as a wait at INFO:\n%s", g.logs.String())
	}
}

// jobWarned reports whether a log line about the job (not the breaker's
// own state change, which warns) is at WARN.
func jobWarned(logs string) bool {
	for _, l := range strings.Split(logs, "\n") {
		if strings.Contains(l, `"level":"WARN"`) && strings.Contains(l, `"msg":"job `) {
			return true
		}
	}
	return false
}
