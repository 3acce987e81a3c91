package breaker_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/conveyor/conveyor/internal/aws/awsclient"
	"github.com/conveyor/conveyor/internal/breaker"
	"github.com/conveyor/conveyor/internal/clock"
)

// callerErr is a failure the caller caused (its own short deadline).
type callerErr struct{}

func (callerErr) Error() string      { return "deadline below the floor" }
func (callerErr) CallerCaused() bool { return true }

// TestTargetCircuitsArePerOwner: one owner's failures open its circuit
// of a host, not another owner's, and none of the product's circuits.
func TestTargetCircuitsArePerOwner(t *testing.T) {
	t.Parallel()
	clk := clock.NewSimulated(time.Now().UTC())
	bs := instances(t, 2, clk, nil)
	ta, tb := bs[0].Targets(5), bs[1].Targets(5)
	ctx := context.Background()
	for range 5 {
		_ = ta.Do(ctx, "alice", "hooks.example.com", func(context.Context) error { return apiErr{503} })
	}
	clk.Advance(1100 * time.Millisecond)
	if err := tb.Do(ctx, "alice", "hooks.example.com", func(context.Context) error { return nil }); !isOpen(err) {
		t.Errorf("alice's circuit after 5 failures: %v, want open on every instance", err)
	}
	called := false
	if err := tb.Do(ctx, "bob", "hooks.example.com", func(context.Context) error { called = true; return nil }); err != nil || !called {
		t.Errorf("bob's call to the same host: %v (called %v), want it made", err, called)
	}
	var oe *breaker.OpenError
	if err := ta.Do(ctx, "alice", "hooks.example.com", func(context.Context) error { return nil }); !errors.As(err, &oe) || oe.Key != "http:hooks.example.com" {
		t.Errorf("refusal %v, want it to name http:hooks.example.com", err)
	}
	if recs, err := bs[0].List(ctx); err != nil || len(recs) != 0 {
		t.Errorf("the product's partition holds %v (%v), want nothing", recs, err)
	}
}

// TestCallerCausedFailuresDoNotCount: failures that say CallerCaused
// change no circuit and write nothing.
func TestCallerCausedFailuresDoNotCount(t *testing.T) {
	t.Parallel()
	clk := clock.NewSimulated(time.Now().UTC())
	b := instances(t, 1, clk, nil)[0]
	ta := b.Targets(5)
	ctx := context.Background()
	for range 20 {
		_ = ta.Do(ctx, "carol", "slow.example.com", func(context.Context) error { return fmt.Errorf("wrapped: %w", callerErr{}) })
		_ = b.Do(ctx, func(context.Context) error { return callerErr{} }, "host:api.example.com")
	}
	recs, err := ta.List(ctx, "carol")
	if err != nil || len(recs) != 0 {
		t.Errorf("records after caller-caused failures: %v (%v), want none", recs, err)
	}
	if recs, _ := b.List(ctx); len(recs) != 0 {
		t.Errorf("product records after caller-caused failures: %v", recs)
	}
	if o, _ := breaker.Classify(fmt.Errorf("x: %w", callerErr{})); o != breaker.Ignored {
		t.Errorf("Classify = %v, want ignored", o)
	}
}

// TestTargetRecordsAreBoundedPerOwner: four instances failing calls to 40
// hosts of one owner at once leave at most MaxPerOwner host records and
// one shared; the hosts beyond share one circuit.
func TestTargetRecordsAreBoundedPerOwner(t *testing.T) {
	t.Parallel()
	const limit = 5
	clk := clock.NewSimulated(time.Now().UTC())
	bs := instances(t, 4, clk, nil)
	ctx := context.Background()
	var wg sync.WaitGroup
	for i, b := range bs {
		ts := b.Targets(limit)
		wg.Go(func() {
			for h := range 40 {
				host := fmt.Sprintf("h%d.example.com:%d", (h+i*10)%40, 8000+h)
				_ = ts.Do(ctx, "dave", host, func(context.Context) error { return apiErr{502} })
			}
		})
	}
	wg.Wait()
	recs, err := bs[0].Targets(limit).List(ctx, "dave")
	if err != nil {
		t.Fatal(err)
	}
	shared := 0
	for _, r := range recs {
		if r.Key == breaker.SharedKey {
			shared++
		}
	}
	t.Logf("40 hosts, 4 instances: %d records (%d shared)", len(recs), shared)
	if len(recs) > limit+1 || shared != 1 {
		t.Errorf("%d records with %d shared, want at most %d and exactly one shared", len(recs), shared, limit+1)
	}
}

// TestTargetReadsAreCheap: healthy calls of one owner cost one Query per
// cache period and no single-item reads or writes.
func TestTargetReadsAreCheap(t *testing.T) {
	t.Parallel()
	clk := clock.NewSimulated(time.Now().UTC())
	counter := awsclient.NewCounter()
	ta := instances(t, 1, clk, counter)[0].Targets(5)
	ctx := context.Background()
	for i := range 200 {
		if i%100 == 0 {
			clk.Advance(time.Second)
		}
		if err := ta.Do(ctx, "erin", fmt.Sprintf("h%d.example.com", i%7), func(context.Context) error { return nil }); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("200 healthy calls: %v", counter.Snapshot())
	if q, other := counter.Get("DynamoDB.Query"), counter.Total()-counter.Get("DynamoDB.Query"); q != 2 || other != 0 {
		t.Errorf("%d queries and %d other requests for 200 calls over 2 cache periods, want 2 and 0", q, other)
	}
}
