package recovery_test

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/google/go-cmp/cmp"

	"github.com/conveyor/conveyor/internal/aws/bucket"
	"github.com/conveyor/conveyor/internal/aws/queue"
	"github.com/conveyor/conveyor/internal/aws/store"
	"github.com/conveyor/conveyor/internal/clock"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/recovery"
	"github.com/conveyor/conveyor/internal/testfactory"
	"github.com/conveyor/conveyor/localstack/awstest"
)

const stuckAfter = 20 * time.Minute

// rescueBundle is a Recoverer on its own table and queues, driven by a
// simulated clock, with the jobs made by the factory — no API, no pollers.
type rescueBundle struct {
	st     *store.Store
	clk    *clock.Simulated
	rec    *recovery.Recoverer
	sqs    *sqs.Client
	queues map[job.Tier]string

	mu     sync.Mutex
	paused map[job.Tier]bool
}

func setupRescue(t *testing.T) *rescueBundle {
	t.Helper()
	env := awstest.Provision(t)
	b := &rescueBundle{clk: clock.NewSimulated(time.Now()), sqs: env.Clients.SQS, queues: env.Res.QueueURLs, paused: map[job.Tier]bool{}}
	b.st = store.New(env.Clients.DynamoDB, env.Res.Definition.Table.Name, b.clk.Now)
	b.rec = recovery.New(recovery.Config{
		Store: b.st, Sender: queue.NewSender(env.Clients.SQS, env.Res.QueueURLs, queue.Fairness{}),
		Objects:    bucket.New(env.Config, env.Res.Definition.Bucket.Name),
		StuckAfter: stuckAfter, StaleAfter: 168 * time.Hour, DeleteAfter: 720 * time.Hour,
		Paused: func(_ context.Context, tier job.Tier) bool {
			b.mu.Lock()
			defer b.mu.Unlock()
			return b.paused[tier]
		},
		Now: b.clk.Now, Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)),
	})
	return b
}

func (b *rescueBundle) pause(tier job.Tier, p bool) {
	b.mu.Lock()
	b.paused[tier] = p
	b.mu.Unlock()
}

func (b *rescueBundle) get(t *testing.T, id string) job.Job {
	t.Helper()
	j, err := b.st.GetJob(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// sent drains tier's queue and returns the messages, by job id.
func (b *rescueBundle) sent(t *testing.T, tier job.Tier) map[string][]int {
	t.Helper()
	out := map[string][]int{}
	for _, m := range awstest.ReceiveAll(t, b.sqs, b.queues[tier], 60) {
		msg, err := queue.Decode(aws.ToString(m.Body))
		if err != nil {
			t.Fatal(err)
		}
		out[msg.JobID] = append(out[msg.JobID], msg.Send)
	}
	return out
}

// TestRunRescuesWhatIsStuckAndOnlyThat: one run over a table that holds
// every case, counted by kind, then the jobs and the queue read back.
func TestRunRescuesWhatIsStuckAndOnlyThat(t *testing.T) {
	t.Parallel()
	b := setupRescue(t)
	ctx := context.Background()
	t0 := b.clk.Now()
	lost := testfactory.Job(t, b.st, testfactory.JobOpts{Tier: job.Medium, At: t0})
	pausedTier := testfactory.Job(t, b.st, testfactory.JobOpts{Tier: job.Low, At: t0})
	silent := testfactory.Job(t, b.st, testfactory.JobOpts{Tier: job.Medium, Status: job.Running, Attempts: 2, At: t0})
	spent := testfactory.Job(t, b.st, testfactory.JobOpts{Tier: job.High, Status: job.Running, Attempts: 7, MaxAttempts: 7, At: t0})
	b.pause(job.Low, true)

	b.clk.Advance(stuckAfter + time.Minute)
	beating := testfactory.Job(t, b.st, testfactory.JobOpts{Tier: job.Medium, Status: job.Running, Attempts: 1, At: b.clk.Now()})
	fresh := testfactory.Job(t, b.st, testfactory.JobOpts{Tier: job.Medium, At: b.clk.Now()})

	res, err := b.rec.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(recovery.Result{Orphans: 3, Requeued: 2, FailedStuck: 1}, res); diff != "" {
		t.Errorf("first run (-want +got):\n%s", diff)
	}
	if j := b.get(t, lost.ID); j.Status != job.Queued || j.Attempts != 0 || j.Resends != 1 || j.Enqueues != 2 {
		t.Errorf("lost message: status %s attempts %d resends %d enqueues %d; want queued, 0, 1, 2", j.Status, j.Attempts, j.Resends, j.Enqueues)
	}
	if j := b.get(t, silent.ID); j.Status != job.Queued || j.Attempts != 2 {
		t.Errorf("silent worker's job: status %s attempts %d; want queued with its 2 attempts", j.Status, j.Attempts)
	}
	if j := b.get(t, spent.ID); j.Status != job.Failed || j.Error == nil || j.Error.Code != "stuck" || !j.Error.Retryable {
		t.Errorf("spent job: status %s error %+v; want failed, stuck, retryable", j.Status, j.Error)
	}
	for name, j := range map[string]job.Job{"paused tier's": pausedTier, "beating": beating, "fresh": fresh} {
		if got := b.get(t, j.ID); got.Version != j.Version {
			t.Errorf("the %s job was written (version %d → %d)", name, j.Version, got.Version)
		}
	}
	if diff := cmp.Diff(map[string][]int{lost.ID: {2}, silent.ID: {2}}, b.sent(t, job.Medium)); diff != "" {
		t.Errorf("medium queue (-want +got):\n%s", diff)
	}
	if got := b.sent(t, job.High); len(got) != 0 {
		t.Errorf("the failed job was sent: %v", got)
	}
	if run, err := b.st.LastRecovery(ctx); err != nil || run.Orphans != 3 || run.FailedStuck != 1 {
		t.Errorf("recorded run %+v, %v", run, err)
	}

	// At once again: the re-sent job waits twice as long before the next
	// re-send, so nothing is due — a re-send never loops.
	if res, err := b.rec.Run(ctx); err != nil || res != (recovery.Result{}) {
		t.Errorf("second run: %+v, %v; want nothing done", res, err)
	}
	// 2×StuckAfter later the still-unreceived jobs are re-sent once more,
	// and the resumed tier's job is rescued too.
	b.pause(job.Low, false)
	b.clk.Advance(2*stuckAfter + time.Minute)
	res, err = b.rec.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.Requeued != 5 || res.FailedStuck != 0 {
		t.Errorf("third run: %+v; want 5 requeued (lost, silent, paused tier's, beating, fresh)", res)
	}
	if j := b.get(t, lost.ID); j.Resends != 2 {
		t.Errorf("lost message re-sent %d times, want 2", j.Resends)
	}
}

// TestOverlappingRunsSendEachOrphanOnce: two runs at the same moment (two
// schedules overlapping) split the work through conditional writes; no job
// is sent twice.
func TestOverlappingRunsSendEachOrphanOnce(t *testing.T) {
	t.Parallel()
	b := setupRescue(t)
	t0 := b.clk.Now()
	const n = 6
	want := map[string][]int{}
	for range n {
		j := testfactory.Job(t, b.st, testfactory.JobOpts{Tier: job.Medium, Status: job.Running, Attempts: 1, At: t0})
		want[j.ID] = []int{2}
	}
	b.clk.Advance(stuckAfter + time.Minute)
	var wg sync.WaitGroup
	results := make([]recovery.Result, 2)
	errs := make([]error, 2)
	for i := range results {
		wg.Go(func() { results[i], errs[i] = b.rec.Run(context.Background()) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if got := results[0].Requeued + results[1].Requeued; got != n {
		t.Errorf("requeued %d + %d, want %d in all", results[0].Requeued, results[1].Requeued, n)
	}
	if diff := cmp.Diff(want, b.sent(t, job.Medium)); diff != "" {
		t.Errorf("messages (-want +got):\n%s", diff)
	}
}

// TestReleaseScheduledAndParked: a scheduled job is released at its time,
// not before; a parked job goes back to the queue when its wait is over,
// unless its tier is paused.
func TestReleaseScheduledAndParked(t *testing.T) {
	t.Parallel()
	b := setupRescue(t)
	ctx := context.Background()
	t0 := b.clk.Now()
	at := t0.Add(10 * time.Minute)
	scheduled := testfactory.Job(t, b.st, testfactory.JobOpts{Status: job.Scheduled, ScheduleAt: &at, At: t0})
	retry := t0.Add(5 * time.Minute)
	parked := testfactory.Job(t, b.st, testfactory.JobOpts{Tier: job.Medium, Waiting: "backoff", RetryAt: &retry, At: t0})
	parkedLow := testfactory.Job(t, b.st, testfactory.JobOpts{Tier: job.Low, Waiting: "paused", RetryAt: &retry, At: t0})
	b.pause(job.Low, true)

	if res, err := b.rec.ReleaseScheduled(ctx, nil); err != nil || res != (recovery.Result{}) {
		t.Fatalf("before any time came: %+v, %v", res, err)
	}
	b.clk.Set(retry)
	res, err := b.rec.ReleaseScheduled(ctx, nil)
	if err != nil || res != (recovery.Result{Unparked: 1}) {
		t.Fatalf("at the retry time: %+v, %v; want one unparked", res, err)
	}
	if j := b.get(t, parked.ID); j.Waiting != "" || j.RetryAt != nil || j.Enqueues != 2 {
		t.Errorf("unparked job: waiting %q retryAt %v enqueues %d", j.Waiting, j.RetryAt, j.Enqueues)
	}
	if j := b.get(t, parkedLow.ID); j.Waiting != "paused" {
		t.Errorf("the paused tier's job left the table: %+v", j)
	}
	b.clk.Set(at)
	if res, err := b.rec.ReleaseScheduled(ctx, nil); err != nil || res != (recovery.Result{Released: 1}) {
		t.Fatalf("at the schedule time: %+v, %v; want one released", res, err)
	}
	if j := b.get(t, scheduled.ID); j.Status != job.Queued || j.QueuedAt == nil || !j.QueuedAt.Equal(at.UTC()) {
		t.Errorf("released job: status %s queuedAt %v", j.Status, j.QueuedAt)
	}
	want := map[string][]int{parked.ID: {2}, scheduled.ID: {1}}
	if diff := cmp.Diff(want, b.sent(t, job.Medium)); diff != "" {
		t.Errorf("messages (-want +got):\n%s", diff)
	}
	b.pause(job.Low, false)
	if res, err := b.rec.ReleaseScheduled(ctx, nil); err != nil || res != (recovery.Result{Unparked: 1}) {
		t.Errorf("after resuming low: %+v, %v; want its job unparked", res, err)
	}
}

// TestStoredButNeverSentIsSent: a job stored queued whose message never
// reached the queue (the process died before SendMessage) is sent after
// StuckAfter, not before, without spending an attempt.
func TestStoredButNeverSentIsSent(t *testing.T) {
	t.Parallel()
	b := setupRescue(t)
	ctx := context.Background()
	id := testfactory.Job(t, b.st, testfactory.JobOpts{Tier: job.Medium, At: b.clk.Now()}).ID
	b.clk.Advance(10 * time.Minute)
	if res, err := b.rec.Run(ctx); err != nil || res.Requeued != 0 {
		t.Fatalf("requeued before StuckAfter: %+v, %v", res, err)
	}
	b.clk.Advance(11 * time.Minute)
	res, err := b.rec.Run(ctx)
	if err != nil || res.Requeued != 1 {
		t.Fatalf("recovery = %+v, %v", res, err)
	}
	if diff := cmp.Diff(map[string][]int{id: {2}}, b.sent(t, job.Medium)); diff != "" {
		t.Errorf("messages (-want +got):\n%s", diff)
	}
	if j := b.get(t, id); j.Attempts != 0 || j.Enqueues != 2 {
		t.Errorf("attempts %d enqueues %d, want 0 (waiting is not a run) and 2", j.Attempts, j.Enqueues)
	}
}

// TestOverlappingRunsEnqueueOnce: four runs at once over five queued jobs
// nobody received: each job is sent once.
func TestOverlappingRunsEnqueueOnce(t *testing.T) {
	t.Parallel()
	b := setupRescue(t)
	want := map[string][]int{}
	for range 5 {
		want[testfactory.Job(t, b.st, testfactory.JobOpts{Tier: job.Medium, At: b.clk.Now()}).ID] = []int{2}
	}
	b.clk.Advance(21 * time.Minute)
	var wg sync.WaitGroup
	results := make([]recovery.Result, 4)
	for i := range results {
		wg.Go(func() {
			res, err := b.rec.Run(context.Background())
			if err != nil {
				t.Error(err)
			}
			results[i] = res
		})
	}
	wg.Wait()
	total := 0
	for _, r := range results {
		total += r.Requeued
	}
	if total != 5 {
		t.Errorf("runs requeued %d in total, want 5 (each job once): %+v", total, results)
	}
	if diff := cmp.Diff(want, b.sent(t, job.Medium)); diff != "" {
		t.Errorf("messages (-want +got):\n%s", diff)
	}
}

// countingSender moves clock on by perSend for every send, and nothing
// else does: with clock as the run's budget clock, what a run does within
// its budget depends on its sends alone, not on how fast the emulators
// answer — a stand-in for a release whose writes and sends take their time,
// so that a run's budget ends before a large backlog of due jobs is through.
type countingSender struct {
	recovery.Sender
	clock   *clock.Simulated
	perSend time.Duration
}

func (s countingSender) Send(ctx context.Context, tier job.Tier, m queue.Message) error {
	s.clock.Advance(s.perSend)
	return s.Sender.Send(ctx, tier, m)
}

// TestReleaseTakesOwnersInTurn: one owner's mass scheduleAt, due just
// before another owner's job, does not hold that job back past the run: the
// release takes each owner's first due jobs before anyone's rest. The run's
// budget is far too short to release the whole backlog (a budget of 100
// sends, one at a time), and the other owner's job sits behind the
// backlog's entries in its own shard of the sweep index, pages of 3.
func TestReleaseTakesOwnersInTurn(t *testing.T) {
	t.Parallel()
	b := setupRescue(t)
	st := b.st
	budget := clock.NewSimulated(time.Unix(0, 0))
	rec := recovery.New(recovery.Config{
		Store:      st,
		Sender:     countingSender{queue.NewSender(b.sqs, b.queues, queue.Fairness{}), budget, 50 * time.Millisecond},
		StuckAfter: stuckAfter, Turn: 3, Batch: 3, Concurrency: 1, Budget: 5 * time.Second,
		Now: b.clk.Now, Clock: budget.Now, Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)),
	})
	ctx := context.Background()
	t0 := b.clk.Now()
	heavy, light := testfactory.Owner(), testfactory.Owner()
	const backlog = 200
	for i := range backlog {
		at := t0.Add(time.Minute + time.Duration(i)*time.Millisecond)
		testfactory.Job(t, st, testfactory.JobOpts{Owner: heavy, Status: job.Scheduled, ScheduleAt: &at, At: t0})
	}
	at := t0.Add(time.Minute + time.Second)
	other := testfactory.Job(t, st, testfactory.JobOpts{Owner: light, Status: job.Scheduled, ScheduleAt: &at, At: t0})

	b.clk.Set(t0.Add(2 * time.Minute))
	res, err := rec.ReleaseScheduled(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Released >= backlog {
		t.Fatalf("released %d: the whole backlog fit in the budget, so the test shows nothing", res.Released)
	}
	j, err := st.GetJob(ctx, other.ID)
	if err != nil {
		t.Fatal(err)
	}
	if j.Status != job.Queued {
		t.Errorf("the other owner's due job is %s after a run that released %d of the backlog; want queued", j.Status, res.Released)
	}
}
