package deviantart_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/conveyor/conveyor/internal/deviantart"
	"github.com/conveyor/conveyor/localstack/simulator"
)

// TestEveryCallHasAnOverallDeadline: a hung API call ends at the client's
// own deadline even when the caller's context has none.
func TestEveryCallHasAnOverallDeadline(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tok := b.login(t)
	client := newClient(t, deviantart.Config{BaseURL: b.url, ClientID: "conveyor", ClientSecret: clientSecret,
		HTTPClient: &http.Client{Transport: b.rt}, CallTimeout: 200 * time.Millisecond, UploadRateMin: 1 << 30})
	b.sim.AddFault(simulator.Fault{Path: "/api/v1/oauth2/stash/", LatencyMs: 60_000})
	b.sim.AddFault(simulator.Fault{Path: "/oauth2/token", LatencyMs: 60_000})
	calls := map[string]func(ctx context.Context) error{
		"publish": func(ctx context.Context) error { _, err := client.Publish(ctx, tok, 1); return err },
		"item":    func(ctx context.Context) error { _, err := client.Item(ctx, tok, 1); return err },
		"delta":   func(ctx context.Context) error { _, _, err := client.FindByStack(ctx, tok, "s"); return err },
		"refresh": func(ctx context.Context) error { _, err := client.Refresh(ctx, "rt"); return err },
		"submit": func(ctx context.Context) error {
			_, err := client.Submit(ctx, tok, submission("s", bytes.Repeat([]byte{1}, 64)))
			return err
		},
	}
	for name, call := range calls {
		start := time.Now()
		err := call(context.Background())
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s: %v, want context.DeadlineExceeded", name, err)
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("%s took %s", name, d)
		}
	}
}

// TestSubmitTimeoutGrowsWithTheFile: the defaults give a 50 MiB upload 20 s
// plus 50 s at 1 MiB/s, and every other call 20 s.
func TestSubmitTimeoutGrowsWithTheFile(t *testing.T) {
	t.Parallel()
	c, err := deviantart.New(deviantart.Config{BaseURL: "https://api.example", CallTimeout: 20 * time.Second, UploadRateMin: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Timeout(0); got != 20*time.Second {
		t.Errorf("Timeout(0) = %s, want the call timeout", got)
	}
	if got, want := c.Timeout(50<<20), 70*time.Second; got != want {
		t.Errorf("Timeout(50 MiB) = %s, want %s", got, want)
	}
}

// newClient returns a client for cfg with a 20 s call timeout and a
// 1 MiB/s upload rate unless cfg says otherwise.
func newClient(t testing.TB, cfg deviantart.Config) *deviantart.Client {
	t.Helper()
	if cfg.CallTimeout == 0 {
		cfg.CallTimeout = 20 * time.Second
	}
	if cfg.UploadRateMin == 0 {
		cfg.UploadRateMin = 1 << 20
	}
	c, err := deviantart.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestNewRefusesAnIncompleteConfig(t *testing.T) {
	t.Parallel()
	for _, cfg := range []deviantart.Config{
		{CallTimeout: time.Second, UploadRateMin: 1},
		{BaseURL: "https://api.example", UploadRateMin: 1},
		{BaseURL: "https://api.example", CallTimeout: time.Second},
	} {
		if _, err := deviantart.New(cfg); err == nil {
			t.Errorf("New(%+v) = nil error", cfg)
		}
	}
}
