// Package recovery is the failsafe that runs on a schedule: it re-sends
// jobs that were stored but never enqueued or never received, takes back
// running jobs whose worker stopped beating, releases scheduled jobs when
// their time has come, and moves finished jobs through retention. It reads
// only the sparse bySweep index — never a Scan — and every change is a
// conditional write, so overlapping runs cannot enqueue a job twice.
package recovery

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/conveyor/conveyor/internal/aws/queue"
	"github.com/conveyor/conveyor/internal/aws/store"
	"github.com/conveyor/conveyor/internal/job"
)

// Defaults.
const (
	// BatchDefault is how many due items one query of a sweep reads.
	BatchDefault = 100
	// ConcurrencyDefault is how many items a sweep handles at once: a
	// sweep's rate is its requests in flight over their round trips, and
	// the release and retention sweeps must keep up with the rate the
	// pipeline takes jobs (docs/performance.md, "The sweeps").
	ConcurrencyDefault = 128
	// TurnDefault is how many due scheduled jobs of one owner one run
	// releases before every other owner's (Config.Turn).
	TurnDefault = 100
	// BudgetDefault is how long one run's sweeps may work in all: under
	// the release schedule's minute, so one run ends before the next.
	BudgetDefault = 50 * time.Second
	// MarginDefault is the time kept before the invocation's deadline.
	MarginDefault = 10 * time.Second
)

// Sender puts a job's message on its tier's queue.
type Sender interface {
	Send(ctx context.Context, tier job.Tier, m queue.Message) error
}

// Objects deletes the objects of expired uploads (bucket.Bucket).
type Objects interface {
	// Delete removes key's object; a missing one is no error.
	Delete(ctx context.Context, key string) error
}

// Config configures a Recoverer.
type Config struct {
	Store  *store.Store
	Sender Sender
	// Objects is the upload bucket: the media sweep deletes the objects of
	// the uploads it expires (nil: it leaves them to the bucket's
	// lifecycle).
	Objects Objects
	// StuckAfter: a queued job not received, or a running job without a
	// heartbeat, for this long is stuck (default 20m).
	StuckAfter time.Duration
	// StaleAfter / DeleteAfter are the retention stages (default 168h / 720h).
	StaleAfter, DeleteAfter time.Duration
	// Paused reports whether a tier is paused: its parked jobs stay parked
	// and its queued jobs are not stuck; the sweeps do not read them.
	Paused func(ctx context.Context, tier job.Tier) bool
	// Turn is how many due scheduled jobs of one owner the release takes
	// before every other owner has had its turn (default TurnDefault).
	Turn int
	// Batch is how many due items one query of a sweep reads (default
	// BatchDefault).
	Batch int
	// Concurrency is how many items each sweep handles at once (default
	// ConcurrencyDefault).
	Concurrency int
	// Budget is how long one run's sweeps may work in all (default
	// BudgetDefault); the sweeps share it, each the rest split evenly.
	Budget time.Duration
	// Margin is kept free before the context's deadline, which cuts the
	// budget (default MarginDefault).
	Margin time.Duration
	// Report, if set, receives each sweep's figures after it ran (the
	// function emits them as metrics).
	Report func(context.Context, SweepStats)
	// Now is the time the sweeps compare due times with; defaults to
	// time.Now.
	Now func() time.Time
	// Clock measures the budget (wall time); defaults to time.Now.
	Clock func() time.Time
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// Recoverer runs the sweeps.
type Recoverer struct{ cfg Config }

// New returns a Recoverer.
func New(cfg Config) *Recoverer {
	if cfg.Batch <= 0 {
		cfg.Batch = BatchDefault
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = ConcurrencyDefault
	}
	if cfg.Turn <= 0 {
		cfg.Turn = TurnDefault
	}
	if cfg.Budget <= 0 {
		cfg.Budget = BudgetDefault
	}
	if cfg.Margin <= 0 {
		cfg.Margin = MarginDefault
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Recoverer{cfg: cfg}
}

// Result counts what one run did.
type Result struct {
	// Released scheduled jobs whose time came.
	Released int
	// Orphans found: queued jobs nobody received and running jobs whose
	// worker went silent.
	Orphans int
	// Requeued of those orphans, with a fresh send.
	Requeued int
	// FailedStuck of those orphans, whose attempts were spent.
	FailedStuck int
	// Behind counts queued jobs not received for StuckAfter whose owner's
	// messages were moving (mayBeLost): their messages wait in the queue
	// behind the owner's others, so nothing was sent.
	Behind int
	// Staled finished jobs (first retention stage).
	Staled int
	// Unparked jobs whose wait in the table was over, sent again.
	Unparked int
	// Admitted jobs from their owners' backlogs into the queue.
	Admitted int
	// MediaExpired uploads that no job may still need: marked expired and
	// their objects deleted.
	MediaExpired int
	// Lost races with another run or a worker (nothing done, correctly).
	Lost int
	// Left counts the due items the run's sweeps did not reach before
	// their time was up: the next run takes them.
	Left int
}

// add sums a sweep's left-overs into res.
func (res *Result) add(st SweepStats) {
	res.Left += st.Left
}

// ReleaseScheduled moves due scheduled jobs to the queue, and parked jobs
// whose wait is over, over the sweep index's shards in shards (nil: every
// shard; the release schedules split the shards among them:
// resources.ReleaseParts); it runs every minute so that a job starts within
// a minute after its time, never before. Each of its two sweeps works until
// nothing is due or its share of the budget is spent.
//
// The scheduled jobs are released owners in turn: a first pass releases
// each owner's oldest Config.Turn due jobs and reads past the rest, then a
// second releases whatever is still due, oldest first. One owner's mass
// scheduleAt thus delays another owner's due job by the time it takes to
// read past its index entries (a query per Batch of them), not to release
// them (a transaction and a send each).
func (r *Recoverer) ReleaseScheduled(ctx context.Context, shards []int) (Result, error) {
	var res Result
	now := r.cfg.Now()
	until := r.budget(ctx)
	release := func(ctx context.Context, j job.Job) (outcome, error) {
		if j.ScheduleAt != nil && j.ScheduleAt.After(now) {
			return skipped, nil
		}
		return r.outcome(r.requeue(ctx, j.ID, func(j *job.Job) error {
			if j.Status != job.Scheduled {
				return errSkip
			}
			return j.Apply(job.Release, now)
		}))
	}
	var (
		mu       sync.Mutex
		turns    = map[string]int{}
		deferred bool // some owner's jobs were left for the second pass
	)
	scan := r.cfg.Store.ScanDue(now, nil, job.Scheduled).OnShards(shards)
	st, err := pass(ctx, r, SweepScheduled, scan, scan.Jobs, r.share(until, 3), r.cfg.Concurrency, func(ctx context.Context, j job.Job) (outcome, error) {
		mu.Lock()
		turn := turns[j.Owner] < r.cfg.Turn
		if turn {
			turns[j.Owner]++
		} else {
			deferred = true
		}
		mu.Unlock()
		if !turn {
			return deferredTurn, nil
		}
		return release(ctx, j)
	})
	if err == nil && (deferred || !st.Complete) {
		// Everyone had a turn: the rest, oldest first (the pass read
		// past the deferred jobs, so a new scan starts from the oldest).
		scan = r.cfg.Store.ScanDue(now, nil, job.Scheduled).OnShards(shards)
		var rest SweepStats
		rest, err = pass(ctx, r, SweepScheduled, scan, scan.Jobs, r.share(until, 2), r.cfg.Concurrency, release)
		st = st.merge(rest)
	}
	r.report(ctx, st)
	res.Released, res.Lost = st.Done, st.Lost
	res.add(st)
	if err != nil {
		return res, err
	}
	// Jobs parked in the table (job.Park) whose wait is over go back to
	// the queue; a paused tier's stay until it is resumed, unread.
	paused := r.paused(ctx)
	scan = r.cfg.Store.ScanDue(now, running(paused), store.Waiting).OnShards(shards)
	st, err = sweep(ctx, r, SweepParked, scan, scan.Jobs, until, r.cfg.Concurrency, func(ctx context.Context, j job.Job) (outcome, error) {
		if paused[j.Tier] {
			return skipped, nil // an item keyed before its tier was (see store.ScanDue)
		}
		return r.outcome(r.requeue(ctx, j.ID, func(cur *job.Job) error {
			if cur.Waiting == "" || cur.RetryAt == nil || cur.RetryAt.After(now) {
				return errSkip
			}
			return cur.Unpark(now)
		}))
	})
	res.Unparked, res.Lost = st.Done, res.Lost+st.Lost
	res.add(st)
	if err != nil {
		return res, fmt.Errorf("releasing parked jobs: %w", err)
	}
	if res.Admitted, err = r.admitBacklogs(ctx, shards, paused, now); err != nil {
		return res, fmt.Errorf("admitting the owners' backlogs: %w", err)
	}
	return res, nil
}

// admitBacklogs takes jobs out of the owners' backlogs (those whose
// counters are in shards) into the queue, oldest first, as many as each
// owner has room for: store.Backlogs lists the owners, one Query each
// gives their oldest jobs, and each admission is conditional on the room
// (store.ErrQueueFull ends an owner's turn). A paused tier's backlogs stay.
func (r *Recoverer) admitBacklogs(ctx context.Context, shards []int, paused map[job.Tier]bool, now time.Time) (int, error) {
	owners, err := r.cfg.Store.Backlogs(ctx, shards)
	if err != nil {
		return 0, err
	}
	admitted := 0
	for _, d := range owners {
		if d.Backlog <= 0 {
			if err := r.cfg.Store.ClearBacklogMark(ctx, d); err != nil {
				r.cfg.Logger.WarnContext(ctx, "clearing an empty backlog's mark failed", "owner", d.Owner, "tier", d.Tier, "error", err)
			}
			continue
		}
		if paused[d.Tier] {
			continue
		}
		room := d.Backlog
		if bound := store.ShardBound(r.cfg.Store.QueueBound(d.Owner, d.Plan)); bound > 0 {
			room = min(room, bound-d.InQueue)
		}
		ids, err := r.cfg.Store.BacklogJobs(ctx, d, room)
		if err != nil {
			return admitted, err
		}
		for _, id := range ids {
			ok, err := r.requeue(ctx, id, func(cur *job.Job) error {
				if !cur.InBacklog() {
					return errSkip
				}
				return cur.Admit(now)
			})
			if errors.Is(err, store.ErrQueueFull) {
				break // its share is full again: its next turn
			}
			if err != nil {
				return admitted, err
			}
			if ok {
				admitted++
			}
		}
	}
	if admitted > 0 {
		r.cfg.Logger.InfoContext(ctx, "backlogs admitted", "jobs", admitted, "owners", len(owners))
	}
	return admitted, nil
}

// paused reads which tiers are paused, once per run.
func (r *Recoverer) paused(ctx context.Context) map[job.Tier]bool {
	out := map[job.Tier]bool{}
	if r.cfg.Paused == nil {
		return out
	}
	for _, t := range job.Tiers {
		if r.cfg.Paused(ctx, t) {
			out[t] = true
		}
	}
	return out
}

// running lists the tiers not in paused.
func running(paused map[job.Tier]bool) []job.Tier {
	out := []job.Tier{}
	for _, t := range job.Tiers {
		if !paused[t] {
			out = append(out, t)
		}
	}
	return out
}

// outcome turns requeue's answer into a sweep outcome.
func (r *Recoverer) outcome(ok bool, err error) (outcome, error) {
	switch {
	case err != nil:
		return lost, err
	case ok:
		return acted, nil
	}
	return lost, nil
}

// Run is the stuck-job recovery: queued jobs nobody received and running
// jobs whose worker went silent are sent again, or failed when their runs
// are spent. It works until nothing is due or the budget is spent.
func (r *Recoverer) Run(ctx context.Context) (Result, error) {
	var res Result
	now := r.cfg.Now()
	until := r.budget(ctx)
	stuckBefore := now.Add(-r.cfg.StuckAfter)
	// Queued jobs of a paused tier wait, which is not stuck: their
	// partitions are not read. Running jobs are stuck whatever the tier.
	paused := r.paused(ctx)
	scan := r.cfg.Store.ScanDue(stuckBefore, running(paused), job.Queued, job.Running)
	shards := newProgress(r.cfg.Store)
	st, err := sweep(ctx, r, SweepStuck, scan, scan.Jobs, until, r.cfg.Concurrency, func(ctx context.Context, j job.Job) (outcome, error) {
		if j.Status == job.Queued && paused[j.Tier] {
			return skipped, nil // an item keyed before its tier was (see store.ScanDue)
		}
		// (The sweep index does not carry whether the job is counted: an
		// uncounted job's shard is absent, which reads as standing still.)
		if j.Status == job.Queued && r.stuck(&j, stuckBefore, now) {
			d, err := shards.read(ctx, &j)
			if err != nil {
				return lost, err
			}
			if !mayBeLost(&j, d, r.cfg.StuckAfter, now) {
				// Nothing is written: the job stays due, so the next
				// run reads the shard again (an index entry and a
				// cached read; a write each time would cost more).
				return behind, nil
			}
		}
		failed := false
		ok, err := r.requeue(ctx, j.ID, func(cur *job.Job) error {
			if !r.stuck(cur, stuckBefore, now) {
				return errSkip
			}
			if cur.Status == job.Queued {
				// Not received for a while: a backlog, or a lost
				// message. Send it again — no attempt spent, since
				// waiting is not a run — and wait twice as long
				// before the next time.
				return cur.Resend(r.cfg.StuckAfter, now)
			}
			// A run whose worker went silent: its attempt was counted
			// at the claim. Fail it only when the runs are spent.
			if cur.Attempts >= cur.MaxAttempts {
				failed = true
				return cur.FailStuck(fmt.Sprintf("no progress for %s after %d attempts", r.cfg.StuckAfter, cur.Attempts), now)
			}
			return cur.Apply(job.Requeue, now)
		})
		if ok && failed {
			return failedStuck, err
		}
		return r.outcome(ok, err)
	})
	res.Orphans, res.Requeued, res.FailedStuck, res.Lost = st.Done+st.Failed+st.Lost, st.Done, st.Failed, st.Lost
	res.Behind = st.Behind
	res.add(st)
	if err != nil {
		return res, fmt.Errorf("recovering stuck jobs: %w", err)
	}
	r.cfg.Logger.InfoContext(ctx, "recovery run", "orphans", res.Orphans, "requeued", res.Requeued,
		"failed_stuck", res.FailedStuck, "behind", res.Behind, "lost_races", res.Lost, "left", res.Left)
	if res != (Result{}) { // an idle run costs only its queries
		if err := r.cfg.Store.RecordRecovery(ctx, store.RecoveryRun{At: now, Orphans: res.Orphans, Requeued: res.Requeued,
			FailedStuck: res.FailedStuck, Lost: res.Lost}); err != nil {
			r.cfg.Logger.WarnContext(ctx, "recording the recovery run failed", "error", err)
		}
	}
	return res, nil
}

// Retain is retention's sweeps over the sweep index's shards in shards
// (nil: every shard), invocations of their own so that they keep up with
// the rate the pipeline finishes jobs (the retention schedules split the
// shards among them: resources.RetainParts): the stale stage, then
// unreferenced media (after the stale stage, so media whose last job just
// went goes now, or in the next run when the upload's shard is another
// invocation's). Each works until nothing is due or its share of the
// budget is spent.
func (r *Recoverer) Retain(ctx context.Context, shards []int) (Result, error) {
	var res Result
	now := r.cfg.Now()
	until := r.budget(ctx)
	st, err := r.expire(ctx, now, shards, r.share(until, 2))
	res.Staled, res.Lost = st.Done, st.Lost
	res.add(st)
	if err != nil {
		return res, err
	}
	st, err = r.expireMedia(ctx, now, shards, until)
	res.MediaExpired = st.Done
	res.add(st)
	if err != nil {
		return res, err
	}
	r.cfg.Logger.InfoContext(ctx, "retention run", "shards", shards, "staled", res.Staled, "media_expired", res.MediaExpired,
		"lost_races", res.Lost, "left", res.Left)
	if res.Staled > 0 {
		if err := r.cfg.Store.RecordStaled(ctx, res.Staled); err != nil {
			r.cfg.Logger.WarnContext(ctx, "recording the retention run failed", "error", err)
		}
	}
	return res, nil
}

// stuck re-checks, on the fresh copy, that the job is still stuck. A
// running job is stuck once its heartbeat is old and its lease lapsed: a
// run holds the lease over each call it makes (publish.run.Hold), so a job
// is never taken from a run before its call could have ended.
func (r *Recoverer) stuck(j *job.Job, before, now time.Time) bool {
	switch j.Status {
	case job.Queued:
		if j.Waiting != "" {
			return false // parked: the release sweep's
		}
		for _, t := range []*time.Time{j.QueuedAt, j.RetryAt, j.StuckFrom} {
			if t != nil && t.After(before) {
				return false
			}
		}
		return j.QueuedAt != nil
	case job.Running:
		return (j.HeartbeatAt == nil || !j.HeartbeatAt.After(before)) && (j.LeaseUntil == nil || !j.LeaseUntil.After(now))
	}
	return false
}

// mayBeLost reports whether the message of j, a queued job not received
// since before StuckAfter, may be lost, d being the owner's counter shard
// that j is counted in. A message SendMessage took stays in the queue until
// it is received (or moved to the DLQ, which the DLQ's own path returns):
// what can be lost is a send that never happened (the process died, or
// SQS refused, between the job's write and its send). Recovery cannot look
// into the queue, so it reads the sign the shard keeps (store.Depth.Left):
// the owner's messages move when one of the shard's jobs left the queue
// after a run within StuckAfter, and j's is among them then — unless a job
// queued more than StuckAfter after j already ran, which a FIFO delivery
// of the owner's slots would not do while j's message were there. So a
// backlog older than StuckAfter that drains is left alone, and j is
// re-sent when its owner's messages stand still or went past it.
func mayBeLost(j *job.Job, d store.Depth, stuckAfter time.Duration, now time.Time) bool {
	if d.Left == nil || d.Left.Before(now.Add(-stuckAfter)) {
		return true
	}
	return j.QueuedAt == nil || d.LeftQueued != nil && d.LeftQueued.After(j.QueuedAt.Add(stuckAfter))
}

// progress reads, once per run, the counter shards the stuck sweep's
// queued jobs are counted in.
type progress struct {
	st   *store.Store
	mu   sync.Mutex
	seen map[string]store.Depth
}

func newProgress(st *store.Store) *progress {
	return &progress{st: st, seen: map[string]store.Depth{}}
}

// read returns the shard j is counted in.
func (p *progress) read(ctx context.Context, j *job.Job) (store.Depth, error) {
	key := store.JobDepthKey(j.Owner, j.Tier, j.ID)
	p.mu.Lock()
	d, ok := p.seen[key]
	p.mu.Unlock()
	if ok {
		return d, nil
	}
	d, err := p.st.JobDepth(ctx, j.Owner, j.Tier, j.ID)
	if err != nil {
		return store.Depth{}, fmt.Errorf("reading the queue depth of %s: %w", j.Owner, err)
	}
	p.mu.Lock()
	p.seen[key] = d
	p.mu.Unlock()
	return d, nil
}

var errSkip = errors.New("skip")

// requeue applies change to the job and, if the status is then queued,
// sends it with a fresh deduplication id. Only the writer that wins the
// conditional write sends. It reports whether this run made the change.
func (r *Recoverer) requeue(ctx context.Context, id string, change func(*job.Job) error) (bool, error) {
	j, err := r.cfg.Store.UpdateJob(ctx, id, func(j *job.Job) error {
		if err := change(j); err != nil {
			return err
		}
		if j.Status == job.Queued || j.Unsettled() {
			j.Enqueues++
		}
		return nil
	})
	var te *job.TransitionError
	switch {
	case errors.Is(err, errSkip), errors.Is(err, store.ErrNotFound), errors.As(err, &te):
		return false, nil
	case err != nil:
		return false, err
	}
	log := r.cfg.Logger.With("job_id", j.ID, "tier", j.Tier)
	// A stuck job's old message may still hold its slot (a worker that
	// died keeps it in flight until its visibility timeout): the resend,
	// a later send, goes to its owner's next slot (queue.Fairness).
	msg := queue.ForJob(j)
	if j.Status != job.Queued {
		log.WarnContext(ctx, "stuck job failed: attempts spent", "attempts", j.Attempts)
		if !j.Unsettled() {
			return true, nil
		}
		// Its last worker went silent after it may have reached the
		// external API: one more delivery asks the API what happened and
		// records it on the failed job's items (the worker's reconcile).
		if err := r.cfg.Sender.Send(ctx, j.Tier, msg); err != nil {
			log.ErrorContext(ctx, "sending the failed job for reconciliation failed; a retry by its owner asks the API", "error", err)
		}
		return true, nil
	}
	if j.InBacklog() {
		log.InfoContext(ctx, "job waits in its owner's backlog", "attempts", j.Attempts)
		return true, nil
	}
	if err := r.cfg.Sender.Send(ctx, j.Tier, msg); err != nil {
		// Still queued: the next run sends it.
		log.ErrorContext(ctx, "re-enqueue failed; the next run retries", "error", err)
		return true, nil
	}
	log.InfoContext(ctx, "job re-enqueued", "attempts", j.Attempts, "send", j.Enqueues)
	return true, nil
}

// expire moves finished jobs older than StaleAfter to stale, releases their
// references on their uploads (expireMedia deletes what no job needs any
// more) and sets their TTL to DeleteAfter after they finished. Each page's
// jobs are read whole in one request (WholeJobs), so staling a job costs
// its one transaction.
func (r *Recoverer) expire(ctx context.Context, now time.Time, shards []int, until time.Time) (SweepStats, error) {
	before := now.Add(-r.cfg.StaleAfter)
	scan := r.cfg.Store.ScanDue(before, nil, job.Succeeded, job.Failed, job.Cancelled).OnShards(shards)
	st, err := sweep(ctx, r, SweepStale, scan, scan.WholeJobs, until, r.cfg.Concurrency, func(ctx context.Context, j job.Job) (outcome, error) {
		_, err := r.cfg.Store.StaleJob(ctx, j, now, func(cur *job.Job) error {
			if cur.FinishedAt == nil || cur.FinishedAt.After(before) {
				return errSkip
			}
			if err := cur.Apply(job.Expire, now); err != nil {
				return err
			}
			cur.ExpiresAt = cur.FinishedAt.Add(r.cfg.DeleteAfter).Unix()
			return nil
		})
		var te *job.TransitionError
		switch {
		case errors.Is(err, errSkip), errors.Is(err, store.ErrNotFound), errors.As(err, &te):
			return lost, nil
		case err != nil:
			return lost, err
		}
		return acted, nil
	})
	if err != nil {
		return st, fmt.Errorf("staling finished jobs: %w", err)
	}
	return st, nil
}
