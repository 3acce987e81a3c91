package recovery_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/conveyor/conveyor/internal/aws/bucket"
	"github.com/conveyor/conveyor/internal/aws/queue"
	"github.com/conveyor/conveyor/internal/aws/store"
	"github.com/conveyor/conveyor/internal/clock"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/recovery"
	"github.com/conveyor/conveyor/internal/testfactory"
	"github.com/conveyor/conveyor/localstack/awstest"
)

// setupSweeps is a rescue bundle whose Recoverer's configuration the test
// adjusts.
func setupSweeps(t *testing.T, adjust func(*recovery.Config)) *rescueBundle {
	t.Helper()
	env := awstest.Provision(t)
	b := &rescueBundle{clk: clock.NewSimulated(time.Now()), sqs: env.Clients.SQS, queues: env.Res.QueueURLs, paused: map[job.Tier]bool{}}
	b.st = store.New(env.Clients.DynamoDB, env.Res.Definition.Table.Name, b.clk.Now)
	cfg := recovery.Config{
		Store: b.st, Sender: queue.NewSender(env.Clients.SQS, env.Res.QueueURLs, queue.Fairness{}),
		Objects:    bucket.New(env.Config, env.Res.Definition.Bucket.Name),
		StuckAfter: stuckAfter, StaleAfter: 168 * time.Hour, DeleteAfter: 720 * time.Hour,
		Paused: func(_ context.Context, tier job.Tier) bool {
			b.mu.Lock()
			defer b.mu.Unlock()
			return b.paused[tier]
		},
		Now: b.clk.Now, Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)),
	}
	adjust(&cfg)
	b.rec = recovery.New(cfg)
	return b
}

// parked builds n jobs of tier parked in the table until retryAt.
func parked(n int, tier job.Tier, at, retryAt time.Time) []job.Job {
	out := make([]job.Job, 0, n)
	for range n {
		out = append(out, testfactory.Build(testfactory.JobOpts{Tier: tier, At: at, Waiting: "circuit_open", RetryAt: &retryAt}))
	}
	return out
}

// TestPausedTierDoesNotStarveTheRelease: low is paused with thousands of
// jobs parked, all due before any of high's; with a small page (Batch 3)
// one release run still sends every one of high's parked jobs, and leaves
// every one of low's where it is.
func TestPausedTierDoesNotStarveTheRelease(t *testing.T) {
	t.Parallel()
	b := setupSweeps(t, func(c *recovery.Config) { c.Batch = 3 })
	ctx := context.Background()
	t0 := b.clk.Now()
	low := parked(2000, job.Low, t0.Add(-3*time.Hour), t0.Add(-2*time.Hour))
	high := parked(20, job.High, t0.Add(-time.Hour), t0.Add(-time.Minute))
	if err := b.st.ImportJobs(ctx, append(low, high...)); err != nil {
		t.Fatal(err)
	}
	b.pause(job.Low, true)

	res, err := b.rec.ReleaseScheduled(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Unparked != len(high) {
		t.Errorf("unparked %d jobs; want high's %d", res.Unparked, len(high))
	}
	for _, j := range high {
		if got := b.get(t, j.ID); got.Waiting != "" || got.Status != job.Queued {
			t.Errorf("high job %s: status %s waiting %q; want queued in the queue", j.ID, got.Status, got.Waiting)
		}
	}
	if sent := b.sent(t, job.High); len(sent) != len(high) {
		t.Errorf("high's queue holds %d jobs; want %d", len(sent), len(high))
	}
	for _, j := range low[:50] {
		if got := b.get(t, j.ID); got.Waiting == "" {
			t.Errorf("low job %s left the table while low is paused", j.ID)
		}
	}

}
