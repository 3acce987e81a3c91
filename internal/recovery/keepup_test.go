package recovery_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/conveyor/conveyor/internal/aws/awsclient"
	"github.com/conveyor/conveyor/internal/aws/queue"
	"github.com/conveyor/conveyor/internal/aws/store"
	"github.com/conveyor/conveyor/internal/breaker"
	"github.com/conveyor/conveyor/internal/clock"
	"github.com/conveyor/conveyor/internal/handler"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/recovery"
	"github.com/conveyor/conveyor/internal/resources"
	"github.com/conveyor/conveyor/internal/testfactory"
	"github.com/conveyor/conveyor/localstack/awstest"
)

// The keep-up scenario: finished jobs reach StaleAfter at keepUpPerMinute
// a minute for keepUpMinutes simulated minutes, and the recovery function
// runs its schedules (the resource definition's tasks at their intervals,
// retention's parts each over its own shards) with a budget of keepUpBudget
// on a latencyClock. The budget is 20× under the 50 s default, so 200 jobs a
// minute stand for 4,000 a minute (67 jobs/s) at the full budget — above
// the ~45 a second the stale stage managed when it ran in the 5-minute
// recovery run with a third of its budget. A run's fixed cost (a query per
// partition, empty or not) does not shrink with the budget, which makes the
// compressed scenario harder, not easier. Six minutes hold two recovery
// runs (every five minutes) and six minutes of retention runs: staling left
// to the recovery run falls a thousand jobs behind.
const (
	keepUpBudget    = 2500 * time.Millisecond
	keepUpPerMinute = 200
	keepUpMinutes   = 6
)

// noOpenCircuits is the breaker gauge of a recovery function whose circuits
// are all closed.
// keepUpStaleAfter is the keep-up tests' StaleAfter.
const keepUpStaleAfter = 168 * time.Hour

// keepUpRig is a keep-up test's recovery function, as the schedules invoke
// it: its recoverer on a simulated clock, each run's budget on a
// latencyClock, and the stats of one sweep's runs as they are reported.
// seed writes to the table without being modelled.
type keepUpRig struct {
	sim   *clock.Simulated
	seed  *store.Store
	fn    func(context.Context, events.EventBridgeEvent) error
	mu    sync.Mutex
	stats []recovery.SweepStats
}

// newKeepUpRig provisions a test's resources and builds its recovery
// function with budget per run, keeping the stats of sweep.
func newKeepUpRig(t *testing.T, budget time.Duration, sweep string) (awstest.Env, *keepUpRig) {
	t.Helper()
	env := awstest.Provision(t)
	r := &keepUpRig{sim: clock.NewSimulated(time.Now().UTC().Truncate(time.Minute))}
	model := newLatencyClock(time.Now())
	clients := awsclient.New(model.Attach(env.Config))
	table := env.Res.Definition.Table.Name
	r.seed = store.New(env.Clients.DynamoDB, table, r.sim.Now)
	discard := slog.New(slog.NewJSONHandler(io.Discard, nil))
	rec := recovery.New(recovery.Config{
		Store: store.New(clients.DynamoDB, table, r.sim.Now), Sender: queue.NewSender(clients.SQS, env.Res.QueueURLs, queue.Fairness{}),
		StuckAfter: 20 * time.Minute, StaleAfter: keepUpStaleAfter, DeleteAfter: 720 * time.Hour,
		Budget: budget, Now: r.sim.Now, Clock: model.Now, Logger: discard,
		Report: func(_ context.Context, s recovery.SweepStats) {
			if s.Sweep == sweep {
				r.mu.Lock()
				r.stats = append(r.stats, s)
				r.mu.Unlock()
			}
		},
	})
	r.fn = handler.RecoveryHandler(rec, noOpenCircuits{}, nil, nil, handler.NewEmitter(io.Discard, "test", r.sim.Now), discard)
	return env, r
}

// invoke runs schedule s's invocation of minute m.
func (r *keepUpRig) invoke(t *testing.T, m int, s resources.Schedule) {
	t.Helper()
	if err := r.fn(context.Background(), events.EventBridgeEvent{DetailType: "Scheduled Event", Detail: json.RawMessage(s.DetailJSON())}); err != nil {
		t.Fatalf("minute %d, schedule %s: %v", m, s.Name, err)
	}
}

// reported is how many runs have reported so far.
func (r *keepUpRig) reported() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.stats)
}

// since returns the runs reported after the first n.
func (r *keepUpRig) since(n int) []recovery.SweepStats {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]recovery.SweepStats(nil), r.stats[n:]...)
}

type noOpenCircuits struct{}

func (noOpenCircuits) ReportOpen(context.Context, breaker.Sink) (int, error) { return 0, nil }

// TestStaleStageKeepsUpWithFinishedJobs runs the recovery function's
// schedules minute by minute while jobs finish at the scenario's rate: after
// every retention run nothing due is left, and after each minute every job
// that reached StaleAfter is stale — finished jobs never pile up waiting for
// the stale stage — and each retention invocation reads only the
// partitions of the shards its schedule owns, so that RetainParts
// invocations a minute share the work, each with its own processor and
// budget (the drain test measures the rate that gives).
func TestStaleStageKeepsUpWithFinishedJobs(t *testing.T) {
	t.Parallel()
	env, rig := newKeepUpRig(t, keepUpBudget, recovery.SweepStale)
	sim, seed, ctx := rig.sim, rig.seed, context.Background()
	var tasks []resources.Schedule
	retainParts := 0
	for _, s := range env.Res.Definition.Schedules {
		if s.Function == resources.FuncRecovery {
			tasks = append(tasks, s)
		}
		if s.Task == resources.TaskRetain {
			retainParts++
		}
	}
	if retainParts < 2 {
		t.Fatalf("%d retention schedules: one invocation's processor does not keep up with the pipeline (docs/performance.md)", retainParts)
	}

	seeded := 0
	var lines []string
	for m := 0; m <= keepUpMinutes; m++ {
		// The jobs that reached StaleAfter during the minute just gone.
		due := sim.Now().Add(-keepUpStaleAfter)
		jobs := make([]job.Job, keepUpPerMinute)
		for i := range jobs {
			jobs[i] = testfactory.Build(testfactory.JobOpts{Status: job.Succeeded, At: due.Add(-time.Duration(i) * time.Minute / keepUpPerMinute)})
		}
		if err := seed.ImportJobs(ctx, jobs); err != nil {
			t.Fatal(err)
		}
		seeded += len(jobs)

		before := rig.reported()
		for _, s := range tasks {
			if m%int(s.Interval/time.Minute) != 0 {
				continue
			}
			rig.invoke(t, m, s)
		}
		left, err := seed.CountDue(ctx, job.Succeeded, due)
		if err != nil {
			t.Fatal(err)
		}
		runs := rig.since(before)
		// Each of retention's invocations reads the partitions of its own
		// shards only (three finished statuses each), and a page more for
		// each Batch of items.
		own := 3 * resources.SweepShards / resources.RetainParts
		for _, s := range runs {
			lines = append(lines, fmt.Sprintf("minute %d: staled %d in %.2f s (modelled, %d queries), left %d", m, s.Done, s.Elapsed.Seconds(), s.Queries, s.Left))
			if s.Left != 0 {
				t.Errorf("minute %d: the stale stage left %d due jobs to the next run", m, s.Left)
			}
			if s.Queries > own+s.Read/recovery.BatchDefault {
				t.Errorf("minute %d: a stale run made %d queries for %d items; its %d shards have %d partitions", m, s.Queries, s.Read, resources.SweepShards/resources.RetainParts, own)
			}
		}
		if len(runs) != retainParts {
			t.Errorf("minute %d: %d stale runs; the definition has %d retention schedules", m, len(runs), retainParts)
		}
		if len(runs) == 0 {
			lines = append(lines, fmt.Sprintf("minute %d: no stale run; %d due jobs wait", m, left))
		}
		if left != 0 {
			t.Errorf("after %d minutes at %d finished jobs a minute, %d of the %d jobs past StaleAfter are not stale", m, keepUpPerMinute, left, seeded)
		}
		sim.Advance(time.Minute)
	}
	t.Logf("budget %s (modelled: %s a request, %s a transaction), %d finished jobs a minute:\n%s", keepUpBudget, awsLatency, transactionLatency, keepUpPerMinute, strings.Join(lines, "\n"))
}

// The release keep-up scenario: scheduled jobs reach their time at the
// pipeline's first bottleneck (releaseKeepUpRate jobs/s, docs/performance.md,
// "Capacity"), every job scheduled, while the recovery function's release
// schedules run every minute with a budget releaseKeepUpBudget on a
// latencyClock: 100× under the 50 s default, so the scenario's jobs a minute
// are the rate's a minute divided by 100. A run's fixed cost (a query per
// partition) does not shrink with the budget, which makes the compressed
// scenario harder, not easier. One release run a minute over every shard,
// 16 items at a time, released 116 of the 780 a minute; the same run 128
// at a time released them all in 0.27 s of its 0.25 s share (its last
// items started in time), the edge of what one invocation's round trips
// hold.
const (
	releaseKeepUpBudget  = 500 * time.Millisecond
	releaseKeepUpRate    = 1300 // jobs/s
	releaseKeepUpMinutes = 2
)

// TestReleaseKeepsUpWithScheduledJobs runs the recovery function's release
// schedules, as the definition has them, minute by minute while scheduled
// jobs come due at the pipeline's first bottleneck: after each minute no
// due scheduled job is left (each is published within a minute of its
// time), no release run left anything to the next, each is released once,
// and each release invocation reads only the partitions of its own shards.
func TestReleaseKeepsUpWithScheduledJobs(t *testing.T) {
	t.Parallel()
	env, rig := newKeepUpRig(t, releaseKeepUpBudget, recovery.SweepScheduled)
	sim, seed, ctx := rig.sim, rig.seed, context.Background()
	var tasks []resources.Schedule
	for _, s := range env.Res.Definition.Schedules {
		if s.Task == resources.TaskRelease {
			tasks = append(tasks, s)
		}
	}
	perMinute := int(releaseKeepUpRate * time.Minute.Seconds() * float64(releaseKeepUpBudget) / float64(recovery.BudgetDefault))

	seeded, done := 0, 0
	var lines []string
	tiers := []job.Tier{job.High, job.Medium, job.Low}
	for m := 0; m < releaseKeepUpMinutes; m++ {
		// The jobs whose time came during the minute just gone.
		now := sim.Now()
		jobs := make([]job.Job, perMinute)
		for i := range jobs {
			at := now.Add(-time.Duration(i) * time.Minute / time.Duration(perMinute))
			jobs[i] = testfactory.Build(testfactory.JobOpts{Tier: tiers[i%len(tiers)], Status: job.Scheduled, At: at.Add(-time.Hour), ScheduleAt: &at})
		}
		if err := seed.ImportJobs(ctx, jobs); err != nil {
			t.Fatal(err)
		}
		seeded += len(jobs)

		before := rig.reported()
		for _, s := range tasks {
			rig.invoke(t, m, s)
		}
		left, err := seed.CountDue(ctx, job.Scheduled, now)
		if err != nil {
			t.Fatal(err)
		}
		runs := rig.since(before)
		// Each release invocation reads the scheduled partitions of its
		// own shards only, and a page more for each Batch of items.
		own := resources.SweepShards / max(len(tasks), 1)
		for _, s := range runs {
			done += s.Done
			lines = append(lines, fmt.Sprintf("minute %d: released %d in %.3f s (modelled, %d queries), left %d", m, s.Done, s.Elapsed.Seconds(), s.Queries, s.Left))
			if s.Left != 0 {
				t.Errorf("minute %d: a release run left %d due scheduled jobs to the next run", m, s.Left)
			}
			if s.Queries > own+s.Read/recovery.BatchDefault+1 {
				t.Errorf("minute %d: a release run made %d queries for %d items; its shards have %d scheduled partitions", m, s.Queries, s.Read, own)
			}
		}
		if left != 0 {
			t.Errorf("after minute %d at %d scheduled jobs a minute (%d jobs/s at the full budget), %d of the %d due jobs are not released",
				m, perMinute, releaseKeepUpRate, left, seeded)
		}
		sim.Advance(time.Minute)
	}
	if done != seeded {
		t.Errorf("the release runs released %d jobs; %d came due", done, seeded)
	}
	t.Logf("budget %s (modelled), %d release schedules, %d scheduled jobs a minute:\n%s", releaseKeepUpBudget, len(tasks), perMinute, strings.Join(lines, "\n"))
}
