// Package worker is the run loop of every kind of job: it reads the job a
// queue message names, claims it, holds its lease (heartbeat, Hold) while
// the kind's Work runs within the invocation's budget, and records the
// outcome through the retry policy — retry later, snooze, fail, park in the
// table or hand back. It knows a job only through its kind (job.Kind):
// what a kind reads with its jobs (job.Loader), how long its next call
// lasts (job.Budgeter), how to settle a finished job's unknown outcomes
// (job.Reconciler), and its Work, which acts through job.Run.
package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/conveyor/conveyor/internal/fault"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/resources"
	"github.com/conveyor/conveyor/internal/retry"
	"github.com/conveyor/conveyor/internal/telemetry"
)

// AfterClaim is the loop's crash point: the job is claimed, nothing else
// done. Kinds name their own (job.Run.Crash).
const AfterClaim = "after-claim"

// ErrCrash is what a crash hook makes a run return; the run stops as if
// killed (job.ErrCrash).
var ErrCrash = job.ErrCrash

// Store keeps the jobs the loop runs (store.Store, on DynamoDB): declared
// here so that this package links no DynamoDB client.
type Store interface {
	// GetJob returns the job with id, or fault.ErrNotFound (also once it
	// expired).
	GetJob(ctx context.Context, id string) (job.Job, error)
	// DescribeItems fills each of j's items that does not describe its
	// upload yet from its upload record; an item whose record is gone
	// stays undescribed.
	DescribeItems(ctx context.Context, j *job.Job) error
	// ClaimJob saves a job just claimed (job.Claim) if its tier is not
	// paused at this moment: job.ErrPaused then, fault.ErrConflict when the
	// job changed meanwhile.
	ClaimJob(ctx context.Context, j *job.Job) error
	// SaveJob writes j if nobody changed it since it was read (its
	// Version), and advances j.Version; fault.ErrConflict when the race was
	// lost.
	SaveJob(ctx context.Context, j *job.Job) error
	// UpdateJob reads the job, applies fn and saves it, retrying on
	// conflicts; fn returns an error to abort without writing.
	UpdateJob(ctx context.Context, id string, fn func(*job.Job) error) (job.Job, error)
	// JobLease reads a job's status, lease and version with one strongly
	// consistent read (fault.ErrNotFound when there is none).
	JobLease(ctx context.Context, id string) (job.Lease, error)
}

// Config configures a Worker.
type Config struct {
	// Store is the table the jobs are read from and written to.
	Store Store
	// Policy decides retries (backoff, attempts, parking).
	Policy retry.Policy
	// Heartbeat is how often a running job's heartbeat is written (default
	// HeartbeatDefault); a claim holds three beats.
	Heartbeat time.Duration
	// Worker names this instance in leases (default a random id).
	Worker string
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Logger is where the runs log (default slog.Default()).
	Logger *slog.Logger
	// Crash, when set, is called at each crash point (AfterClaim, and the
	// kinds' through job.Run.Crash); a non-nil return aborts the run
	// without any further write (tests only; default none).
	Crash func(point string, j *job.Job) error
	// MaxReceives is the queues' maxReceiveCount (default
	// resources.DefaultMaxReceiveCount): a job that must wait parks in the
	// table before its message gets near the dead-letter queue.
	MaxReceives int
	// Kinds are the kinds of job the loop runs (default none). A job of a
	// kind not in it fails, permanently.
	Kinds *job.Registry
	// DeadlineMargin is what a run leaves of its invocation: the work runs
	// under the context's deadline less this margin, and a call that could
	// not end before then is not started (default DeadlineMarginDefault).
	DeadlineMargin time.Duration
	// InvocationTimeout is the longest an invocation lasts (the function's
	// timeout; default resources.ConsumerTimeout). A call that could not
	// end within a whole invocation is started anyway (bounded by the
	// invocation), since handing it back could never help.
	InvocationTimeout time.Duration
	// HandBack is how soon a job handed back for lack of time, or because
	// the run before still holds it, is delivered again (default
	// HandBackDefault).
	HandBack time.Duration
	// CancelNotice is the longest a cancel or a stop may go unnoticed by a
	// run's next call (default CancelNoticeDefault; negative: none, every
	// Hold reads the job). Hold lets a call go without a request when the
	// run saw its job running under its own lease less than this long ago
	// — through its own conditional write (the claim, a heartbeat, a
	// record) or a read — and that lease covers the call; otherwise it
	// reads the job first. The lease alone keeps other runs out (docs/
	// leases.md): what a read adds is noticing a cancel or stop sooner.
	CancelNotice time.Duration
}

// Config defaults.
const (
	// HeartbeatDefault is Config.Heartbeat's default.
	HeartbeatDefault = 30 * time.Second
	// DeadlineMarginDefault is Config.DeadlineMargin's default: time to
	// record what the last call did and answer the queue.
	DeadlineMarginDefault = 10 * time.Second
	// HandBackDefault is Config.HandBack's default.
	HandBackDefault = time.Second
	// CancelNoticeDefault is Config.CancelNotice's default: longer than a
	// one-item job's calls at the API's usual latency, so such a job
	// makes no read before its calls; far shorter than a heartbeat, so a
	// cancel during a long upload stops the publication after it.
	CancelNoticeDefault = 2 * time.Second
)

// Worker runs jobs of every kind in Config.Kinds: claim, lease and
// heartbeat, the kind's Work, and the outcome recorded through the retry
// policy.
type Worker struct{ cfg Config }

// New returns a Worker.
func New(cfg Config) *Worker {
	if cfg.Heartbeat == 0 {
		cfg.Heartbeat = HeartbeatDefault
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Worker == "" {
		cfg.Worker = fmt.Sprintf("w-%d", time.Now().UnixNano())
	}
	if cfg.MaxReceives == 0 {
		cfg.MaxReceives = resources.DefaultMaxReceiveCount
	}
	if cfg.DeadlineMargin == 0 {
		cfg.DeadlineMargin = DeadlineMarginDefault
	}
	if cfg.InvocationTimeout == 0 {
		cfg.InvocationTimeout = resources.ConsumerTimeout
	}
	if cfg.HandBack == 0 {
		cfg.HandBack = HandBackDefault
	}
	if cfg.CancelNotice == 0 {
		cfg.CancelNotice = CancelNoticeDefault
	}
	if cfg.Kinds == nil {
		cfg.Kinds = &job.Registry{}
	}
	return &Worker{cfg: cfg}
}

// Verdict tells the queue consumer what to do with the message.
type Verdict struct {
	// Done: delete the message (the job finished, or the message is moot).
	Done bool
	// RetryIn: leave the message and make it visible again after this long.
	RetryIn time.Duration
	// Readmit: the message waited in a group of its own and its job is
	// due: send it back to its owner's slot (queue.Readmit), then delete
	// it. The job is not run from outside its owner's slots.
	Readmit bool
	// Reason is for logs.
	Reason string
}

// readmit is the verdict on a due job's message that waits outside its
// owner's slots.
var readmit = Verdict{Readmit: true, Reason: "due: back to its owner's slot"}

// Delivery is one message for a job, as the queue handed it over.
type Delivery = job.Delivery

// leaseFor is how long a claim holds without a heartbeat.
func (p *Worker) leaseFor() time.Duration { return 3 * p.cfg.Heartbeat }

// budgetEnd is when the work of a run started under ctx must end: the
// invocation's deadline less the margin (zero: ctx has no deadline).
func (p *Worker) budgetEnd(ctx context.Context) time.Time {
	d, ok := ctx.Deadline()
	if !ok {
		return time.Time{}
	}
	return d.Add(-p.cfg.DeadlineMargin)
}

// outOfTime reports whether a call taking need cannot end before end (the
// run's budget, zero for none) and could in a fresh invocation: only then
// is handing it back of use.
func (p *Worker) outOfTime(end time.Time, need time.Duration) bool {
	return !end.IsZero() && time.Now().Add(need).After(end) && need <= p.cfg.InvocationTimeout-p.cfg.DeadlineMargin
}

// heldWait is how long a delivery for a job another run still holds waits:
// until the lease ends at the latest, sooner (HandBack to a heartbeat) as
// that run usually releases the job when its call returns.
func (p *Worker) heldWait(until, now time.Time, receives int) time.Duration {
	left := until.Sub(now)
	if receives+2 >= p.cfg.MaxReceives {
		return max(left, p.cfg.HandBack)
	}
	return min(max(left, p.cfg.HandBack), max(p.cfg.Heartbeat, p.cfg.HandBack))
}

// Run processes a delivery of job id once: claims the job, runs its kind's
// Work, and records the outcome. A job that must wait long (or whose
// message nears the DLQ) is parked in the table and its message let go. A
// run whose outcome could not be recorded gives the job back to the queue,
// claimable at once, and its message comes back after HandBack (after the
// run's lease, when not even that could be written). The error is non-nil
// only when the job could not be read or claimed, or the run crashed (a
// test's crash hook): the message must then come back.
//
// The run is a span in the delivery's trace (its job's), named for the
// job's type, with the verdict on it.
func (p *Worker) Run(ctx context.Context, d Delivery) (Verdict, error) {
	ctx, span := telemetry.Start(ctx, "run job", trace.SpanKindInternal, telemetry.AttrJobID.String(d.JobID),
		attribute.Int("conveyor.receives", d.Receives))
	v, err := p.runOnce(telemetry.WithJobID(ctx, d.JobID), d)
	span.SetAttributes(attribute.Bool("conveyor.done", v.Done), attribute.String("conveyor.verdict", v.Reason))
	telemetry.End(span, err)
	return v, err
}

// runOnce is Run's work, under its span.
func (p *Worker) runOnce(ctx context.Context, d Delivery) (Verdict, error) {
	id := d.JobID
	log := p.cfg.Logger.With("job_id", id, "worker", p.cfg.Worker)
	j, loaded, err := p.load(ctx, d)
	if errors.Is(err, fault.ErrNotFound) {
		log.WarnContext(ctx, "message for an unknown job dropped")
		return Verdict{Done: true, Reason: "unknown job"}, nil
	}
	if err != nil {
		return Verdict{}, err
	}
	span := trace.SpanFromContext(ctx)
	span.SetName("run " + j.Type)
	span.SetAttributes(attribute.String("conveyor.job.type", j.Type), attribute.String("conveyor.tier", string(j.Tier)))
	now := p.cfg.Now()
	if v, answered, err := p.notClaimable(ctx, log, j, d, now); answered {
		return v, err
	}
	if d.Waits {
		// Its wait is over, outside its owner's slots: the job runs from
		// one of them, counted in the owner's concurrency.
		return readmit, nil
	}
	if j.Attempts >= j.MaxAttempts && j.MaxAttempts > 0 {
		return p.failSpent(ctx, log, j, d)
	}
	end := p.budgetEnd(ctx)
	k, known := p.cfg.Kinds.Get(j.Type)
	if b, ok := k.(job.Budgeter); known && ok && p.outOfTime(end, b.NextCall(j)) {
		// Its next call would outlive the invocation: not started, handed
		// back at once, no attempt spent (nothing was claimed).
		if p.cfg.Policy.Park(p.cfg.HandBack, d.Receives, p.cfg.MaxReceives) {
			return p.park(ctx, log, id, "deadline", now)
		}
		return Verdict{RetryIn: p.cfg.HandBack, Reason: "not enough time left in this invocation"}, nil
	}
	tried, err := j.Claim(p.cfg.Worker, now.Add(p.leaseFor()), now)
	if err != nil {
		return Verdict{Done: true, Reason: err.Error()}, nil
	}
	switch err := p.cfg.Store.ClaimJob(ctx, &j); {
	case errors.Is(err, job.ErrPaused):
		// Paused before this claim: the job waits for the resume, in the
		// table; the release sweep sends it once the tier runs again.
		return p.park(ctx, log, id, "paused", now)
	case errors.Is(err, fault.ErrConflict):
		return Verdict{Done: true, Reason: "claimed by another worker"}, nil
	case err != nil:
		return Verdict{}, err
	}
	log = log.With("attempt", j.Attempts, "tier", j.Tier)
	span.SetAttributes(attribute.Int("conveyor.attempt", j.Attempts))
	log.InfoContext(ctx, "job started", "resumed", slices.Contains(tried, true))
	if err := p.crash(AfterClaim, &j); err != nil {
		return Verdict{}, err
	}

	r := &run{p: p, log: log, tried: tried, receives: d.Receives, end: end}
	if loaded.by == k {
		r.loaded = loaded.value
	}
	r.job = j
	r.seen = now // the claim's write, conditional on the version it read
	r.noteLease()
	err = r.withHeartbeat(ctx, func(workCtx context.Context) error {
		if known {
			return k.Work(workCtx, r)
		}
		return retry.Permanent(fmt.Errorf("no kind %q is registered with this worker", j.Type))
	})
	return r.outcome(ctx, err)
}

// notClaimable answers a delivery whose job is not to be claimed now: a
// parked job's leftover message, a job backing off (parked when its wait
// is long), one running elsewhere or still held by a run finishing its
// last call, or a finished one (settleFinished). answered is false when
// the job may be claimed.
func (p *Worker) notClaimable(ctx context.Context, log *slog.Logger, j job.Job, d Delivery, now time.Time) (v Verdict, answered bool, err error) {
	switch {
	case j.InBacklog():
		// A leftover message of a job in its owner's backlog: recovery
		// sends a fresh one when the job is admitted.
		return Verdict{Done: true, Reason: "waiting in its owner's backlog"}, true, nil
	case j.Status == job.Queued && j.Waiting != "" && j.RetryAt != nil && j.RetryAt.After(now):
		// A leftover message of a parked job: the release sweep sends a
		// fresh one when it is due.
		return Verdict{Done: true, Reason: "waiting in the table"}, true, nil
	case j.Status == job.Queued && j.RetryAt != nil && j.RetryAt.After(now):
		wait := j.RetryAt.Sub(now)
		if p.cfg.Policy.Park(wait, d.Receives, p.cfg.MaxReceives) {
			v, err := p.park(ctx, log, d.JobID, "not_due", *j.RetryAt)
			return v, true, err
		}
		return Verdict{RetryIn: wait, Reason: "backing off"}, true, nil
	case j.RunningUnderLease(now):
		return Verdict{Done: true, Reason: "running elsewhere"}, true, nil
	case j.Status != job.Queued && j.Status != job.Running:
		return p.settleFinished(ctx, j, d), true, nil
	}
	if until, held := j.HeldBy(p.cfg.Worker, now); held {
		// A cancelled or stopped run is finishing its last call: the
		// retry waits until it released the job or its lease ended,
		// spending nothing.
		return Verdict{RetryIn: p.heldWait(until, now, d.Receives), Reason: "the previous run still holds the job"}, true, nil
	}
	return Verdict{}, false, nil
}

// withHeartbeat runs work under the run's budget while the heartbeat keeps
// the job's lease, and returns work's error once the heartbeat stopped.
func (r *run) withHeartbeat(ctx context.Context, work func(context.Context) error) error {
	hbCtx, stopHB := context.WithCancel(ctx)
	// The work ends with the budget; what is left of the invocation
	// records the outcome.
	workCtx, cancelWork := context.WithCancel(ctx)
	if !r.end.IsZero() {
		workCtx, cancelWork = context.WithDeadline(ctx, r.end)
	}
	var hb sync.WaitGroup
	hb.Go(func() { r.heartbeat(hbCtx) })
	err := work(workCtx)
	stopHB()
	hb.Wait()
	cancelWork()
	return err
}

// outcome answers the queue for a run whose Work returned err: a crash
// aborts, a lost job is let go (unrecorded), a run out of time hands the
// job back, success is done, and a failure is settled (settleFailure).
func (r *run) outcome(ctx context.Context, err error) (Verdict, error) {
	if errors.Is(err, ErrCrash) {
		return Verdict{}, err
	}
	if errors.Is(err, errLostLease) {
		return r.unrecorded(ctx, err)
	}
	if errors.Is(err, job.ErrOutOfTime) {
		return r.handBack(ctx)
	}
	if err == nil {
		return Verdict{Done: true, Reason: "succeeded"}, nil
	}
	return r.settleFailure(ctx, err)
}

// loaded is what a kind's Loader read with a delivery's job, and that kind.
type loaded struct {
	by    job.Kind
	value any
}

// load reads the delivery's job with its items described. A delivery does
// not name its job's kind: when a kind of the registry is a job.Loader
// (the first by name), it reads the job, and what it reads beside it in
// the same request goes to the run when the job is of that kind.
func (p *Worker) load(ctx context.Context, d Delivery) (job.Job, loaded, error) {
	k, l := p.loader()
	if d.Preload != nil && l != nil {
		return d.Preload.Job, loaded{by: k, value: d.Preload.Loaded}, d.Preload.Err
	}
	if l != nil {
		j, v, err := l.Load(ctx, d)
		return j, loaded{by: k, value: v}, err
	}
	j, err := p.cfg.Store.GetJob(ctx, d.JobID)
	if err != nil {
		return j, loaded{}, err
	}
	return j, loaded{}, p.cfg.Store.DescribeItems(ctx, &j)
}

// loader is the registry's Loader (the first kind by name that is one)
// and its kind; nil when no kind is.
func (p *Worker) loader() (job.Kind, job.Loader) {
	for _, n := range p.cfg.Kinds.Names() {
		k, _ := p.cfg.Kinds.Get(n)
		if l, ok := k.(job.Loader); ok {
			return k, l
		}
	}
	return nil, nil
}

// Preload reads the jobs of deliveries whose runs are about to start side
// by side (the first message of each group of a batch) through the
// registry's Loader when it is a job.BatchLoader — one request for the
// batch instead of one per run — and returns the deliveries with what was
// read for each (Delivery.Preload), for Run. The read is as fresh as each
// run's own would be: made just before the runs start, and every claim is
// conditional on the version read. With no BatchLoader, or when the read
// fails, the deliveries come back unchanged and each run reads its own.
func (p *Worker) Preload(ctx context.Context, ds []Delivery) []Delivery {
	_, l := p.loader()
	bl, ok := l.(job.BatchLoader)
	if !ok || len(ds) < 2 {
		return ds
	}
	got, err := bl.LoadBatch(ctx, ds)
	if err != nil || len(got) != len(ds) {
		p.cfg.Logger.WarnContext(ctx, "reading a batch's jobs failed; each run reads its own", "jobs", len(ds), "error", err)
		return ds
	}
	out := slices.Clone(ds)
	for i := range out {
		out[i].Preload = &got[i]
	}
	return out
}

// release lets go of the job when r's run ends without recording an
// outcome, so that the next run may claim it at once instead of waiting
// for r's lease to lapse, with what r learnt of its calls and had not
// written yet (job.Run.Defer, a Record whose save failed):
//   - a job that stopped being r's (a cancel or a stop kept r's lease while
//     r finished its call) is released (job.Release);
//   - a job still running under r's lease, whose outcome r could not write
//     (the table failed, or the invocation's time ran out), goes back to
//     the queue (job.Abandon): requeued reports it, and the message must
//     then come back, the job has no other.
//
// Nothing is written when r no longer holds the job. ok reports that r
// does not hold it any more (let go now, or before); false, the write
// failed. The write does not end with ctx: it is what is left to do when
// ctx ended.
func (p *Worker) release(ctx context.Context, r *run) (requeued, ok bool) {
	r.mu.Lock()
	held := slices.Clone(r.unsaved)
	r.mu.Unlock()
	_, err := p.cfg.Store.UpdateJob(context.WithoutCancel(ctx), r.job.ID, func(j *job.Job) error {
		requeued = false
		if j.LeaseOwner != p.cfg.Worker {
			return errNothing
		}
		// Facts the run learnt and had not written yet go with the
		// release.
		for _, f := range held {
			f(j)
		}
		if j.Abandon(p.cfg.Worker, p.cfg.Now()) {
			requeued = true
			return nil
		}
		j.Release(p.cfg.Worker, p.cfg.Now())
		return nil
	})
	switch {
	case err == nil && requeued:
		return true, true
	case err == nil:
		r.log.InfoContext(ctx, "job released by the run it stopped being")
		return false, true
	case errors.Is(err, errNothing), errors.Is(err, fault.ErrNotFound):
		return false, true // not r's any more (taken over, requeued by recovery), or gone
	}
	r.log.WarnContext(ctx, "releasing the job failed; its lease lapses instead", "error", err)
	return false, false
}

// unrecorded answers the queue for a run that ends without recording its
// outcome: it lost the job (err is errLostLease), or the write of its
// outcome failed (err says why). The job is let go (release) and the
// message deleted, or, when the job went back to the queue, delivered
// again after HandBack. When not even that could be written (the table
// unreachable), r's lease is left to lapse and the message comes back
// only after it, to take the job over: a delivery before would find the
// job running under the lease, and be dropped.
func (r *run) unrecorded(ctx context.Context, err error) (Verdict, error) {
	requeued, ok := r.p.release(ctx, r)
	switch {
	case requeued:
		r.log.WarnContext(ctx, "the run's outcome could not be recorded; the job is back in the queue", "error", err)
		return Verdict{RetryIn: r.p.cfg.HandBack, Reason: "outcome not recorded; job requeued"}, nil
	case ok || errors.Is(err, errLostLease):
		return Verdict{Done: true, Reason: "job changed under the worker (cancelled or taken over)"}, nil
	}
	r.mu.Lock()
	until := r.leased
	r.mu.Unlock()
	wait := max(r.p.cfg.HandBack, until.Sub(r.p.cfg.Now())+r.p.cfg.Heartbeat)
	r.log.ErrorContext(ctx, "the run's outcome could not be recorded, nor the job let go; the next delivery takes it over once the lease lapsed",
		"error", err, "retry_in", wait.String())
	return Verdict{RetryIn: wait, Reason: "outcome not recorded; back once the lease lapsed"}, nil
}

// errNothing aborts an update that has nothing to write.
var errNothing = errors.New("nothing to write")

// handBack gives a claimed job back because the invocation has no time
// left for its next call: requeued at once, the attempt its claim counted
// undone (job.Snooze), and the message made visible again after HandBack
// (or parked when it nears the dead-letter queue).
func (r *run) handBack(ctx context.Context) (Verdict, error) {
	p := r.p
	now := p.cfg.Now()
	verdict := Verdict{RetryIn: p.cfg.HandBack, Reason: "handed back: not enough time left in this invocation"}
	err := r.save(ctx, func(j *job.Job) {
		_ = j.Snooze("deadline", now.Add(p.cfg.HandBack), now)
		j.Phase = "queued"
		if p.cfg.Policy.Park(p.cfg.HandBack, r.receives, p.cfg.MaxReceives) {
			_ = j.Park("deadline", now.Add(p.cfg.HandBack), now)
			verdict = Verdict{Done: true, Reason: verdict.Reason + "; parked"}
		}
	})
	if err != nil {
		if !errors.Is(err, errLostLease) {
			err = fmt.Errorf("handing job %s back: %w", r.job.ID, err)
		}
		return r.unrecorded(ctx, err)
	}
	r.log.InfoContext(ctx, "job handed back: its next call would outlive the invocation", "retry_in", p.cfg.HandBack.String())
	return verdict, nil
}

// failSpent fails a claimable job whose attempts are all spent: its last
// run stopped without recording an outcome (its worker died and its lease
// lapsed, so the message came back), and a claim would start an attempt
// beyond MaxAttempts. It fails `stuck` (retryable: the owner may retry it),
// as recovery fails a running job whose worker went silent once its runs
// are spent, and what that run may have done is then asked of the API
// (settleFinished).
func (p *Worker) failSpent(ctx context.Context, log *slog.Logger, j job.Job, d Delivery) (Verdict, error) {
	now := p.cfg.Now()
	got, err := p.cfg.Store.UpdateJob(ctx, j.ID, func(cur *job.Job) error {
		if cur.Attempts < cur.MaxAttempts || cur.Status != job.Queued && cur.Status != job.Running {
			return errNothing
		}
		if cur.RunningUnderLease(now) {
			return errNothing // taken over meanwhile
		}
		return cur.FailStuck(fmt.Sprintf("the last of %d attempts stopped without recording its outcome", cur.Attempts), now)
	})
	switch {
	case errors.Is(err, errNothing), errors.Is(err, fault.ErrNotFound), errors.Is(err, fault.ErrConflict):
		return Verdict{Done: true, Reason: "job changed meanwhile"}, nil
	case err != nil:
		return Verdict{}, err
	}
	log.WarnContext(ctx, "job failed: its attempts are spent and the last one stopped without recording its outcome", "attempts", got.Attempts)
	return p.settleFinished(ctx, got, d), nil
}

// settleFinished answers a message for a job that will not run again. If
// an earlier run may have reached the outside world without recording what
// happened, its kind (a job.Reconciler) asks first; when it cannot, the
// message comes back (short of the DLQ); past that the items keep "tried",
// so a retry by the owner asks again.
//
// While the job's last run still holds it (a cancel or a stop keeps the
// lease until that run has finished its call), the message waits: that run
// records what its call did and releases the job; what it could not learn
// is asked once it is gone.
func (p *Worker) settleFinished(ctx context.Context, j job.Job, d Delivery) Verdict {
	k, _ := p.cfg.Kinds.Get(j.Type)
	rec, ok := k.(job.Reconciler)
	if !ok || !j.Unsettled() {
		return Verdict{Done: true, Reason: "job is " + string(j.Status)}
	}
	now := p.cfg.Now()
	if until, held := j.HeldBy(p.cfg.Worker, now); held {
		return Verdict{RetryIn: p.heldWait(until, now, d.Receives), Reason: "the cancelled run still holds the job"}
	}
	if d.Waits {
		return readmit
	}
	if err := rec.Reconcile(ctx, j); err != nil && d.Receives+1 < p.cfg.MaxReceives {
		return Verdict{RetryIn: p.cfg.Policy.Backoff(max(d.Receives, 1)), Reason: "reconciling: " + err.Error()}
	}
	return Verdict{Done: true, Reason: "job is " + string(j.Status)}
}

// park moves a queued job to wait in the table until until (job.Park) and
// lets its message go. If the job changed meanwhile, the message is moot
// or another delivery handles it.
func (p *Worker) park(ctx context.Context, log *slog.Logger, id, reason string, until time.Time) (Verdict, error) {
	_, err := p.cfg.Store.UpdateJob(ctx, id, func(j *job.Job) error {
		return j.Park(reason, until, p.cfg.Now())
	})
	var te *job.TransitionError
	switch {
	case errors.As(err, &te), errors.Is(err, fault.ErrNotFound):
		return Verdict{Done: true, Reason: "job changed meanwhile"}, nil
	case err != nil:
		return Verdict{}, err
	}
	log.InfoContext(ctx, "job parked until it is due", "reason", reason, "until", until)
	return Verdict{Done: true, Reason: "parked: " + reason}, nil
}

func (p *Worker) crash(point string, j *job.Job) error {
	if p.cfg.Crash == nil {
		return nil
	}
	if err := p.cfg.Crash(point, j); err != nil {
		return fmt.Errorf("%w at %s: %v", ErrCrash, point, err)
	}
	return nil
}

// errLostLease is job.ErrLostJob: Hold and save return it once the job
// stopped being the run's.
var errLostLease = job.ErrLostJob

// settleFailure decides what a failed attempt means and records it:
// snooze (circuit open, or the OAuth client not set yet: no attempt
// spent, the error's code the reason it waits), retry later, or fail.
func (r *run) settleFailure(ctx context.Context, err error) (Verdict, error) {
	p := r.p
	now := p.cfg.Now()
	j := r.snapshot()
	d := p.cfg.Policy.Decide(err, j.Attempts, now)
	phase, item := "", -1
	var se *job.StepError
	if errors.As(err, &se) {
		phase, item = se.Phase, se.Item
	}
	msg := err.Error()
	code := errorCode(err, d.Class)
	log := r.log.With("phase", phase, "error", msg, "class", d.Reason)
	f := failure{err: err, d: d, phase: phase, item: item, msg: msg, code: code, now: now}
	var verdict Verdict
	saveErr := r.save(ctx, func(j *job.Job) {
		e := &job.Error{Code: code, Message: msg, Retryable: d.Class != retry.ClassPermanent}
		at := now.Add(d.Delay)
		switch {
		case d.Class == retry.ClassSnooze:
			verdict = f.snooze(j, e, at)
		case d.Retry:
			verdict = f.retry(j, e, at)
		default:
			verdict = f.fail(j, e)
		}
		if !verdict.Done && p.cfg.Policy.Park(d.Delay, r.receives, p.cfg.MaxReceives) {
			_ = j.Park(f.parkReason(), at, now)
			verdict = Verdict{Done: true, Reason: verdict.Reason + "; parked until due"}
		}
	})
	if saveErr != nil {
		// Cancelled or stopped meanwhile (errLostLease), or the failure
		// could not be written: what the failed call did is unknown, and
		// the job's items stay tried for whoever comes next (the cancel's
		// delivery, or the next run, asks once the job is let go).
		if !errors.Is(saveErr, errLostLease) {
			saveErr = fmt.Errorf("recording the failure of job %s: %w", j.ID, saveErr)
		}
		return r.unrecorded(ctx, saveErr)
	}
	// A wait (circuit open, 429, a secret not set yet) is not a failure:
	// it is logged at INFO, parked or not; only a spent attempt warns.
	switch {
	case d.Class == retry.ClassSnooze || (d.Retry && !d.Spent):
		log.InfoContext(ctx, "job waits: "+verdict.Reason, "retry_in", d.Delay.String(), "code", code, "parked", verdict.Done)
	case d.Retry:
		log.WarnContext(ctx, "job will retry", "retry_in", d.Delay.String(), "parked", verdict.Done)
	default:
		log.WarnContext(ctx, "job failed")
	}
	return verdict, nil
}

// failure is a failed attempt as settleFailure records it: the error, the
// policy's decision, the phase and item it names (item -1: none), its
// message and code, and when it is recorded.
type failure struct {
	err       error
	d         retry.Decision
	phase     string
	item      int
	msg, code string
	now       time.Time
}

// snooze makes j wait until at, spending no attempt, and notes why on its
// phase; the verdict brings the message back after the delay.
func (f failure) snooze(j *job.Job, e *job.Error, at time.Time) Verdict {
	// The reason it waits is the error's code: circuit_open, or
	// what else was not ready (secretref.CodeOAuthClientNotSet).
	_ = j.Snooze(f.code, at, f.now)
	note := "circuit open; waiting"
	if f.code != job.WaitCircuitOpen {
		note, j.Error = "waiting: "+f.msg, e
	}
	j.Wait.Detail, j.Wait.Breaker = f.msg, breakerKey(f.err)
	if f.phase != "" {
		if i := j.PhaseIndex(f.phase); i >= 0 {
			j.Phases[i].Message = note
		}
	}
	return Verdict{RetryIn: f.d.Delay, Reason: strings.ReplaceAll(f.code, "_", " ")}
}

// retry sets j to try again at at, its failed phase pending again: an
// attempt spent (job.RetryLater), or for a 429 a wait that spends none.
func (f failure) retry(j *job.Job, e *job.Error, at time.Time) Verdict {
	j.FailPhase(f.phase, e)
	if f.phase != "" {
		if i := j.PhaseIndex(f.phase); i >= 0 {
			j.Phases[i].Status = job.PhasePending
		}
	}
	if f.d.Spent {
		_ = j.RetryLater(e, at, f.now)
	} else {
		_ = j.Snooze(job.WaitRateLimited, at, f.now)
		j.Error, j.Phase = e, "retrying"
		j.Wait.Detail, j.Wait.Breaker = rateLimitDetail(f.err, f.msg), breakerKey(f.err)
	}
	verdict := Verdict{RetryIn: f.d.Delay, Reason: "temporary error"}
	if !f.d.Spent {
		verdict.Reason = "rate limited"
	}
	return verdict
}

// fail fails j with e, and the phase and item the error names
// (attempts_exhausted when the attempts ran out).
func (f failure) fail(j *job.Job, e *job.Error) Verdict {
	if f.d.Exhausted {
		e.Code, e.Message = "attempts_exhausted", fmt.Sprintf("gave up after %d attempts: %s", j.Attempts, f.msg)
	}
	j.FailPhase(f.phase, e)
	if f.item >= 0 && f.item < len(j.Items) {
		j.Items[f.item].Status, j.Items[f.item].Error = job.ItemFailed, e
	}
	j.Error = e
	_ = j.Apply(job.Fail, f.now)
	return Verdict{Done: true, Reason: "failed"}
}

// parkReason is why a job that waits parks in the table: its snooze's
// code, rate_limited for a 429, else backoff.
func (f failure) parkReason() string {
	reason := "backoff"
	if f.d.Class == retry.ClassSnooze {
		reason = f.code
	} else if !f.d.Spent {
		reason = "rate_limited"
	}
	return reason
}

// breakerKey is the key of the circuit breaker that refused or flagged
// the call err reports ("" if none).
func breakerKey(err error) string {
	var k interface{ BreakerKey() string }
	if errors.As(err, &k) {
		return k.BreakerKey()
	}
	return ""
}

// rateLimitDetail explains a 429 wait, with the Retry-After the API sent
// (the answer's own, not the longer wait a circuit it opened may ask for).
func rateLimitDetail(err error, msg string) string {
	var ra interface {
		StatusCode() int
		RetryAfter() time.Duration
	}
	if errors.As(err, &ra) && ra.RetryAfter() > 0 {
		return fmt.Sprintf("the API answered 429 with Retry-After %s: %s", ra.RetryAfter(), msg)
	}
	return "the API answered 429: " + msg
}

// errorCode is the code a failed attempt reports: the one the error names
// (JobErrorCode: a kind's own code, or a dependency's) when it names
// one, else its class's.
func errorCode(err error, c retry.Class) string {
	var coded interface{ JobErrorCode() string }
	if errors.As(err, &coded) && coded.JobErrorCode() != "" {
		return coded.JobErrorCode()
	}
	switch c {
	case retry.ClassPermanent:
		return "permanent_error"
	case retry.ClassSnooze:
		return "circuit_open"
	default:
		return "temporary_error"
	}
}
