package breaker

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/conveyor/conveyor/internal/clock"
)

// hostRun applies outcomes to one host's record with an injected clock, the
// way a store would (every changed record written), and counts writes.
type hostRun struct {
	t           *testing.T
	c           Config
	clk         *clock.Simulated
	r           Record
	writes      int
	transitions []string
}

func newHostRun(t *testing.T, c Config) *hostRun {
	return &hostRun{t: t, c: c, clk: clock.NewSimulated(t0), r: Record{Key: Key("host", "api.example.com")}}
}

func (h *hostRun) apply(o Outcome, owner string) {
	h.t.Helper()
	next, changed, tr := OnHostResult(h.c, h.r, o, owner, h.clk.Now())
	if changed {
		if next.Version != h.r.Version+1 {
			h.t.Fatalf("version %d after %d", next.Version, h.r.Version)
		}
		h.r = next
		h.writes++
	} else if tr != nil || !cmp.Equal(next, h.r) {
		h.t.Fatalf("unchanged, yet the record or a transition differs: %+v %+v", next, tr)
	}
	if tr != nil {
		h.transitions = append(h.transitions, fmt.Sprintf("%s→%s (%s)", tr.From, tr.To, tr.Reason))
	}
}

func (h *hostRun) state() State { return h.r.Effective(h.clk.Now()) }

// TestOneOwnerNeverOpensTheHost: however many failures and 429s one owner
// sees, the host's circuit stays closed, and the owner's failures after
// its first in a window cost no write.
func TestOneOwnerNeverOpensTheHost(t *testing.T) {
	t.Parallel()
	h := newHostRun(t, cfg())
	for i := range 100 {
		h.apply(Failure, OwnerKey("a"))
		h.apply(RateLimited, OwnerKey("a"))
		h.clk.Advance(100 * time.Millisecond)
		if i == 0 && h.writes != 1 {
			t.Fatalf("the owner's first failure made %d writes, want 1", h.writes)
		}
	}
	if h.state() != Closed || h.r.Failures != 1 || h.writes != 1 || len(h.transitions) != 0 {
		t.Errorf("after one owner's 100 failures and 100 429s in one window: %s, %d failures, %d writes, %v; want closed, 1, 1, none",
			h.state(), h.r.Failures, h.writes, h.transitions)
	}
	// A new window counts the owner once again, still alone.
	h.clk.Advance(cfg().Window)
	h.apply(Failure, OwnerKey("a"))
	if h.state() != Closed || h.r.Failures != 1 || !h.r.WindowStart.Equal(h.clk.Now()) || h.writes != 2 {
		t.Errorf("in a new window: %+v after %d writes; want closed with one failure in a window from now", h.r, h.writes)
	}
}

// TestDistinctOwnersOpenTheHost: the host opens when HostOwners distinct
// owners failed within one window, for the cooldown; owners spread over
// two windows do not open it. A token without a known owner counts as an
// owner of its own.
func TestDistinctOwnersOpenTheHost(t *testing.T) {
	t.Parallel()
	c := cfg() // HostOwners 0: the default, 3
	h := newHostRun(t, c)
	h.apply(Failure, "token:a")
	h.apply(Failure, "token:a")
	h.apply(Failure, "token:b")
	h.clk.Advance(c.Window) // a's and b's window ends
	h.apply(Failure, "token:c")
	if h.state() != Closed || h.r.Failures != 1 {
		t.Fatalf("three owners over two windows: %s with %d, want closed with 1 (c alone in its window)", h.state(), h.r.Failures)
	}
	h.clk.Advance(10 * time.Second)
	h.apply(Failure, "token:d")
	h.apply(Failure, "token:c") // counted already
	if h.state() != Closed || h.r.Failures != 2 {
		t.Fatalf("two owners in the window: %s with %d, want closed with 2", h.state(), h.r.Failures)
	}
	h.clk.Advance(10 * time.Second)
	h.apply(Failure, OwnerKey("e"))
	if h.state() != Open || !h.r.OpenUntil.Equal(h.clk.Now().Add(c.Cooldown)) {
		t.Fatalf("after the third owner: %+v, want open for the cooldown", h.r)
	}
	if diff := cmp.Diff([]string{"token:c", "token:d", OwnerKey("e")}, h.r.Owners); diff != "" {
		t.Errorf("owners (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"closed→open (failures of 3 owners within 1m0s)"}, h.transitions); diff != "" {
		t.Errorf("transitions (-want +got):\n%s", diff)
	}
	// Open: late results and 429s change nothing (a host is never flagged).
	writes := h.writes
	h.apply(Failure, "token:f")
	h.apply(RateLimited, "token:f")
	if h.writes != writes {
		t.Errorf("late results of an open host's calls were written")
	}

	two := newHostRun(t, with2(c, func(c *Config) { c.HostOwners = 2 }))
	two.apply(Failure, "token:a")
	two.apply(Failure, "token:b")
	if two.state() != Open {
		t.Errorf("HostOwners 2: two owners left it %s", two.state())
	}
}

// TestHostProbe: a half-open host's probe that gets a token's 429 closes
// the circuit (the API answered); one that fails re-opens it; a 429 of no
// known owner or token counts as a failure.
func TestHostProbe(t *testing.T) {
	t.Parallel()
	c := cfg()
	for _, tc := range []struct {
		name  string
		o     Outcome
		owner string
		want  State
	}{
		{"token's 429", RateLimited, "token:a", Closed},
		{"success", Success, "token:a", Closed},
		{"failure", Failure, "token:a", Open},
		{"429 of nobody known", RateLimited, "", Open},
		{"ignored", Ignored, "token:a", HalfOpen},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHostRun(t, c)
			for _, v := range []string{"token:x", "token:y", "token:z"} {
				h.apply(Failure, v)
			}
			h.clk.Set(h.r.OpenUntil)
			leased, ok := LeaseProbe(c, h.r, "lambda-a", h.clk.Now())
			if !ok {
				t.Fatal("no probe lease once half-open")
			}
			h.r = leased
			h.clk.Advance(time.Second)
			h.apply(tc.o, tc.owner)
			if got := h.state(); got != tc.want {
				t.Errorf("after the probe's %s: %s, want %s", tc.o, got, tc.want)
			}
			if tc.want == Closed && (h.r.Failures != 0 || len(h.r.Owners) != 0) {
				t.Errorf("a closed host keeps its failures: %+v", h.r)
			}
		})
	}

	// Closed: a 429 of nobody known is one failure, counted once like an
	// owner's.
	h := newHostRun(t, c)
	h.apply(RateLimited, "")
	h.apply(RateLimited, "")
	h.apply(RateLimited, "token:a") // the token's own limit: no failure
	if h.r.Failures != 1 || h.state() != Closed {
		t.Errorf("two anonymous 429s and a token's: %+v, want one failure, closed", h.r)
	}
}

// TestSingleTokenDeployment: with one token, the host never opens, and the
// token's own circuit opens on its Threshold failures within the window
// (and on its 429 at once), which stops every call of that deployment.
func TestSingleTokenDeployment(t *testing.T) {
	t.Parallel()
	c := cfg() // Threshold 3
	clk := clock.NewSimulated(t0)
	tok, host := Record{Key: TokenKey("the-only-one")}, Record{Key: Key("host", "api.example.com")}
	for range c.Threshold {
		if a := Admit(c, tok, clk.Now()); !a.Allow {
			t.Fatalf("refused before the threshold: %+v", a)
		}
		tok, _, _ = OnResult(c, tok, Failure, 0, clk.Now())
		host, _, _ = OnHostResult(c, host, Failure, tok.Key, clk.Now())
		clk.Advance(time.Second)
	}
	if tok.Effective(clk.Now()) != Open || host.Effective(clk.Now()) != Closed {
		t.Errorf("after %d failures of the only token: token %s, host %s; want open, closed", c.Threshold, tok.Effective(clk.Now()), host.Effective(clk.Now()))
	}
	if a := Admit(c, tok, clk.Now()); a.Allow || !a.RetryAt.Equal(tok.OpenUntil) {
		t.Errorf("the open token admits %+v", a)
	}
}

// TestOnHostResultLeavesItsInputAlone: a record from a snapshot shared by
// concurrent callers is not changed through its Owners.
func TestOnHostResultLeavesItsInputAlone(t *testing.T) {
	t.Parallel()
	c := with2(cfg(), func(c *Config) { c.HostOwners = 5 })
	tokens := make([]string, 1, 8)
	tokens[0] = "token:a"
	r := Record{Key: Key("host", "h"), Failures: 1, Owners: tokens, WindowStart: t0, Version: 1}
	x, _, _ := OnHostResult(c, r, Failure, "token:b", t0.Add(time.Second))
	y, _, _ := OnHostResult(c, r, Failure, "token:c", t0.Add(time.Second))
	if diff := cmp.Diff([]string{"token:a", "token:b"}, x.Owners); diff != "" {
		t.Errorf("first (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"token:a", "token:c"}, y.Owners); diff != "" {
		t.Errorf("second (-want +got):\n%s", diff)
	}
	if len(r.Owners) != 1 || tokens[:2][1] != "" {
		t.Errorf("the input's owners changed: %v", tokens[:2])
	}
}
