package breaker

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/conveyor/conveyor/internal/clock"
	"github.com/conveyor/conveyor/internal/retry"
)

var t0 = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

func cfg() Config {
	return Config{Window: time.Minute, Threshold: 3, Cooldown: 5 * time.Minute, ProbeLease: 30 * time.Second, CacheTTL: time.Second}
}

// Records in each state, as of the times the tests use them.
var (
	// closedWith2 has two failures in the window that started at t0.
	closedWith2 = Record{Key: "k", State: Closed, Failures: 2, WindowStart: t0, Version: 2, UpdatedAt: t0.Add(10 * time.Second)}
	// opened opened at t0 for the 5m cooldown.
	opened = Record{Key: "k", State: Open, Failures: 3, WindowStart: t0, OpenedAt: t0, OpenUntil: t0.Add(5 * time.Minute), Version: 3, UpdatedAt: t0}
	// afterCooldown is a time at which opened is half-open (derived).
	afterCooldown = t0.Add(5*time.Minute + 10*time.Second)
	// leased is halfOpen with a probe leased by "a" at t0+5m.
	leased = func() Record {
		r := opened
		r.ProbeOwner, r.ProbeUntil, r.Version, r.UpdatedAt = "a", t0.Add(5*time.Minute+30*time.Second), 4, t0.Add(5*time.Minute)
		return r
	}()
)

// with returns r changed by f.
func with(r Record, f func(*Record)) Record {
	f(&r)
	return r
}

func TestOnResult(t *testing.T) {
	t.Parallel()
	c := cfg()
	tests := []struct {
		name        string
		r           Record
		o           Outcome
		retryAfter  time.Duration
		now         time.Time
		want        Record
		wantChanged bool
		wantTr      *Transition
	}{
		// Closed.
		{
			name: "healthy success writes nothing",
			r:    Record{Key: "k"}, o: Success, now: t0,
			want: Record{Key: "k"},
		},
		{
			name: "success does not forgive failures within the window",
			r:    closedWith2, o: Success, now: t0.Add(20 * time.Second),
			want: closedWith2,
		},
		{
			name: "first failure opens a window",
			r:    Record{Key: "k"}, o: Failure, now: t0,
			want:        Record{Key: "k", State: Closed, Failures: 1, WindowStart: t0, UpdatedAt: t0, Version: 1},
			wantChanged: true,
		},
		{
			name: "a failure ignores retryAfter",
			r:    Record{Key: "k"}, o: Failure, retryAfter: time.Hour, now: t0,
			want:        Record{Key: "k", State: Closed, Failures: 1, WindowStart: t0, UpdatedAt: t0, Version: 1},
			wantChanged: true,
		},
		{
			name: "threshold within the window opens for the cooldown",
			r:    closedWith2, o: Failure, now: t0.Add(59 * time.Second),
			want: Record{Key: "k", State: Open, Failures: 3, WindowStart: t0, OpenedAt: t0.Add(59 * time.Second),
				OpenUntil: t0.Add(59*time.Second + 5*time.Minute), UpdatedAt: t0.Add(59 * time.Second), Version: 3},
			wantChanged: true,
			wantTr:      &Transition{Key: "k", From: Closed, To: Open, At: t0.Add(59 * time.Second), Reason: "3 failures within 1m0s"},
		},
		{
			name: "a failure at WindowStart+Window starts a new window",
			r:    closedWith2, o: Failure, now: t0.Add(time.Minute),
			want:        Record{Key: "k", State: Closed, Failures: 1, WindowStart: t0.Add(time.Minute), UpdatedAt: t0.Add(time.Minute), Version: 3},
			wantChanged: true,
		},
		{
			name: "429 below the threshold opens until its Retry-After (shorter than cooldown)",
			r:    Record{Key: "k"}, o: RateLimited, retryAfter: 10 * time.Second, now: t0,
			want: Record{Key: "k", State: Open, Failures: 1, WindowStart: t0, OpenedAt: t0, OpenUntil: t0.Add(10 * time.Second),
				UpdatedAt: t0, Version: 1},
			wantChanged: true,
			wantTr:      &Transition{Key: "k", From: Closed, To: Open, At: t0, Reason: "rate limited (Retry-After 10s)"},
		},
		{
			name: "429 below the threshold opens until its Retry-After (longer than cooldown)",
			r:    Record{Key: "k"}, o: RateLimited, retryAfter: 10 * time.Minute, now: t0,
			want: Record{Key: "k", State: Open, Failures: 1, WindowStart: t0, OpenedAt: t0, OpenUntil: t0.Add(10 * time.Minute),
				UpdatedAt: t0, Version: 1},
			wantChanged: true,
			wantTr:      &Transition{Key: "k", From: Closed, To: Open, At: t0, Reason: "rate limited (Retry-After 10m0s)"},
		},
		{
			name: "429 at the threshold: cooldown when longer than Retry-After",
			r:    closedWith2, o: RateLimited, retryAfter: 10 * time.Second, now: t0.Add(30 * time.Second),
			want: Record{Key: "k", State: Open, Failures: 3, WindowStart: t0, OpenedAt: t0.Add(30 * time.Second),
				OpenUntil: t0.Add(30*time.Second + 5*time.Minute), UpdatedAt: t0.Add(30 * time.Second), Version: 3},
			wantChanged: true,
			wantTr: &Transition{Key: "k", From: Closed, To: Open, At: t0.Add(30 * time.Second),
				Reason: "rate limited (Retry-After 10s); 3 failures within 1m0s"},
		},
		{
			name: "429 at the threshold: Retry-After when longer than cooldown",
			r:    closedWith2, o: RateLimited, retryAfter: 20 * time.Minute, now: t0.Add(30 * time.Second),
			want: Record{Key: "k", State: Open, Failures: 3, WindowStart: t0, OpenedAt: t0.Add(30 * time.Second),
				OpenUntil: t0.Add(30*time.Second + 20*time.Minute), UpdatedAt: t0.Add(30 * time.Second), Version: 3},
			wantChanged: true,
			wantTr: &Transition{Key: "k", From: Closed, To: Open, At: t0.Add(30 * time.Second),
				Reason: "rate limited (Retry-After 20m0s); 3 failures within 1m0s"},
		},
		{
			name: "429 without Retry-After flags the key: half-open at once",
			r:    Record{Key: "k"}, o: RateLimited, now: t0,
			want:        Record{Key: "k", State: Open, Failures: 1, WindowStart: t0, OpenedAt: t0, OpenUntil: t0, UpdatedAt: t0, Version: 1},
			wantChanged: true,
			wantTr:      &Transition{Key: "k", From: Closed, To: Open, At: t0, Reason: "rate limited (Retry-After 0s)"},
		},
		{
			name: "a negative Retry-After counts as none",
			r:    Record{Key: "k"}, o: RateLimited, retryAfter: -time.Hour, now: t0,
			want:        Record{Key: "k", State: Open, Failures: 1, WindowStart: t0, OpenedAt: t0, OpenUntil: t0, UpdatedAt: t0, Version: 1},
			wantChanged: true,
			wantTr:      &Transition{Key: "k", From: Closed, To: Open, At: t0, Reason: "rate limited (Retry-After 0s)"},
		},
		{
			name: "a huge Retry-After is capped at 12h",
			r:    Record{Key: "k"}, o: RateLimited, retryAfter: 1000 * time.Hour, now: t0,
			want: Record{Key: "k", State: Open, Failures: 1, WindowStart: t0, OpenedAt: t0, OpenUntil: t0.Add(12 * time.Hour),
				UpdatedAt: t0, Version: 1},
			wantChanged: true,
			wantTr:      &Transition{Key: "k", From: Closed, To: Open, At: t0, Reason: "rate limited (Retry-After 12h0m0s)"},
		},
		// Open: results of calls admitted before it opened.
		{
			name: "open: a late success changes nothing",
			r:    opened, o: Success, now: t0.Add(time.Minute),
			want: opened,
		},
		{
			name: "open: a late failure changes nothing",
			r:    opened, o: Failure, now: t0.Add(time.Minute),
			want: opened,
		},
		{
			name: "open: a longer Retry-After extends it",
			r:    opened, o: RateLimited, retryAfter: 10 * time.Minute, now: t0.Add(time.Minute),
			want:        with(opened, func(r *Record) { r.OpenUntil, r.UpdatedAt, r.Version = t0.Add(11*time.Minute), t0.Add(time.Minute), 4 }),
			wantChanged: true,
		},
		{
			name: "open: a shorter Retry-After changes nothing",
			r:    opened, o: RateLimited, retryAfter: time.Minute, now: t0.Add(time.Minute),
			want: opened,
		},
		// Half-open with a live lease: the probe's result.
		{
			name: "probe success closes and forgets the failures",
			r:    leased, o: Success, now: afterCooldown,
			want:        Record{Key: "k", State: Closed, UpdatedAt: afterCooldown, Version: 5},
			wantChanged: true,
			wantTr:      &Transition{Key: "k", From: HalfOpen, To: Closed, At: afterCooldown, Reason: "probe succeeded"},
		},
		{
			name: "probe failure re-opens for a fresh cooldown",
			r:    leased, o: Failure, now: afterCooldown,
			want: with(opened, func(r *Record) {
				r.Failures, r.OpenedAt, r.OpenUntil, r.UpdatedAt, r.Version = 4, afterCooldown, afterCooldown.Add(5*time.Minute), afterCooldown, 5
			}),
			wantChanged: true,
			wantTr:      &Transition{Key: "k", From: HalfOpen, To: Open, At: afterCooldown, Reason: "probe failed"},
		},
		{
			name: "probe 429 re-opens for the cooldown when longer",
			r:    leased, o: RateLimited, retryAfter: time.Minute, now: afterCooldown,
			want: with(opened, func(r *Record) {
				r.Failures, r.OpenedAt, r.OpenUntil, r.UpdatedAt, r.Version = 4, afterCooldown, afterCooldown.Add(5*time.Minute), afterCooldown, 5
			}),
			wantChanged: true,
			wantTr:      &Transition{Key: "k", From: HalfOpen, To: Open, At: afterCooldown, Reason: "probe rate limited (Retry-After 1m0s)"},
		},
		{
			name: "probe 429 re-opens for its Retry-After when longer",
			r:    leased, o: RateLimited, retryAfter: time.Hour, now: afterCooldown,
			want: with(opened, func(r *Record) {
				r.Failures, r.OpenedAt, r.OpenUntil, r.UpdatedAt, r.Version = 4, afterCooldown, afterCooldown.Add(time.Hour), afterCooldown, 5
			}),
			wantChanged: true,
			wantTr:      &Transition{Key: "k", From: HalfOpen, To: Open, At: afterCooldown, Reason: "probe rate limited (Retry-After 1h0m0s)"},
		},
		// Half-open without a live lease: no probe is running.
		{
			name: "half-open, no lease: a late success changes nothing",
			r:    opened, o: Success, now: afterCooldown,
			want: opened,
		},
		{
			name: "half-open, no lease: a late failure changes nothing",
			r:    opened, o: Failure, now: afterCooldown,
			want: opened,
		},
		{
			name: "half-open, lease expired: the slow probe's failure changes nothing",
			r:    leased, o: Failure, now: leased.ProbeUntil,
			want: leased,
		},
		{
			name: "half-open, no lease: a 429 without Retry-After changes nothing",
			r:    opened, o: RateLimited, now: afterCooldown,
			want: opened,
		},
		{
			name: "half-open, no lease: a 429 with Retry-After re-opens",
			r:    opened, o: RateLimited, retryAfter: 2 * time.Minute, now: afterCooldown,
			want: with(opened, func(r *Record) {
				r.Failures, r.OpenedAt, r.OpenUntil, r.UpdatedAt, r.Version = 4, afterCooldown, afterCooldown.Add(2*time.Minute), afterCooldown, 4
			}),
			wantChanged: true,
			wantTr:      &Transition{Key: "k", From: HalfOpen, To: Open, At: afterCooldown, Reason: "rate limited (Retry-After 2m0s)"},
		},
		{
			name: "an unknown stored state counts as closed",
			r:    Record{Key: "k", State: "weird"}, o: Failure, now: t0,
			want:        Record{Key: "k", State: Closed, Failures: 1, WindowStart: t0, UpdatedAt: t0, Version: 1},
			wantChanged: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, changed, tr := OnResult(c, tt.r, tt.o, tt.retryAfter, tt.now)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("record (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantChanged, changed); diff != "" {
				t.Errorf("changed (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantTr, tr); diff != "" {
				t.Errorf("transition (-want +got):\n%s", diff)
			}
			if !changed && (tr != nil || !cmp.Equal(got, tt.r)) {
				t.Errorf("unchanged, yet the record or a transition differs: %+v %+v", got, tr)
			}
		})
	}
}

func TestAdmit(t *testing.T) {
	t.Parallel()
	c := cfg()
	flagged, _, _ := OnResult(c, Record{Key: "k"}, RateLimited, 0, t0)
	tests := []struct {
		name string
		r    Record
		now  time.Time
		want Admission
	}{
		{"no record", Record{Key: "k"}, t0, Admission{Allow: true}},
		{"closed with failures", closedWith2, t0.Add(time.Second), Admission{Allow: true}},
		{"open", opened, t0.Add(time.Minute), Admission{RetryAt: opened.OpenUntil}},
		{"open until the last nanosecond", opened, opened.OpenUntil.Add(-1), Admission{RetryAt: opened.OpenUntil}},
		{"half-open at OpenUntil: the probe", opened, opened.OpenUntil, Admission{Allow: true, Probe: true}},
		{"half-open with a live lease", leased, afterCooldown, Admission{RetryAt: leased.ProbeUntil}},
		{"half-open once the lease ended: a new probe", leased, leased.ProbeUntil, Admission{Allow: true, Probe: true}},
		{"stored half_open counts as derived", with(opened, func(r *Record) { r.State = HalfOpen }), afterCooldown, Admission{Allow: true, Probe: true}},
		{"flagged by a 429 without Retry-After", flagged, t0, Admission{Allow: true, Probe: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if diff := cmp.Diff(tt.want, Admit(c, tt.r, tt.now)); diff != "" {
				t.Errorf("Admit (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLeaseProbe(t *testing.T) {
	t.Parallel()
	c := cfg()
	tests := []struct {
		name   string
		r      Record
		owner  string
		now    time.Time
		want   Record
		wantOK bool
	}{
		{
			name: "half-open without a lease", r: opened, owner: "a", now: afterCooldown,
			want: with(opened, func(r *Record) {
				r.ProbeOwner, r.ProbeUntil, r.UpdatedAt, r.Version = "a", afterCooldown.Add(30*time.Second), afterCooldown, 4
			}),
			wantOK: true,
		},
		{name: "a second owner inside the lease", r: leased, owner: "b", now: afterCooldown, want: leased},
		{name: "the same owner inside its lease", r: leased, owner: "a", now: afterCooldown, want: leased},
		{
			name: "another owner once the lease expired", r: leased, owner: "b", now: leased.ProbeUntil,
			want: with(leased, func(r *Record) {
				r.ProbeOwner, r.ProbeUntil, r.UpdatedAt, r.Version = "b", leased.ProbeUntil.Add(30*time.Second), leased.ProbeUntil, 5
			}),
			wantOK: true,
		},
		{name: "closed", r: closedWith2, owner: "a", now: t0, want: closedWith2},
		{name: "open", r: opened, owner: "a", now: t0.Add(time.Minute), want: opened},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, ok := LeaseProbe(c, tt.r, tt.owner, tt.now)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("record (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantOK, ok); diff != "" {
				t.Errorf("ok (-want +got):\n%s", diff)
			}
		})
	}
}

// TestLifeCycle walks one key through every transition with an injected
// clock, the way a store would: every changed record is written.
func TestLifeCycle(t *testing.T) {
	t.Parallel()
	c := cfg()
	clk := clock.NewSimulated(t0)
	r := Record{Key: Key("host", "api.example.com")}
	var transitions []string
	apply := func(o Outcome, ra time.Duration) {
		t.Helper()
		next, changed, tr := OnResult(c, r, o, ra, clk.Now())
		if changed {
			if next.Version != r.Version+1 {
				t.Fatalf("version %d after %d", next.Version, r.Version)
			}
			r = next
		}
		if tr != nil {
			transitions = append(transitions, fmt.Sprintf("%s→%s (%s)", tr.From, tr.To, tr.Reason))
		}
	}
	admit := func(want Admission) {
		t.Helper()
		if diff := cmp.Diff(want, Admit(c, r, clk.Now())); diff != "" {
			t.Fatalf("at %s: Admit (-want +got):\n%s", clk.Now().Sub(t0), diff)
		}
	}

	for range 3 {
		admit(Admission{Allow: true})
		apply(Failure, 0)
		clk.Advance(10 * time.Second)
	}
	openUntil := t0.Add(20*time.Second + c.Cooldown)
	admit(Admission{RetryAt: openUntil})

	clk.Set(openUntil)
	admit(Admission{Allow: true, Probe: true})
	a, ok := LeaseProbe(c, r, "lambda-a", clk.Now())
	if !ok {
		t.Fatal("first lease refused")
	}
	if _, ok := LeaseProbe(c, r, "lambda-b", clk.Now()); !ok {
		t.Fatal("from the same stored version both may try; the conditional write picks one")
	}
	r = a // lambda-a's conditional write won
	clk.Advance(time.Second)
	admit(Admission{RetryAt: openUntil.Add(c.ProbeLease)})
	if _, ok := LeaseProbe(c, r, "lambda-b", clk.Now()); ok {
		t.Fatal("a second probe leased inside the lease")
	}

	apply(Failure, 0) // the probe fails
	reopenUntil := clk.Now().Add(c.Cooldown)
	admit(Admission{RetryAt: reopenUntil})

	clk.Set(reopenUntil.Add(time.Minute))
	admit(Admission{Allow: true, Probe: true})
	if r, ok = LeaseProbe(c, r, "lambda-b", clk.Now()); !ok {
		t.Fatal("lease after the second cooldown refused")
	}
	apply(Success, 0) // the probe succeeds
	admit(Admission{Allow: true})
	if r.Failures != 0 || r.State != Closed {
		t.Fatalf("after a successful probe: %+v", r)
	}
	before := r
	apply(Success, 0)
	if !cmp.Equal(r, before) {
		t.Fatal("a healthy success changed the record")
	}

	want := []string{
		"closed→open (3 failures within 1m0s)",
		"half_open→open (probe failed)",
		"half_open→closed (probe succeeded)",
	}
	if diff := cmp.Diff(want, transitions); diff != "" {
		t.Errorf("transitions (-want +got):\n%s", diff)
	}
}

func TestEffective(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		r    Record
		now  time.Time
		want State
	}{
		{"zero", Record{}, t0, Closed},
		{"closed", closedWith2, t0, Closed},
		{"open", opened, t0, Open},
		{"open at OpenUntil is half-open", opened, opened.OpenUntil, HalfOpen},
		{"leased", leased, afterCooldown, HalfOpen},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if diff := cmp.Diff(tt.want, tt.r.Effective(tt.now)); diff != "" {
				t.Errorf("Effective (-want +got):\n%s", diff)
			}
		})
	}
}

func TestConfig(t *testing.T) {
	t.Parallel()
	valid := Config{Window: time.Minute, Threshold: 5, Cooldown: 5 * time.Minute, ProbeLease: 30 * time.Second, CacheTTL: 5 * time.Second}
	tests := []struct {
		name    string
		c       Config
		wantErr string
	}{
		{"valid", valid, ""},
		{"no cache", with2(valid, func(c *Config) { c.CacheTTL = 0 }), ""},
		{"zero", Config{}, "window must be positive"},
		{"threshold 0", with2(valid, func(c *Config) { c.Threshold = 0 }), "threshold must be at least 1"},
		{"no cooldown", with2(valid, func(c *Config) { c.Cooldown = 0 }), "cooldown must be positive"},
		{"no lease", with2(valid, func(c *Config) { c.ProbeLease = -time.Second }), "probe lease must be positive"},
		{"negative cache", with2(valid, func(c *Config) { c.CacheTTL = -1 }), "cache TTL must not be negative"},
		{"host owners default", with2(valid, func(c *Config) { c.HostOwners = 0 }), ""},
		{"host owners 2", with2(valid, func(c *Config) { c.HostOwners = 2 }), ""},
		{"host owners 1", with2(valid, func(c *Config) { c.HostOwners = 1 }), "host owners must be at least 2"},
		{"host owners negative", with2(valid, func(c *Config) { c.HostOwners = -3 }), "host owners must be at least 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := ""
			if err := tt.c.Validate(); err != nil {
				got = err.Error()
			}
			if (tt.wantErr == "") != (got == "") || !strings.Contains(got, tt.wantErr) {
				t.Errorf("Validate() = %q, want an error containing %q", got, tt.wantErr)
			}
		})
	}
}

func with2(c Config, f func(*Config)) Config {
	f(&c)
	return c
}

func TestKeys(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, got, want string
	}{
		{"host", Key("host", "www.deviantart.com"), "host:www.deviantart.com"},
		{"token", TokenKey("at_supersecret"), "token:67eedb86906b360b"},
		{"account", TokenKey("acc_123"), TokenKey("acc_123")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if diff := cmp.Diff(tt.want, tt.got); diff != "" {
				t.Errorf("key (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTokenKeyNeverLeaks(t *testing.T) {
	t.Parallel()
	for _, secret := range []string{"at_supersecret", "x", "", strings.Repeat("long", 100)} {
		k := TokenKey(secret)
		if (len(secret) > 3 && strings.Contains(k, secret)) || !strings.HasPrefix(k, "token:") || len(k) != len("token:")+16 {
			t.Errorf("TokenKey(%q) = %q", secret, k)
		}
	}
	if TokenKey("a") == TokenKey("b") {
		t.Error("different tokens share a key")
	}
	err := (&OpenError{Key: TokenKey("at_supersecret"), RetryAt: t0}).Error()
	if strings.Contains(err, "supersecret") {
		t.Errorf("the error leaks the token: %s", err)
	}
}

func TestOpenError(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 22, 13, 0, 5, 0, time.FixedZone("MSK", 3*3600))
	e := &OpenError{Key: "host:api.example.com", RetryAt: at}
	if diff := cmp.Diff("circuit open for host:api.example.com until 2026-11-22T10:00:05Z", e.Error()); diff != "" {
		t.Errorf("Error (-want +got):\n%s", diff)
	}
	if !e.RetryAfterTime().Equal(at) {
		t.Errorf("RetryAfterTime = %v", e.RetryAfterTime())
	}
	// The store returns it as a snooze: the job waits without spending an attempt.
	wrapped := fmt.Errorf("publish: %w", retry.Snooze(e, e.RetryAt))
	var oe *OpenError
	if !errors.As(wrapped, &oe) || retry.Classify(wrapped) != retry.ClassSnooze {
		t.Errorf("not found as a snoozed OpenError: %v", wrapped)
	}
}

func TestOutcomeString(t *testing.T) {
	t.Parallel()
	got := []string{Success.String(), Failure.String(), RateLimited.String(), Outcome(7).String()}
	if diff := cmp.Diff([]string{"success", "failure", "rate_limited", "Outcome(7)"}, got); diff != "" {
		t.Errorf("String (-want +got):\n%s", diff)
	}
}

func BenchmarkAdmit(b *testing.B) {
	c := cfg()
	for _, bc := range []struct {
		name string
		r    Record
		now  time.Time
	}{{"closed", Record{Key: "k"}, t0}, {"open", opened, t0.Add(time.Minute)}, {"half_open", leased, afterCooldown}} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				_ = Admit(c, bc.r, bc.now)
			}
		})
	}
}

func BenchmarkOnResult(b *testing.B) {
	c := cfg()
	for _, bc := range []struct {
		name string
		r    Record
		o    Outcome
		now  time.Time
	}{
		{"healthy_success", Record{Key: "k"}, Success, t0},
		{"failure", closedWith2, Failure, t0.Add(90 * time.Second)},
		{"trip", closedWith2, Failure, t0.Add(time.Second)},
		{"probe_success", leased, Success, afterCooldown},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				_, _, _ = OnResult(c, bc.r, bc.o, 0, bc.now)
			}
		})
	}
}

func BenchmarkLeaseProbe(b *testing.B) {
	c := cfg()
	for b.Loop() {
		_, _ = LeaseProbe(c, opened, "lambda-a", afterCooldown)
	}
}
