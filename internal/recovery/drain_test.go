//go:build sweepload

package recovery_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/conveyor/conveyor/internal/aws/awsclient"
	"github.com/conveyor/conveyor/internal/aws/bucket"
	"github.com/conveyor/conveyor/internal/aws/queue"
	"github.com/conveyor/conveyor/internal/aws/store"
	"github.com/conveyor/conveyor/internal/clock"
	"github.com/conveyor/conveyor/internal/ids"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/recovery"
	"github.com/conveyor/conveyor/internal/resources"
	"github.com/conveyor/conveyor/internal/testfactory"
	"github.com/conveyor/conveyor/internal/uploads"
	"github.com/conveyor/conveyor/localstack/awstest"
)

// The backlog of TestSweepsDrainTheirBacklogInAFiftyThousandJobTable: how
// many due items each sweep finds, among drainFiller jobs no sweep may
// touch (not due yet) — 50,000 jobs in all.
const (
	drainScheduled = 4000  // scheduled jobs whose time came
	drainParked    = 4000  // parked jobs whose wait is over (high, medium)
	drainPaused    = 6000  // parked jobs of low, paused: never read
	drainStuck     = 1000  // queued jobs never received, running jobs silent
	drainStale     = 12000 // finished jobs past StaleAfter
	drainMedia     = 4000  // unreferenced uploads past their use window
	// drainHeld of the stale jobs hold a reference on an upload each: it
	// is released when the job goes stale, and the upload expires.
	drainHeld = 4000
	// drainStuckAfter is longer than the test's simulated hour, so a job
	// re-sent once is not due again (no worker receives it here).
	drainStuckAfter = 24 * time.Hour
	drainFiller     = 50000 - drainScheduled - drainParked - drainPaused - 2*drainStuck - drainStale
)

// TestSweepsDrainTheirBacklogInAFiftyThousandJobTable seeds 50,000 jobs in
// DynamoDB Local (BatchWriteItem through the store's codecs) of which each
// sweep finds a backlog, with low paused and thousands of its jobs parked.
// The recovery function's tasks run on their schedules (release and
// retention every minute, recovery every 5) on a simulated clock, each run
// held to the default budget on a latencyClock (the time AWS would take
// for the requests made), and drain every backlog: every due item is
// handled exactly once, no run outlives its budget by more than a page,
// what a run leaves is counted and the next run takes it, a paused tier's
// jobs are never read, and the jobs that are not due are never touched.
// Release and retention run as the definition's schedules run them:
// ReleaseParts and RetainParts invocations a minute, each over its own
// shards with its own budget (its own latencyClock), and together they keep
// up with scheduled jobs, parked jobs and finished jobs at retainFloor
// jobs/s or more: the table's write throughput without the sweeps' own
// writes, above the pipeline's first bottleneck with them (about 1,300
// jobs/s; docs/performance.md). It logs each sweep's items per run, requests,
// modelled and emulator seconds and the CPU our process spent — the figures
// of docs/performance.md's sweep capacity.
//
// It takes about 6 minutes on a shared 2-core machine (seeding 50,000 jobs
// with their index entries into DynamoDB Local alone takes about 2m45s),
// so it is behind the build tag sweepload:
//
//	go test -tags sweepload -run TestSweepsDrain -v ./internal/recovery
func TestSweepsDrainTheirBacklogInAFiftyThousandJobTable(t *testing.T) {
	t.Parallel()
	env := awstest.Provision(t)
	counter := awsclient.NewCounter()
	// The connections the recovery function keeps (handler.Connections).
	base := recoveryConnections(t, env.Config)
	model := newLatencyClock(time.Now())
	cfg := counter.Attach(model.Attach(base))
	clients := awsclient.New(cfg)
	clk := clock.NewSimulated(time.Now())
	st := store.New(clients.DynamoDB, env.Res.Definition.Table.Name, clk.Now)
	var mu sync.Mutex
	var stats []recovery.SweepStats
	wall := map[string]time.Duration{} // the emulator's time per sweep
	var since time.Time                // when the sweep being run started
	sweepCPU := map[string]time.Duration{}
	var sinceCPU time.Duration
	// Each sweep's requests and DynamoDB units: the counter's figures
	// between the end of the sweep before it and its own.
	sweepOps, sweepUnits := map[string]map[string]int{}, map[string]map[string]float64{}
	var lastOps map[string]int
	var lastUnits map[string]float64
	const budget = recovery.BudgetDefault
	report := func(_ context.Context, s recovery.SweepStats) {
		mu.Lock()
		stats = append(stats, s)
		wall[s.Sweep] += time.Since(since)
		since = time.Now()
		cpu := processCPU()
		sweepCPU[s.Sweep] += cpu - sinceCPU
		sinceCPU = cpu
		ops, units := counter.Snapshot(), counter.Units()
		if sweepOps[s.Sweep] == nil {
			sweepOps[s.Sweep], sweepUnits[s.Sweep] = map[string]int{}, map[string]float64{}
		}
		for k, v := range ops {
			sweepOps[s.Sweep][k] += v - lastOps[k]
		}
		for k, v := range units {
			sweepUnits[s.Sweep][k] += v - lastUnits[k]
		}
		lastOps, lastUnits = ops, units
		mu.Unlock()
	}
	// A recoverer whose budget is measured by clock, on clients whose
	// requests feed it: an invocation of the recovery function.
	invocation := func(clock *latencyClock) *recovery.Recoverer {
		cfg := counter.Attach(clock.Attach(base))
		clients := awsclient.New(cfg)
		return recovery.New(recovery.Config{
			Store:      store.New(clients.DynamoDB, env.Res.Definition.Table.Name, clk.Now),
			Sender:     queue.NewSender(clients.SQS, env.Res.QueueURLs, queue.Fairness{}),
			Objects:    bucket.New(cfg, env.Res.Definition.Bucket.Name),
			StuckAfter: drainStuckAfter, StaleAfter: 168 * time.Hour, DeleteAfter: 720 * time.Hour,
			Paused: func(_ context.Context, tier job.Tier) bool { return tier == job.Low },
			Budget: budget, Now: clk.Now, Clock: clock.Now, Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)),
			Report: report,
		})
	}
	rec := invocation(model)
	// The release and retention parts, as the definition schedules them:
	// each its own invocation (its own budget clock) over its own shards.
	var parts, releases []resources.Schedule
	for _, sc := range env.Res.Definition.Schedules {
		switch sc.Task {
		case resources.TaskRetain:
			parts = append(parts, sc)
		case resources.TaskRelease:
			releases = append(releases, sc)
		}
	}
	retain := make([]*recovery.Recoverer, len(parts))
	for i := range parts {
		retain[i] = invocation(newLatencyClock(time.Now()))
	}
	release := make([]*recovery.Recoverer, len(releases))
	for i := range releases {
		release[i] = invocation(newLatencyClock(time.Now()))
	}
	ctx := context.Background()
	t0 := clk.Now()

	// The table.
	seedStart := time.Now()
	past, old := t0.Add(-time.Minute), t0.Add(-drainStuckAfter-time.Hour)
	var jobs []job.Job
	add := func(n int, o testfactory.JobOpts) {
		for range n {
			jobs = append(jobs, testfactory.Build(o))
		}
	}
	tiers := []job.Tier{job.High, job.Medium}
	for i, tier := range tiers {
		share := func(n int) int { return n/len(tiers) + map[bool]int{true: n % len(tiers)}[i == 0] }
		add(share(drainScheduled), testfactory.JobOpts{Tier: tier, Status: job.Scheduled, At: old, ScheduleAt: &past})
		add(share(drainParked), testfactory.JobOpts{Tier: tier, At: old, Waiting: "rate_limited", RetryAt: &past})
		add(share(drainStuck), testfactory.JobOpts{Tier: tier, At: old})
		add(share(drainStuck), testfactory.JobOpts{Tier: tier, Status: job.Running, Attempts: 1, At: old})
	}
	add(drainPaused, testfactory.JobOpts{Tier: job.Low, At: old, Waiting: "paused", RetryAt: &old})
	add(drainStale-drainHeld, testfactory.JobOpts{Status: job.Succeeded, At: t0.Add(-200 * time.Hour)})
	var uploads []uploads.Upload
	upload := func(refs int) uploads.Upload {
		at := t0.Add(-30 * 24 * time.Hour)
		return uploads.Upload{ID: ids.New(ids.Upload), Owner: testfactory.Owner(), Status: uploads.Confirmed, Key: fmt.Sprintf("uploads/u/%d.png", len(uploads)),
			ContentType: "image/png", Size: 1024, CreatedAt: at, ConfirmedAt: &at, Refs: refs}
	}
	for range drainHeld {
		u := upload(1)
		uploads = append(uploads, u)
		j := testfactory.Build(testfactory.JobOpts{Owner: u.Owner, Status: job.Succeeded, At: t0.Add(-200 * time.Hour), UploadIDs: []string{u.ID}})
		j.MediaRefs = []string{u.ID}
		jobs = append(jobs, j)
	}
	due := len(jobs) - drainPaused
	future := t0.Add(24 * time.Hour)
	for i := range drainFiller {
		switch i % 3 {
		case 0:
			add(1, testfactory.JobOpts{Status: job.Succeeded, At: t0.Add(-time.Hour)})
		case 1:
			add(1, testfactory.JobOpts{Status: job.Scheduled, At: t0, ScheduleAt: &future})
		default:
			add(1, testfactory.JobOpts{Tier: job.High, At: t0, Waiting: "backoff", RetryAt: &future})
		}
	}
	for range drainMedia {
		uploads = append(uploads, upload(0))
	}
	if err := importAll(ctx, st, jobs, uploads); err != nil {
		t.Fatal(err)
	}
	t.Logf("seeded %d jobs and %d uploads in %s", len(jobs), len(uploads), time.Since(seedStart).Round(time.Millisecond))
	if len(jobs) < 50000 {
		t.Fatalf("seeded %d jobs; the test promises 50,000", len(jobs))
	}

	// Runs on the schedules' intervals until nothing is left: release and
	// retention every minute, recovery every 5.
	counter.Reset()
	var total recovery.Result
	var retainCPU time.Duration
	task := func(name string, f func(context.Context) (recovery.Result, error)) recovery.Result {
		mu.Lock()
		since, sinceCPU, lastOps, lastUnits = time.Now(), processCPU(), counter.Snapshot(), counter.Units()
		mu.Unlock()
		cpu := processCPU()
		res, err := f(ctx)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if name == resources.TaskRetain {
			retainCPU += processCPU() - cpu
		}
		return res
	}
	runs := 0
	for runs = 1; runs <= 40; runs++ {
		var run recovery.Result
		for i, sc := range releases {
			r := task(resources.TaskRelease, func(ctx context.Context) (recovery.Result, error) { return release[i].ReleaseScheduled(ctx, sc.Shards) })
			run.Released, run.Unparked, run.Lost, run.Left = run.Released+r.Released, run.Unparked+r.Unparked, run.Lost+r.Lost, run.Left+r.Left
		}
		for i, sc := range parts {
			r := task(resources.TaskRetain, func(ctx context.Context) (recovery.Result, error) { return retain[i].Retain(ctx, sc.Shards) })
			run.Staled, run.MediaExpired, run.Lost, run.Left = run.Staled+r.Staled, run.MediaExpired+r.MediaExpired, run.Lost+r.Lost, run.Left+r.Left
		}
		if runs%5 == 1 { // the recovery schedule's 5 minutes
			r := task(resources.TaskRecover, rec.Run)
			run.Orphans, run.Requeued, run.FailedStuck = r.Orphans, r.Requeued, r.FailedStuck
			run.Lost, run.Left = run.Lost+r.Lost, run.Left+r.Left
		}
		total.Released += run.Released
		total.Unparked += run.Unparked
		total.Requeued += run.Requeued
		total.FailedStuck += run.FailedStuck
		total.Staled += run.Staled
		total.MediaExpired += run.MediaExpired
		total.Lost += run.Lost
		// Done when a recovery run found nothing left, and retention
		// nothing to do: an upload whose job another part staled after
		// the upload's own part swept goes a minute later.
		if run.Left == 0 && run.Staled+run.MediaExpired == 0 && runs%5 == 1 {
			break
		}
		clk.Advance(time.Minute)
	}
	want := recovery.Result{Released: drainScheduled, Unparked: drainParked, Requeued: 2 * drainStuck, Staled: drainStale, MediaExpired: drainMedia + drainHeld}
	if total != want {
		t.Errorf("in %d runs the sweeps did %+v; want %+v", runs, total, want)
	}

	// Figures, per sweep.
	per := map[string][]recovery.SweepStats{}
	for _, s := range stats {
		per[s.Sweep] = append(per[s.Sweep], s)
	}
	read := 0
	rate := map[string]float64{} // items per modelled second
	cpu := map[string]float64{}  // this process's processor ms per item
	for _, name := range slices.Sorted(maps.Keys(per)) {
		var done, reads, queries int
		var took time.Duration
		var items []string
		for _, s := range per[name] {
			done, reads, queries = done+s.Done+s.Failed, reads+s.Read, queries+s.Queries
			if s.Done+s.Failed+s.Lost+s.Skipped > 0 || s.Left > 0 {
				took += s.Elapsed // the runs that had work: an idle run's queries are no rate's
			}
			if s.Elapsed > budget+5*time.Second {
				t.Errorf("a %s sweep ran %s (modelled), over the run's budget of %s", name, s.Elapsed, budget)
			}
			if s.Done+s.Failed > 0 || s.Left > 0 {
				items = append(items, fmt.Sprintf("%d(left %d)", s.Done+s.Failed, s.Left))
			}
		}
		read += reads
		rate[name] = float64(done) / took.Seconds()
		var reqs []string
		for _, op := range slices.Sorted(maps.Keys(sweepOps[name])) {
			if n := sweepOps[name][op]; n > 0 {
				reqs = append(reqs, fmt.Sprintf("%s %.3f", op, float64(n)/float64(max(done, 1))))
			}
		}
		cpu[name] = float64(sweepCPU[name].Microseconds()) / 1000 / float64(max(done, 1))
		t.Logf("%-18s %5d items in %2d runs [%s]; %d read, %d queries; at AWS latencies %.2f s, %.0f items/s; "+
			"here %.1f s, %.0f items/s; CPU %.3f ms per item; per item: %s; write units %.1f (table %.1f)",
			name, done, len(per[name]), strings.Join(items, " "), reads, queries, took.Seconds(), rate[name],
			wall[name].Seconds(), float64(done)/wall[name].Seconds(), cpu[name], strings.Join(reqs, ", "),
			sweepUnits[name]["write"]/float64(max(done, 1)), sweepUnits[name]["write table"]/float64(max(done, 1)))
	}
	cpuStale := float64(sweepCPU[recovery.SweepStale].Microseconds()) / 1000 / float64(total.Staled)
	cpuMedia := float64(sweepCPU[recovery.SweepMedia].Microseconds()) / 1000 / float64(total.MediaExpired)
	t.Logf("CPU of this process (SDK, our code, the test) in the retention runs: %.3f ms per item staled or expired (stale %.3f, media %.3f)",
		float64(retainCPU.Microseconds())/1000/float64(total.Staled+total.MediaExpired), cpuStale, cpuMedia)
	// The rate of finished jobs (each with one upload) that retention keeps
	// up with at AWS latencies: in each of its invocations a minute, the
	// stale and media sweeps' modelled rates sharing the run's budget. The
	// floor is at least the pipeline's first bottleneck
	// (docs/performance.md, "Capacity").
	const retainFloor = 1630 // jobs/s
	perRun := budget.Seconds() / (1/rate[recovery.SweepStale] + 1/rate[recovery.SweepMedia]) / 60
	sustained := float64(len(parts)) * perRun
	// Logged, not asserted (a timing): what the processor allows, at this
	// machine's CPU per item and the recovery function's share of a vCPU
	// (1 vCPU per 1,769 MB), a minute's jobs taking at most the budget.
	vcpu := float64(resources.FunctionSizes[resources.FuncRecovery].MemoryMB) / 1769
	byCPU := float64(len(parts)) * vcpu * budget.Seconds() * 1000 / (cpuStale + cpuMedia) / 60
	t.Logf("retention, %d invocations a minute, keeps up with %.0f finished jobs/s (one upload each) at AWS latencies (%.0f each); "+
		"by the processor at %d MB (%.2f vCPU each), %.0f jobs/s", len(parts), sustained, perRun,
		resources.FunctionSizes[resources.FuncRecovery].MemoryMB, vcpu, byCPU)
	if sustained < retainFloor {
		t.Errorf("retention keeps up with %.0f jobs/s, under the pipeline's first bottleneck of %d jobs/s (docs/performance.md)", sustained, retainFloor)
	}
	// The rate of scheduled jobs, and of parked ones, that the release
	// parts keep up with at AWS latencies: each invocation a minute gives
	// each of its two sweeps half its budget (its share when both have
	// work; the whole budget goes to parked jobs when none is scheduled).
	// The floor is retention's.
	const releaseFloor = retainFloor
	for _, name := range []string{recovery.SweepScheduled, recovery.SweepParked} {
		keeps := float64(len(releases)) * rate[name] * budget.Seconds() / 2 / 60
		byCPU := float64(len(releases)) * vcpu * budget.Seconds() / 2 * 1000 / cpu[name] / 60
		t.Logf("%s, %d invocations a minute, keeps up with %.0f jobs/s at AWS latencies (%.0f items/s each, half of a %s budget); by the processor, %.0f jobs/s",
			name, len(releases), keeps, rate[name], budget, byCPU)
		if keeps < releaseFloor {
			t.Errorf("%s keeps up with %.0f jobs/s, under the pipeline's first bottleneck of %d jobs/s (docs/performance.md)", name, keeps, releaseFloor)
		}
	}
	// The stuck sweep: one run every 5 minutes with the whole budget
	// (logged: stuck jobs are the failed few, docs/performance.md).
	t.Logf("%s, one run every 5 minutes, keeps up with %.0f stuck jobs/s at AWS latencies (%.0f items/s); by the processor, %.0f",
		recovery.SweepStuck, rate[recovery.SweepStuck]*budget.Seconds()/300, rate[recovery.SweepStuck],
		vcpu*budget.Seconds()*1000/cpu[recovery.SweepStuck]/300)
	// Each due item is read once, plus the few a run read as its time ran
	// out; low's parked jobs and the filler never.
	if read > due+len(uploads)+len(stats)*recovery.BatchDefault {
		t.Errorf("the sweeps read %d items for %d due ones", read, due+len(uploads))
	}
	ops := counter.Snapshot()
	units := counter.Units()
	handled := float64(due + len(uploads))
	var lines []string
	for _, op := range slices.Sorted(maps.Keys(ops)) {
		lines = append(lines, fmt.Sprintf("%s %d (%.2f per item)", op, ops[op], float64(ops[op])/handled))
	}
	t.Logf("requests: %s", strings.Join(lines, ", "))
	t.Logf("DynamoDB units: %v", units)
}

// processCPU is the processor time this process spent so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// importAll writes jobs and uploads, 8 batches at a time.
func importAll(ctx context.Context, st *store.Store, jobs []job.Job, uploads []uploads.Upload) error {
	const chunk = 500
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	do := func(f func() error) {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := f(); err != nil {
				mu.Lock()
				first = err
				mu.Unlock()
			}
		})
	}
	for i := 0; i < len(jobs); i += chunk {
		part := jobs[i:min(i+chunk, len(jobs))]
		do(func() error { return st.ImportJobs(ctx, part) })
	}
	do(func() error { return st.ImportUploads(ctx, uploads) })
	wg.Wait()
	return first
}
