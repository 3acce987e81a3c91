package ratelimit_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/conveyor/conveyor/internal/clock"
	"github.com/conveyor/conveyor/internal/fault"
	"github.com/conveyor/conveyor/internal/ratelimit"
)

var t0 = time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)

func TestBucketArithmetic(t *testing.T) {
	t.Parallel()
	l := ratelimit.Limit{Rate: 5, Burst: 60} // a unit every 200 ms
	cases := []struct {
		name      string
		tat       time.Time
		available int
		wait      time.Duration
	}{
		{"never used", time.Time{}, 60, 0},
		{"idle since long ago", t0.Add(-time.Hour), 60, 0},
		{"one taken just now", t0.Add(200 * time.Millisecond), 59, 0},
		{"empty", t0.Add(12 * time.Second), 0, 200 * time.Millisecond},
		{"empty with half a unit back", t0.Add(12*time.Second - 100*time.Millisecond), 0, 100 * time.Millisecond},
		{"ten over (a lease beyond the burst cannot happen, but the wait says so)", t0.Add(14 * time.Second), 0, 2200 * time.Millisecond},
	}
	for _, c := range cases {
		if got := l.Available(c.tat, t0); got != c.available {
			t.Errorf("%s: Available = %d, want %d", c.name, got, c.available)
		}
		if got := l.Wait(c.tat, t0); got != c.wait {
			t.Errorf("%s: Wait = %v, want %v", c.name, got, c.wait)
		}
	}
	if got, want := l.Take(time.Time{}, t0, 3), t0.Add(600*time.Millisecond); !got.Equal(want) {
		t.Errorf("Take 3 from a full bucket = %v, want %v", got, want)
	}
	if got, want := l.Take(t0.Add(time.Second), t0, 5), t0.Add(2*time.Second); !got.Equal(want) {
		t.Errorf("Take 5 from a bucket a second ahead = %v, want %v", got, want)
	}
	for wait, want := range map[time.Duration]int{0: 1, time.Millisecond: 1, time.Second: 1, time.Second + 1: 2, 2200 * time.Millisecond: 3} {
		if got := ratelimit.RetryAfter(wait); got != want {
			t.Errorf("RetryAfter(%v) = %d, want %d", wait, got, want)
		}
	}
	for l, want := range map[ratelimit.Limit]int{{Rate: 5, Burst: 60}: 5, {Rate: 100, Burst: 40}: 10, {Rate: 1, Burst: 1}: 1, {Rate: 50, Burst: 2}: 1} {
		if got := ratelimit.MaxBlock(l); got != want {
			t.Errorf("MaxBlock(%+v) = %d, want %d", l, got, want)
		}
	}
}

// memStore is the table's conditional write in memory.
type memStore struct {
	mu     sync.Mutex
	tat    map[string]time.Time
	fail   error
	writes int
}

func newMemStore() *memStore { return &memStore{tat: map[string]time.Time{}} }

func (m *memStore) RateLease(_ context.Context, bucket string, prev, next time.Time) (bool, time.Time, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail != nil {
		return false, time.Time{}, m.fail
	}
	m.writes++
	if cur := m.tat[bucket]; !cur.Equal(prev) {
		return false, cur, nil
	}
	m.tat[bucket] = next
	return true, time.Time{}, nil
}

func (m *memStore) count() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.writes
}

type bundle struct {
	clock *clock.Simulated
	store *memStore
	log   *bytes.Buffer
}

func setup(t *testing.T) *bundle {
	t.Helper()
	return &bundle{clock: clock.NewSimulated(t0), store: newMemStore(), log: &bytes.Buffer{}}
}

var plans = map[string]ratelimit.Limit{"free": {Rate: 5, Burst: 60}, "pro": {Rate: 20, Burst: 200}}

func (b *bundle) limiter(t *testing.T, mod func(*ratelimit.Config)) *ratelimit.Limiter {
	t.Helper()
	c := ratelimit.Config{Store: b.store, PerPlan: plans, Now: b.clock.Now, Logger: slog.New(slog.NewTextHandler(b.log, nil))}
	if mod != nil {
		mod(&c)
	}
	lm, err := ratelimit.New(c)
	if err != nil {
		t.Fatal(err)
	}
	return lm
}

func TestABurstIsServedAndTheNextRequestWaitsForItsUnit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	lm := b.limiter(t, nil)
	ctx := context.Background()
	for i := range 60 {
		if err := lm.Admit(ctx, "u1", "free"); err != nil {
			t.Fatalf("request %d of a burst of 60 on free (burst 60): %v", i+1, err)
		}
	}
	var th *fault.Throttled
	if err := lm.Admit(ctx, "u1", "free"); !errors.As(err, &th) {
		t.Fatalf("request 61 at the same instant: %v, want a *fault.Throttled", err)
	}
	if th.Code != ratelimit.CodeThrottled || th.Limit != 5 || th.Period != time.Second || th.Burst != 60 || th.RetryAfter != 200*time.Millisecond {
		t.Errorf("the refusal: %+v, want code throttled, 5 a second, burst 60, retry after 200ms", th)
	}
	if !strings.Contains(th.Msg, "free plan") || !strings.Contains(th.Msg, "retry in 1 s") {
		t.Errorf("the message %q names neither the plan nor the wait", th.Msg)
	}
	writes := b.store.count()
	for range 100 {
		_ = lm.Admit(ctx, "u1", "free")
	}
	if got := b.store.count(); got != writes {
		t.Errorf("100 refused requests made %d writes; a bucket seen empty needs none until it refills", got-writes)
	}
	// Another owner is not slowed.
	if err := lm.Admit(ctx, "u2", "free"); err != nil {
		t.Errorf("another owner at the same instant: %v", err)
	}
	b.clock.Advance(200 * time.Millisecond)
	if err := lm.Admit(ctx, "u1", "free"); err != nil {
		t.Errorf("a unit later: %v", err)
	}
	if err := lm.Admit(ctx, "u1", "free"); err == nil {
		t.Error("two requests on a unit's refill: both served")
	}
	if writes < 12 || writes > 16 {
		t.Errorf("the burst of 60 took %d writes; blocks of 1, 2, 4, then 5 (a second's rate) make 14", writes)
	}
}

func TestOverridesAndTheFallbackPlan(t *testing.T) {
	t.Parallel()
	b := setup(t)
	lm := b.limiter(t, func(c *ratelimit.Config) { c.PerOwner = map[string]ratelimit.Limit{"vip": {Rate: 1, Burst: 2}} })
	for _, c := range []struct {
		owner, plan string
		want        ratelimit.Limit
	}{{"vip", "pro", ratelimit.Limit{Rate: 1, Burst: 2}}, {"u", "pro", plans["pro"]}, {"u", "gold", plans["free"]}, {"u", "", plans["free"]}} {
		if got := lm.LimitOf(c.owner, c.plan); got != c.want {
			t.Errorf("LimitOf(%s, %s) = %+v, want %+v", c.owner, c.plan, got, c.want)
		}
	}
	ctx := context.Background()
	_, _ = lm.Admit(ctx, "vip", "pro"), lm.Admit(ctx, "vip", "pro")
	var th *fault.Throttled
	if err := lm.Admit(ctx, "vip", "pro"); !errors.As(err, &th) || !strings.Contains(th.Msg, "your account's") {
		t.Errorf("the third request of an owner with a burst of 2: %v", err)
	}
}

// TestInstancesSharingABucketStayWithinTheBound: three instances serve one
// owner's requests, each every 5 ms of simulated time (600 a second against
// a limit of 20), for ten seconds; in every window the served requests are
// at most Burst + Rate×(W + LeaseFor), and over the whole run no fewer
// than the rate's share less the dropped units allow.
func TestInstancesSharingABucketStayWithinTheBound(t *testing.T) {
	t.Parallel()
	b := setup(t)
	l := plans["pro"]
	lms := []*ratelimit.Limiter{b.limiter(t, nil), b.limiter(t, nil), b.limiter(t, nil)}
	ctx := context.Background()
	var served []time.Time
	const step = 5 * time.Millisecond
	for i := range 6000 {
		if lms[i%3].Admit(ctx, "u", "pro") == nil {
			served = append(served, b.clock.Now())
		}
		if i%3 == 2 {
			b.clock.Advance(step)
		}
	}
	end := b.clock.Now()
	for _, w := range []time.Duration{0, 100 * time.Millisecond, time.Second, 3 * time.Second, end.Sub(t0)} {
		bound := l.Burst + int(float64(l.Rate)*(w+ratelimit.LeaseForDefault).Seconds())
		for i := range served {
			n := 0
			for j := i; j < len(served) && served[j].Sub(served[i]) <= w; j++ {
				n++
			}
			if n > bound {
				t.Fatalf("%d served in a window of %v from %v, over the bound %d", n, w, served[i].Sub(t0), bound)
			}
		}
	}
	if min := l.Burst + l.Rate*int(end.Sub(t0)/time.Second)/2; len(served) < min {
		t.Errorf("%d served in %v, fewer than half the allowance (%d)", len(served), end.Sub(t0), min)
	}
	t.Logf("%d of 6000 served in %v (allowance %d); %d writes", len(served), end.Sub(t0), l.Burst+l.Rate*int(end.Sub(t0)/time.Second), b.store.count())
}

func TestAStoreFailureServesTheRequestAndSaysSo(t *testing.T) {
	t.Parallel()
	b := setup(t)
	lm := b.limiter(t, nil)
	b.store.fail = errors.New("table unavailable")
	ctx := context.Background()
	for i := range 100 {
		if err := lm.Admit(ctx, "u", "free"); err != nil {
			t.Fatalf("request %d with the store down: %v, want served (fail open)", i+1, err)
		}
	}
	if n := strings.Count(b.log.String(), "rate check failed; serving the request"); n != 1 {
		t.Errorf("%d error lines for 100 requests inside OpenFor, want 1:\n%s", n, b.log)
	}
	b.store.mu.Lock()
	b.store.fail = nil
	b.store.mu.Unlock()
	b.clock.Advance(ratelimit.OpenForDefault)
	if err := lm.Admit(ctx, "u", "free"); err != nil || b.store.count() != 1 {
		t.Errorf("after OpenFor with the store back: %v, %d writes, want served by a lease", err, b.store.count())
	}
}

func TestConfigIsValidated(t *testing.T) {
	t.Parallel()
	st := newMemStore()
	for name, c := range map[string]ratelimit.Config{
		"no store":       {PerPlan: plans},
		"no fallback":    {Store: st, PerPlan: map[string]ratelimit.Limit{"pro": {Rate: 1, Burst: 1}}},
		"zero rate":      {Store: st, PerPlan: map[string]ratelimit.Limit{"free": {Rate: 0, Burst: 1}}},
		"owner no burst": {Store: st, PerPlan: plans, PerOwner: map[string]ratelimit.Limit{"u": {Rate: 1}}},
	} {
		if _, err := ratelimit.New(c); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// movingStore is a bucket another instance moves before every lease.
type movingStore struct{ n int }

func (m *movingStore) RateLease(_ context.Context, _ string, prev, _ time.Time) (bool, time.Time, error) {
	m.n++
	return false, time.Time{}.Add(time.Duration(m.n) * time.Microsecond), nil
}

func TestALeaseThatKeepsLosingItsRaceIsRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	st := &movingStore{}
	lm, err := ratelimit.New(ratelimit.Config{Store: st, PerPlan: plans, Now: b.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	var th *fault.Throttled
	if err := lm.Admit(context.Background(), "u", "free"); !errors.As(err, &th) || th.RetryAfter < time.Second {
		t.Errorf("a lease whose bucket moved under every attempt: %v, want refused for a second", err)
	}
	if st.n != ratelimit.AttemptsDefault {
		t.Errorf("%d attempts, want %d", st.n, ratelimit.AttemptsDefault)
	}
}

// TestUnitsLeftInALapsedBlockAreDropped: units an instance leased and did
// not serve within LeaseFor are not served later, when other instances
// have emptied the bucket since.
func TestUnitsLeftInALapsedBlockAreDropped(t *testing.T) {
	t.Parallel()
	b := setup(t)
	lm := b.limiter(t, func(c *ratelimit.Config) { c.PerPlan = map[string]ratelimit.Limit{"free": {Rate: 4, Burst: 16}} })
	ctx := context.Background()
	// Blocks of 1, 2, then 4: the last leaves 3 units on this instance.
	for i := range 4 {
		if err := lm.Admit(ctx, "u", "free"); err != nil {
			t.Fatalf("request %d: %v", i+1, err)
		}
	}
	if got := b.store.count(); got != 3 {
		t.Fatalf("%d leases for blocks of 1, 2 and 4, want 3", got)
	}
	b.clock.Advance(ratelimit.LeaseForDefault + time.Millisecond)
	// Other instances empty the bucket meanwhile.
	b.store.mu.Lock()
	b.store.tat["u"] = b.clock.Now().Add(4 * time.Second)
	b.store.mu.Unlock()
	var th *fault.Throttled
	if err := lm.Admit(ctx, "u", "free"); !errors.As(err, &th) {
		t.Errorf("a request after the block lapsed, the bucket empty: %v, want throttled (the 3 units left are dropped)", err)
	}
}
