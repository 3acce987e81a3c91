package breaker_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/conveyor/conveyor/internal/aws/awsclient"
	"github.com/conveyor/conveyor/internal/aws/store"
	"github.com/conveyor/conveyor/internal/breaker"
	"github.com/conveyor/conveyor/internal/clock"
	"github.com/conveyor/conveyor/internal/retry"
	"github.com/conveyor/conveyor/localstack/awstest"
)

func TestMain(m *testing.M) { awstest.Main(m) }

type apiErr struct{ status int }

func (e apiErr) Error() string             { return fmt.Sprintf("HTTP %d", e.status) }
func (e apiErr) Temporary() bool           { return e.status == 429 || e.status >= 500 }
func (e apiErr) RetryAfter() time.Duration { return 0 }
func (e apiErr) StatusCode() int           { return e.status }

// instances builds n breakers sharing one table, as n Lambdas would.
func instances(t *testing.T, n int, clk *clock.Simulated, counter *awsclient.Counter) []*breaker.Breaker {
	env := awstest.Provision(t)
	cfg := env.Config
	if counter != nil {
		cfg = counter.Attach(cfg)
	}
	st := store.New(awsclient.New(cfg).DynamoDB, env.Res.Definition.Table.Name, clk.Now)
	c := breaker.Config{Window: time.Minute, Threshold: 5, Cooldown: 5 * time.Minute, ProbeLease: 30 * time.Second, CacheTTL: time.Second}
	var out []*breaker.Breaker
	for i := range n {
		b, err := breaker.New(breaker.Options{Config: c, Store: st,
			Owner: fmt.Sprintf("lambda-%d", i), Now: clk.Now, Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

func isOpen(err error) bool {
	var oe *breaker.OpenError
	return errors.As(err, &oe) && retry.Classify(err) == retry.ClassSnooze
}

// TestEightInstancesAgree: after the threshold all eight refuse within one
// cache period; after the cooldown exactly one probe passes — 20 times over.
func TestEightInstancesAgree(t *testing.T) {
	t.Parallel()
	clk := clock.NewSimulated(time.Now().UTC())
	bs := instances(t, 8, clk, nil)
	ctx := context.Background()
	for round := range 20 {
		key := fmt.Sprintf("host:round-%d", round)
		// Failures of three tokens, from several instances, open the
		// host's circuit.
		for i := range 3 {
			err := bs[i%len(bs)].Do(ctx, func(context.Context) error { return apiErr{503} }, key, breaker.TokenKey(fmt.Sprint(round, i)))
			if err == nil {
				t.Fatalf("round %d: the failing call reported success", round)
			}
		}
		clk.Advance(1100 * time.Millisecond) // one cache period
		var calls atomic.Int32
		var wg sync.WaitGroup
		for _, b := range bs {
			wg.Go(func() {
				err := b.Do(ctx, func(context.Context) error { calls.Add(1); return nil }, key)
				if !isOpen(err) {
					t.Errorf("round %d: an instance was not refused: %v", round, err)
				}
			})
		}
		wg.Wait()
		if calls.Load() != 0 {
			t.Fatalf("round %d: %d calls reached the API while open", round, calls.Load())
		}
		clk.Advance(5 * time.Minute)
		var probes, refused atomic.Int32
		block := make(chan struct{})
		for _, b := range bs {
			wg.Go(func() {
				err := b.Do(ctx, func(context.Context) error { probes.Add(1); <-block; return apiErr{503} }, key)
				if isOpen(err) {
					refused.Add(1)
				} else if err != nil && !errors.As(err, new(apiErr)) {
					t.Errorf("round %d: %v", round, err)
				}
			})
		}
		// The probe holds until every other instance has been refused (or
		// a second probe got through, which fails the round below).
		for deadline := time.Now().Add(30 * time.Second); refused.Load()+probes.Load() < int32(len(bs)) || probes.Load() == 0; {
			if probes.Load() > 1 || time.Now().After(deadline) {
				break
			}
			time.Sleep(time.Millisecond) // polling the condition above
		}
		close(block)
		wg.Wait()
		if probes.Load() != 1 {
			t.Fatalf("round %d: %d probes in half-open, want exactly 1", round, probes.Load())
		}
	}
}

func TestProbeSuccessCloses(t *testing.T) {
	t.Parallel()
	clk := clock.NewSimulated(time.Now().UTC())
	bs := instances(t, 2, clk, nil)
	ctx := context.Background()
	key := "token:abc"
	for range 5 {
		_ = bs[0].Do(ctx, func(context.Context) error { return apiErr{500} }, key)
	}
	clk.Advance(5*time.Minute + time.Second)
	if err := bs[1].Do(ctx, func(context.Context) error { return nil }, key); err != nil {
		t.Fatalf("probe: %v", err)
	}
	list, err := bs[0].List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 0 {
		t.Errorf("a closed breaker keeps a record: %+v", list)
	}
	clk.Advance(2 * time.Second)
	if err := bs[0].Do(ctx, func(context.Context) error { return nil }, key); err != nil {
		t.Errorf("closed breaker refused: %v", err)
	}
}

func TestRateLimitOpensForRetryAfterAndResets(t *testing.T) {
	t.Parallel()
	clk := clock.NewSimulated(time.Now().UTC())
	bs := instances(t, 1, clk, nil)
	ctx := context.Background()
	if err := bs[0].Record(ctx, breaker.RateLimited, 2*time.Minute, "token:x"); err != nil {
		t.Fatal(err)
	}
	err := bs[0].Allow(ctx, "token:x")
	var oe *breaker.OpenError
	if !errors.As(err, &oe) || !oe.RetryAt.Equal(clk.Now().Add(2*time.Minute)) {
		t.Fatalf("after a 429: %v", err)
	}
	// For a host, a 429 made without a token is one failure towards its
	// threshold, never a flag (with a token it flags the token only).
	if err := bs[0].Record(ctx, breaker.RateLimited, 2*time.Minute, "host:x"); err != nil {
		t.Fatal(err)
	}
	if err := bs[0].Allow(ctx, "host:x"); err != nil {
		t.Errorf("one 429 stopped the whole host: %v", err)
	}
	if err := bs[0].Reset(ctx, "token:x"); err != nil {
		t.Fatal(err)
	}
	if err := bs[0].Allow(ctx, "token:x"); err != nil {
		t.Errorf("after reset: %v", err)
	}
}

// TestHealthyCallsCostAlmostNothing: with a healthy API, one snapshot
// Query per cache period, whatever the number of calls.
func TestHealthyCallsCostAlmostNothing(t *testing.T) {
	t.Parallel()
	clk := clock.NewSimulated(time.Now().UTC())
	counter := awsclient.NewCounter()
	bs := instances(t, 1, clk, counter)
	ctx := context.Background()
	calls := 0
	for i := range 400 {
		if i%100 == 0 {
			clk.Advance(time.Second) // four cache periods in all
		}
		if err := bs[0].Do(ctx, func(context.Context) error { return nil }, "host:x", breaker.TokenKey(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
		calls++
	}
	per := float64(counter.Total()) / float64(calls)
	t.Logf("%d DynamoDB requests for %d healthy calls: %.4f per call (%v)", counter.Total(), calls, per, counter.Snapshot())
	if counter.Get("DynamoDB.GetItem")+counter.Get("DynamoDB.PutItem") != 0 {
		t.Errorf("healthy calls read or wrote single records: %v", counter.Snapshot())
	}
	if per > 0.05 {
		t.Errorf("%.3f requests per call, want ≤ 0.05", per)
	}
}

// TestConcurrentCallsWhileTheSnapshotRefreshes: the parallel jobs of one
// batch share one Breaker; under -race, Allow, Do and Record on shared keys
// while the snapshot refreshes must neither race nor lose the state.
func TestConcurrentCallsWhileTheSnapshotRefreshes(t *testing.T) {
	t.Parallel()
	clk := clock.NewSimulated(time.Now().UTC())
	b := instances(t, 1, clk, nil)[0]
	ctx := context.Background()
	keys := []string{"host:shared", "token:a", "token:b"}
	var wg sync.WaitGroup
	// One caller keeps finding the snapshot past its cache period and
	// refreshes it, while the others record outcomes into it.
	wg.Go(func() {
		for i := range 64 {
			clk.Advance(1100 * time.Millisecond)
			_ = b.Allow(ctx, keys[i%len(keys)])
		}
	})
	for g := range 12 {
		wg.Go(func() {
			for i := range 16 {
				key := keys[(g+i)%len(keys)]
				switch i % 3 {
				case 0:
					_ = b.Do(ctx, func(context.Context) error { return apiErr{503} }, key, "host:shared")
				case 1:
					_ = b.Record(ctx, breaker.RateLimited, time.Second, key)
				default:
					_ = b.Do(ctx, func(context.Context) error { return nil }, key)
				}
			}
		})
	}
	wg.Wait()
	// Whatever the interleaving, the instance still answers from a
	// consistent view: nil or the typed open error, nothing else.
	for _, k := range keys {
		if err := b.Allow(ctx, k); err != nil && !isOpen(err) {
			t.Errorf("Allow(%s) after the storm: %v", k, err)
		}
	}
}

// TestStorageErrorSnoozes: when the breakers' table cannot be read (here it
// does not exist), Do does not call fn and answers a snooze, so the job
// spends no attempt.
func TestStorageErrorSnoozes(t *testing.T) {
	t.Parallel()
	env := awstest.Provision(t)
	b, err := breaker.New(breaker.Options{Config: breaker.Config{Window: time.Minute, Threshold: 5, Cooldown: 5 * time.Minute, ProbeLease: 30 * time.Second, CacheTTL: 5 * time.Second}, Store: store.New(awsclient.New(env.Config).DynamoDB, awstest.Name(t, "missing"), nil),
		Owner: "lambda", Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	called := false
	err = b.Do(context.Background(), func(context.Context) error { called = true; return nil }, "host:example.com")
	if called {
		t.Error("the call was made although the breaker state is unknown")
	}
	if retry.Classify(err) != retry.ClassSnooze {
		t.Errorf("err = %v (class %v), want a snooze", err, retry.Classify(err))
	}
}

// TestProbeCallEndsInsideItsLease: a half-open probe's context ends before
// the probe lease lapses, so a hung probe cannot let a second one through.
func TestProbeCallEndsInsideItsLease(t *testing.T) {
	t.Parallel()
	clk := clock.NewSimulated(time.Now().UTC())
	bs := instances(t, 1, clk, nil)
	ctx := context.Background()
	key := "host:probe-deadline"
	for i := range 3 {
		_ = bs[0].Do(ctx, func(context.Context) error { return apiErr{503} }, key, breaker.TokenKey(fmt.Sprint(i)))
	}
	clk.Advance(5*time.Minute + time.Second)
	var probeLeft time.Duration
	_ = bs[0].Do(ctx, func(ctx context.Context) error {
		dl, ok := ctx.Deadline()
		if !ok {
			t.Fatal("the probe's context has no deadline")
		}
		probeLeft = time.Until(dl)
		return nil
	}, key)
	if probeLeft <= 0 || probeLeft > breaker.ProbeCallTimeout(30*time.Second) || breaker.ProbeCallTimeout(30*time.Second) >= 30*time.Second {
		t.Errorf("probe deadline in %s, want within %s of a 30s lease", probeLeft, breaker.ProbeCallTimeout(30*time.Second))
	}
	// A closed breaker's calls keep the caller's context.
	_ = bs[0].Do(ctx, func(ctx context.Context) error {
		if _, ok := ctx.Deadline(); ok {
			t.Error("a call through a closed breaker got a probe deadline")
		}
		return nil
	}, key)
}

// openHost opens key, a host's circuit, with the failures of three tokens.
func openHost(t *testing.T, b *breaker.Breaker, key string) {
	t.Helper()
	for i := range 3 {
		_ = b.Do(context.Background(), func(context.Context) error { return apiErr{503} }, breaker.TokenKey(fmt.Sprint("outage-", i)), key)
	}
	if err := b.Allow(context.Background(), key); !isOpen(err) {
		t.Fatalf("three tokens' failures left %s admitting: %v", key, err)
	}
}

// storedRecord reads key's record as the table has it.
func storedRecord(t *testing.T, b *breaker.Breaker, key string) breaker.Record {
	t.Helper()
	list, err := b.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range list {
		if r.Key == key {
			return r
		}
	}
	return breaker.Record{Key: key, State: breaker.Closed}
}

// TestOneTokensFailuresAndRateLimitLeaveTheHostClosed: one token's calls,
// admitted together before its circuit opened, report twenty 429s and
// twenty 503s from two instances: the token's circuit opens, the host's
// counts the token once and stays closed for another token.
func TestOneTokensFailuresAndRateLimitLeaveTheHostClosed(t *testing.T) {
	t.Parallel()
	clk := clock.NewSimulated(time.Now().UTC())
	bs := instances(t, 2, clk, nil)
	ctx := context.Background()
	host, noisy, quiet := "host:api.example", breaker.TokenKey("noisy"), breaker.TokenKey("quiet")
	for i := range 40 {
		o, ra := breaker.RateLimited, time.Minute
		if i%2 == 1 {
			o, ra = breaker.Failure, 0
		}
		if err := bs[i%2].Record(ctx, o, ra, noisy, host); err != nil {
			t.Fatal(err)
		}
		clk.Advance(500 * time.Millisecond)
	}
	if err := bs[0].Allow(ctx, noisy); !isOpen(err) {
		t.Errorf("the noisy token admits after its 429s and 503s: %v", err)
	}
	called := 0
	for _, b := range bs {
		if err := b.Do(ctx, func(context.Context) error { called++; return nil }, quiet, host); err != nil {
			t.Errorf("another token's call was refused: %v", err)
		}
	}
	if called != 2 {
		t.Errorf("%d of another token's two calls were made", called)
	}
	if r := storedRecord(t, bs[0], host); r.State != breaker.Closed || r.Failures != 1 {
		t.Errorf("the host's record = %+v, want closed with the one token counted once", r)
	}
}

// TestHostProbeIsNotSpentOnALimitedToken: with the host half-open, a call
// whose token is flagged — in this instance's snapshot, or only in the
// table by another instance since — is refused on its token and takes no
// lease; the next call with a healthy token is the probe and closes the
// host. A token lease taken for a call that the host then refuses is given
// back.
func TestHostProbeIsNotSpentOnALimitedToken(t *testing.T) {
	t.Parallel()
	clk := clock.NewSimulated(time.Now().UTC())
	bs := instances(t, 2, clk, nil)
	ctx := context.Background()
	host, limited := "host:probe-fair", breaker.TokenKey("limited")
	openHost(t, bs[0], host)
	clk.Advance(5*time.Minute + time.Second) // half-open
	// bs[0] takes a fresh snapshot; bs[1] then flags the token (its 429).
	if err := bs[0].Allow(ctx, breaker.TokenKey("unrelated")); err != nil {
		t.Fatal(err)
	}
	if err := bs[1].Record(ctx, breaker.RateLimited, 10*time.Minute, limited); err != nil {
		t.Fatal(err)
	}
	for _, b := range []*breaker.Breaker{bs[1], bs[0]} { // the flag in b's snapshot; only in the table
		called := false
		err := b.Do(ctx, func(context.Context) error { called = true; return nil }, limited, host)
		var oe *breaker.OpenError
		if called || !errors.As(err, &oe) || oe.Key != limited {
			t.Errorf("a call with the limited token: called %v, err %v; want refused on %s without a call", called, err, limited)
		}
		if r := storedRecord(t, b, host); !r.ProbeUntil.IsZero() {
			t.Errorf("the host's probe was leased for the limited token's call: %+v", r)
		}
	}
	probed := false
	if err := bs[0].Do(ctx, func(context.Context) error { probed = true; return nil }, breaker.TokenKey("healthy"), host); err != nil || !probed {
		t.Fatalf("the healthy token's probe: called %v, err %v", probed, err)
	}
	if r := storedRecord(t, bs[0], host); r.State != breaker.Closed {
		t.Errorf("after the probe succeeded the host is %+v", r)
	}

	// A half-open token and a host whose probe another instance holds:
	// the token's lease is given back.
	host2, tok := "host:probe-held", breaker.TokenKey("half-open")
	openHost(t, bs[0], host2)
	for range 5 {
		_ = bs[0].Do(ctx, func(context.Context) error { return apiErr{503} }, tok)
	}
	clk.Advance(5*time.Minute + time.Second) // both half-open
	if err := bs[1].Allow(ctx, host2); err != nil {
		t.Fatalf("bs[1] takes the host's probe: %v", err)
	}
	if err := bs[0].Allow(ctx, tok, host2); !isOpen(err) {
		t.Errorf("a call while another instance probes the host: %v, want refused", err)
	}
	if r := storedRecord(t, bs[0], tok); r.ProbeOwner != "" || !r.ProbeUntil.IsZero() {
		t.Errorf("the token's probe lease was kept for a call that was not made: %+v", r)
	}
	if err := bs[0].Allow(ctx, tok); err != nil {
		t.Errorf("the token's probe is not free for its next call: %v", err)
	}
}

// TestOneOwnersTokensCountOnce: an owner's calls (WithOwner) with five
// tokens — five accounts, or a token and its refreshes — fail within one
// window: the host counts the owner once and stays closed; three owners'
// failures open it.
func TestOneOwnersTokensCountOnce(t *testing.T) {
	t.Parallel()
	clk := clock.NewSimulated(time.Now().UTC())
	bs := instances(t, 2, clk, nil)
	host := "host:owners"
	many := breaker.WithOwner(context.Background(), "u-many-accounts")
	for i := range 5 {
		_ = bs[i%2].Do(many, func(context.Context) error { return apiErr{503} }, breaker.TokenKey(fmt.Sprint("acct-", i)), host)
	}
	if r := storedRecord(t, bs[0], host); r.State != breaker.Closed || r.Failures != 1 {
		t.Errorf("after one owner's five tokens failed: %+v, want closed with the owner counted once", r)
	}
	for _, o := range []string{"u-second", "u-third"} {
		_ = bs[0].Do(breaker.WithOwner(context.Background(), o), func(context.Context) error { return apiErr{503} }, breaker.TokenKey(o), host)
	}
	if err := bs[0].Allow(context.Background(), host); !isOpen(err) {
		t.Errorf("three owners' failures left the host admitting: %v", err)
	}
}
