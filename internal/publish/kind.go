package publish

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/kind"
	"github.com/conveyor/conveyor/internal/publishjob"
)

// The publish kind's vocabulary is its front's (internal/publishjob), named
// here too for the run loop and its tests.

// Type is the publish kind's name (publishjob.Type).
const Type = publishjob.Type

// The phases of a publish job, in order (publishjob).
const (
	PhaseToken    = publishjob.PhaseToken
	PhaseDownload = publishjob.PhaseDownload
	PhaseUpload   = publishjob.PhaseUpload
	PhasePublish  = publishjob.PhasePublish
)

// Phases lists the phases of a publish job in order.
var Phases = publishjob.Phases

// Params are a publish job's params (publishjob.Params).
type Params = publishjob.Params

// Kind returns the publish kind, run by p: its front (publishjob, reading
// p's table for the account of p's provider) and its Work.
func (p *Publisher) Kind() kind.Kind {
	cfg := publishjob.Config{Provider: p.cfg.Provider}
	if p.cfg.Store != nil {
		cfg.Store = p.cfg.Store
	}
	return publishKind{Front: publishjob.New(cfg), p: p}
}

// publishKind is the publish front with the publisher's phases as its Work.
type publishKind struct {
	*publishjob.Front
	p *Publisher
}

// Work runs the publish phases. The attempt is always the publisher's own
// run (the publish kind needs its token and its facts-recording writes).
func (k publishKind) Work(ctx context.Context, a kind.Attempt) error {
	r, ok := a.(*run)
	if !ok {
		return errors.New("the publish kind runs only in the publisher's run loop")
	}
	return r.phases(ctx)
}

// NextCall is the deadline of the job's next call to the external API:
// the first unfinished item's upload, or its publication (kind.Budgeter).
func (k publishKind) NextCall(j job.Job) time.Duration {
	for _, it := range j.Items {
		switch it.Status {
		case job.ItemPending:
			return k.p.callTimeout(it.Size)
		case job.ItemUploaded:
			return k.p.callTimeout(0)
		}
	}
	return 0
}

// Reconcile asks the API what became of a finished job's items a run
// marked tried and records it on them (kind.Reconciler).
func (k publishKind) Reconcile(ctx context.Context, j job.Job) error {
	return k.p.reconcile(ctx, k.p.cfg.Logger.With("job_id", j.ID, "worker", k.p.cfg.Worker), j)
}

// The run is the kind.Attempt of every kind's Work.

func (r *run) Job() job.Job         { return r.snapshot() }
func (r *run) Logger() *slog.Logger { return r.log }
func (r *run) Now() time.Time       { return r.p.cfg.Now() }
func (r *run) Tried(i int) bool     { return i >= 0 && i < len(r.tried) && r.tried[i] }
func (r *run) Save(ctx context.Context, mutate func(*job.Job)) error {
	return r.save(ctx, mutate)
}

// Hold checks, before a call with a side effect, that the run still holds
// the job for at least need (kind.Attempt): the invocation's time left, then
// the job's lease with one strongly consistent read of it, extended by a
// conditional write when it would lapse before the call could end (plus a
// heartbeat's slack for the clocks of other workers). Once the job is lost
// it answers so without asking the table again.
//
// The job is lost when it stopped running or another worker holds it. A
// lease of this run's own that lapsed (its heartbeat late on a slow table)
// with the job still running under this worker is not lost: nobody took
// the job, since taking it is a write on its version, and the extending
// write, conditional on that version, takes the lease back or finds who did.
func (r *run) Hold(ctx context.Context, need time.Duration) error {
	r.mu.Lock()
	lost := r.lost
	r.mu.Unlock()
	if lost {
		return errLostLease
	}
	if r.p.outOfTime(r.end, need) {
		return kind.ErrOutOfTime
	}
	l, err := r.p.cfg.Store.JobLease(ctx, r.job.ID)
	if err != nil {
		return fmt.Errorf("checking the job's lease: %w", err)
	}
	now := r.p.cfg.Now()
	if l.Status != job.Running || l.Owner != r.p.cfg.Worker {
		r.mu.Lock()
		r.lost = true
		r.mu.Unlock()
		r.log.WarnContext(ctx, "the job stopped being this run's; no further call", "status", l.Status, "lease_owner", l.Owner)
		return errLostLease
	}
	slack := r.p.cfg.Heartbeat
	if l.Until != nil && !l.Until.Before(now.Add(need+slack)) {
		return nil
	}
	if !l.HeldBy(r.p.cfg.Worker, now) {
		r.log.WarnContext(ctx, "the run's own lease lapsed with nobody taking the job; taking it back", "lease_until", l.Until)
	}
	return r.save(ctx, func(j *job.Job) {
		until := now.Add(max(r.p.leaseFor(), need+slack)).UTC()
		if j.LeaseUntil == nil || j.LeaseUntil.Before(until) {
			j.LeaseUntil = &until
		}
	})
}
