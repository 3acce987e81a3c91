package publish_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/conveyor/conveyor/internal/breaker"
	"github.com/conveyor/conveyor/localstack/awstest"
	"github.com/conveyor/conveyor/localstack/stack"
)

// TestOneTokensRateLimitLeavesTheHostCircuitClosed: one owner's sixteen
// jobs drive its access token into the simulator's per-token rate limit
// (hundreds of 429s, its token's circuit flagged again and again); the
// host's circuit, which every owner's jobs share, stays closed, and
// another owner's publish job goes through at its first attempt, never
// waiting on a circuit.
func TestOneTokensRateLimitLeavesTheHostCircuitClosed(t *testing.T) {
	t.Parallel()
	// The default threshold (5 failures in a minute) and cooldown (5
	// minutes): a host circuit opened by the noisy token would hold the
	// other owner's job for minutes.
	b := awstest.Setup(t, nil, stack.Options{})
	sim := b.Stack.Simulator
	noisy, quiet := b.Token("u-limited", "user", "enterprise"), b.Token("u-bystander", "user", "pro")
	b.Connect(noisy)
	b.Connect(quiet)
	const noisyJobs = 16
	var ups []string
	for i := range noisyJobs {
		ups = append(ups, b.Upload(noisy, awstest.PNG(t, 4+i)))
	}
	quietUp := b.Upload(quiet, awstest.PNG(t, 3))

	// Per token: 4 calls per 2 s window, each call taking 200 ms. Eight of
	// the noisy owner's jobs run at once (its plan's slots): each window
	// most of their calls are answered 429 with a Retry-After. The quiet
	// owner's job needs two calls, within its own token's limit.
	set := sim.Settings()
	set.RateLimit, set.RateWindowMs, set.LatencyMs = 4, 2000, 200
	if !sim.SetSettings(set) {
		t.Fatalf("the simulator refused the settings %+v", set)
	}
	for i, up := range ups {
		b.Must(b.Call("POST", "/v1/jobs", noisy, map[string]any{"items": []any{map[string]any{"uploadId": up}},
			"params": map[string]any{"title": fmt.Sprint("noisy ", i)}}), 201)
	}
	limited := func() int {
		n := 0
		for path, byStatus := range sim.Stats().Calls {
			if strings.HasPrefix(path, "/api/v1/oauth2/stash") {
				n += byStatus["429"]
			}
		}
		return n
	}
	ctx := context.Background()
	host := breaker.Key("host", strings.TrimPrefix(b.Stack.SimulatorURL, "http://"))
	hostState := func() breaker.State {
		recs, err := b.Stack.App.Breaker.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			if r.Key == host {
				return r.Effective(time.Now())
			}
		}
		return breaker.Closed
	}
	// More 429s than the threshold, within one breaker window, and the
	// token's circuit flagged: its record exists only once a 429 counted
	// on it (an open state lasts only the Retry-After, a second or two, so
	// a poll of a loaded machine may never see it).
	tokenFlagged := false
	b.Eventually(func() bool {
		recs, err := b.Stack.App.Breaker.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			tokenFlagged = tokenFlagged || strings.HasPrefix(r.Key, "token:")
		}
		return tokenFlagged && limited() >= 8
	}, "the noisy token to be rate limited and its circuit flagged")
	if s := hostState(); s != breaker.Closed {
		t.Errorf("the host's circuit %s is %s after one token's %d 429s, want closed", host, s, limited())
	}

	start := time.Now()
	r := b.Must(b.Call("POST", "/v1/jobs", quiet, map[string]any{"items": []any{map[string]any{"uploadId": quietUp}},
		"params": map[string]any{"title": "bystander"}}), 201)
	id := r.Body["id"].(string)
	// Generous against the 0.7 s it takes alone, far below the five
	// minutes an open host circuit would hold it.
	const bound = 30 * time.Second
	var got awstest.Response
	for got = b.Call("GET", "/v1/jobs/"+id, quiet, nil); got.Body["status"] != "succeeded" && time.Since(start) < bound; {
		time.Sleep(50 * time.Millisecond)
		got = b.Call("GET", "/v1/jobs/"+id, quiet, nil)
	}
	took := time.Since(start)
	t.Logf("another owner's publish job took %s while one token was rate limited (%d 429s by then)", took.Round(time.Millisecond), limited())
	if got.Body["status"] != "succeeded" {
		t.Fatalf("another owner's publish job is %v after %s, want succeeded (host circuit %s); job: %s", got.Body["status"], bound, hostState(), got.Raw)
	}
	if got.Body["attempts"].(float64) != 1 {
		t.Errorf("attempts = %v, want 1", got.Body["attempts"])
	}
	as := b.Must(b.Call("GET", "/v1/jobs/"+id+"/attempts", quiet, nil), 200).Body["attempts"].([]any)
	if len(as) != 1 || as[0].(map[string]any)["outcome"] != "succeeded" {
		t.Errorf("the bystander's runs = %v, want one that succeeded (no wait for a circuit)", as)
	}
	if s := hostState(); s != breaker.Closed {
		t.Errorf("the host's circuit is %s at the end, want closed", s)
	}
}
