package breaker

import (
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

func cfg() Config {
	return Config{Window: time.Minute, Threshold: 3, Cooldown: 5 * time.Minute, ProbeLease: 30 * time.Second, CacheTTL: time.Second}
}

func TestClosedOpensAtThresholdWithinWindow(t *testing.T) {
	t.Parallel()
	c, r := cfg(), Record{Key: "host:x"}
	var tr *Transition
	for i := range 3 {
		var changed bool
		r, changed, tr = OnResult(c, r, Failure, 0, "a", t0.Add(time.Duration(i)*10*time.Second))
		if !changed {
			t.Fatalf("failure %d not recorded", i)
		}
	}
	if tr == nil || tr.To != Open || r.Effective(t0.Add(30*time.Second)) != Open {
		t.Fatalf("after 3 failures: %+v %+v", r, tr)
	}
	if a := Admit(c, r, t0.Add(time.Minute)); a.Allow || !a.RetryAt.Equal(r.OpenUntil) {
		t.Errorf("open breaker admitted: %+v", a)
	}
}

func TestWindowRollsOver(t *testing.T) {
	t.Parallel()
	c, r := cfg(), Record{Key: "host:x"}
	r, _, _ = OnResult(c, r, Failure, 0, "a", t0)
	r, _, _ = OnResult(c, r, Failure, 0, "a", t0.Add(30*time.Second))
	r, _, tr := OnResult(c, r, Failure, 0, "a", t0.Add(61*time.Second)) // new window
	if tr != nil || r.Failures != 1 || r.Effective(t0.Add(61*time.Second)) != Closed {
		t.Errorf("old failures counted across the window: %+v %+v", r, tr)
	}
}

func TestHealthySuccessWritesNothing(t *testing.T) {
	t.Parallel()
	r := Record{Key: "host:x"}
	if _, changed, _ := OnResult(cfg(), r, Success, 0, "a", t0); changed {
		t.Error("a success on a healthy breaker asks for a write")
	}
	if a := Admit(cfg(), r, t0); !a.Allow || a.Probe {
		t.Errorf("closed breaker: %+v", a)
	}
}

func TestRateLimitHonoursRetryAfter(t *testing.T) {
	t.Parallel()
	c := cfg()
	for _, ra := range []time.Duration{10 * time.Second, 10 * time.Minute} {
		r, _, tr := OnResult(c, Record{Key: "token:t"}, RateLimited, ra, "a", t0)
		if tr == nil || tr.To != Open || !r.OpenUntil.Equal(t0.Add(ra)) {
			t.Errorf("429 Retry-After %s: %+v %+v", ra, r, tr)
		}
		if a := Admit(c, r, t0.Add(ra-time.Second)); a.Allow {
			t.Errorf("admitted before Retry-After %s passed", ra)
		}
		if a := Admit(c, r, t0.Add(ra)); !a.Allow || !a.Probe {
			t.Errorf("after Retry-After %s: %+v, want a probe", ra, a)
		}
	}
	// Without Retry-After a 429 counts as a failure only.
	r, _, tr := OnResult(c, Record{Key: "k"}, RateLimited, 0, "a", t0)
	if tr != nil || r.Failures != 1 {
		t.Errorf("429 without Retry-After: %+v %+v", r, tr)
	}
	// A longer Retry-After while open extends; a shorter one does not.
	open, _, _ := OnResult(c, Record{Key: "k"}, RateLimited, time.Minute, "a", t0)
	ext, changed, _ := OnResult(c, open, RateLimited, 2*time.Minute, "b", t0.Add(time.Second))
	if !changed || !ext.OpenUntil.Equal(t0.Add(time.Second+2*time.Minute)) {
		t.Errorf("longer Retry-After not honoured: %+v", ext)
	}
	if _, changed, _ := OnResult(c, open, RateLimited, time.Second, "b", t0.Add(time.Second)); changed {
		t.Error("a shorter Retry-After changed an open breaker")
	}
}

func TestExactlyOneProbe(t *testing.T) {
	t.Parallel()
	c := cfg()
	r := Record{Key: "host:x", State: Open, OpenUntil: t0}
	now := t0.Add(time.Second)
	a, ok := LeaseProbe(c, r, "a", now)
	if !ok || a.ProbeOwner != "a" || a.Version != r.Version+1 {
		t.Fatalf("first lease: %+v %v", a, ok)
	}
	if _, ok := LeaseProbe(c, a, "b", now.Add(time.Second)); ok {
		t.Error("a second instance leased the probe inside the lease")
	}
	if adm := Admit(c, a, now.Add(time.Second)); adm.Allow {
		t.Errorf("admitted while another probes: %+v", adm)
	}
	if _, ok := LeaseProbe(c, a, "b", now.Add(31*time.Second)); !ok {
		t.Error("an expired probe lease was not taken over")
	}
}

func TestProbeSuccessClosesFailureReopens(t *testing.T) {
	t.Parallel()
	c := cfg()
	r, _ := LeaseProbe(c, Record{Key: "k", State: Open, OpenUntil: t0, Failures: 4}, "a", t0)
	closed, changed, tr := OnResult(c, r, Success, 0, "a", t0.Add(time.Second))
	if !changed || tr == nil || tr.From != HalfOpen || tr.To != Closed || closed.Failures != 0 || closed.Effective(t0.Add(time.Second)) != Closed {
		t.Errorf("probe success: %+v %+v", closed, tr)
	}
	reopened, _, tr := OnResult(c, r, Failure, 0, "a", t0.Add(time.Second))
	if tr == nil || tr.To != Open || !reopened.OpenUntil.Equal(t0.Add(time.Second+c.Cooldown)) {
		t.Errorf("probe failure: %+v %+v", reopened, tr)
	}
	// Someone else's success does not close it.
	if _, _, tr := OnResult(c, r, Success, 0, "b", t0.Add(time.Second)); tr != nil {
		t.Errorf("a non-probe success closed the circuit: %+v", tr)
	}
}

func TestKeysNeverLeakTokens(t *testing.T) {
	t.Parallel()
	k := TokenKey("at_supersecret")
	if strings.Contains(k, "supersecret") || !strings.HasPrefix(k, "token:") {
		t.Errorf("TokenKey = %q", k)
	}
	if TokenKey("a") == TokenKey("b") {
		t.Error("different tokens share a key")
	}
}

func BenchmarkAdmit(b *testing.B) {
	r := Record{Key: "k", State: Closed}
	c := cfg()
	for b.Loop() {
		_ = Admit(c, r, t0)
	}
}

func BenchmarkOnResult(b *testing.B) {
	r := Record{Key: "k"}
	c := cfg()
	for b.Loop() {
		_, _, _ = OnResult(c, r, Failure, 0, "a", t0)
	}
}
