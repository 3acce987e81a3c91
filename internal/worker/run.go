package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/conveyor/conveyor/internal/fault"
	"github.com/conveyor/conveyor/internal/job"
)

// run is one attempt at one job: the job.Run its kind's Work acts
// through.
type run struct {
	p   *Worker
	log *slog.Logger
	// tried says, per item, whether an earlier run may have reached the
	// outside world for it (job.Claim): only then are lookups needed.
	tried []bool
	// receives is the delivery's receive count (see Policy.Park).
	receives int
	// loaded is what the job's kind read with it (job.Loader), or nil.
	loaded any
	mu     sync.Mutex // guards job against the heartbeat
	job    job.Job
	// end is when the run's work must end (the invocation's deadline less
	// the margin; zero: no deadline).
	end time.Time
	// lost is set once the run learnt that the job stopped being its own:
	// no call is made after that (Hold).
	lost bool
	// unsaved are facts about the outside world (what a call did for an
	// item) already applied to job but not yet written (Defer): the next
	// write carries them. save re-applies them when a conflict makes it
	// re-read the job, and Record's fallback writes them too (a Record
	// whose save failed adds its facts here), and so does a release.
	unsaved []func(*job.Job)
	// leased is the latest end of the job's lease this run has read or
	// tried to write (a write that failed may have landed): until then,
	// a delivery finds the job running elsewhere.
	leased time.Time
	// seen is when the run last saw the job running under its own lease,
	// with the lease job.LeaseUntil says: the moment it sent the last
	// conditional write of its own that succeeded (the claim, a heartbeat,
	// a save) or a read that found it so. Hold asks the table again only
	// once seen is CancelNotice old.
	seen time.Time
}

func (r *run) Job() job.Job         { return r.snapshot() }
func (r *run) Logger() *slog.Logger { return r.log }
func (r *run) Now() time.Time       { return r.p.cfg.Now() }
func (r *run) Tried(i int) bool     { return i >= 0 && i < len(r.tried) && r.tried[i] }
func (r *run) Loaded() any          { return r.loaded }
func (r *run) Save(ctx context.Context, mutate func(*job.Job)) error {
	return r.save(ctx, mutate)
}

// Crash calls the crash hook at point, with the job as the run holds it
// (job.Run).
func (r *run) Crash(point string) error {
	j := r.snapshot()
	return r.p.crash(point, &j)
}

// Defer applies facts and mutate to the job as the run holds it, written
// by the next save; facts are also carried by a release or a Record's
// fallback (job.Run).
func (r *run) Defer(facts, mutate func(*job.Job)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if facts != nil {
		facts(&r.job)
		r.unsaved = append(r.unsaved, facts)
	}
	if mutate != nil {
		mutate(&r.job)
	}
}

// Hold checks, before a call with a side effect, that the run still holds
// the job for at least need (job.Run): the invocation's time left, then
// the job's lease, which must cover the call and a heartbeat's slack for the
// clocks of other workers. Once the job is lost it answers so without
// asking the table again.
//
// No request is made when the run saw its job running under its own lease
// less than CancelNotice ago (its claim, heartbeat or last save: each a
// write conditional on the job's version) and that lease covers the call:
// no other run can take the job before the lease ends, and a cancel or a
// stop since is at most CancelNotice old. Otherwise, when the lease must be
// extended for the call, the extending write — conditional on the version —
// is the check; else one strongly consistent, projected read of the job is.
//
// The job is lost when it stopped running or another worker holds it. A
// lease of this run's own that lapsed (its heartbeat late on a slow table)
// with the job still running under this worker is not lost: nobody took
// the job, since taking it is a write on its version, and the extending
// write, conditional on that version, takes the lease back or finds who did.
func (r *run) Hold(ctx context.Context, need time.Duration) error {
	r.mu.Lock()
	lost, seen, until := r.lost, r.seen, r.job.LeaseUntil
	r.mu.Unlock()
	if lost {
		return errLostLease
	}
	if r.p.outOfTime(r.end, need) {
		return job.ErrOutOfTime
	}
	now := r.p.cfg.Now()
	slack := r.p.cfg.Heartbeat
	covers := func(until *time.Time) bool { return until != nil && !until.Before(now.Add(need+slack)) }
	if covers(until) && now.Sub(seen) < r.p.cfg.CancelNotice {
		return nil
	}
	if covers(until) {
		l, err := r.p.cfg.Store.JobLease(ctx, r.job.ID)
		if err != nil {
			return fmt.Errorf("checking the job's lease: %w", err)
		}
		if l.Status != job.Running || l.Owner != r.p.cfg.Worker {
			r.mu.Lock()
			r.lost = true
			r.mu.Unlock()
			r.log.WarnContext(ctx, "the job stopped being this run's; no further call", "status", l.Status, "lease_owner", l.Owner)
			return errLostLease
		}
		if covers(l.Until) {
			r.mu.Lock()
			r.seen = now
			r.mu.Unlock()
			return nil
		}
	}
	if until == nil || !until.After(now) {
		r.log.WarnContext(ctx, "the run's own lease lapsed with nobody taking the job; taking it back", "lease_until", until)
	}
	return r.save(ctx, func(j *job.Job) {
		until := now.Add(max(r.p.leaseFor(), need+slack)).UTC()
		if j.LeaseUntil == nil || j.LeaseUntil.Before(until) {
			j.LeaseUntil = &until
		}
	})
}

// Record persists facts about the outside world (what an external call
// did for an item) together with this run's mutate (job.Run). If that
// save fails — the job stopped being this run's meanwhile (cancelled,
// stopped, taken over: errLostLease), or the store failed — the facts are
// still written on the job as it is now, so a publication that happened is
// never dropped; the save's error is returned.
func (r *run) Record(ctx context.Context, facts, mutate func(*job.Job)) error {
	err := r.save(ctx, func(j *job.Job) { facts(j); mutate(j) })
	if err == nil {
		return nil
	}
	// The failed save left the job as last saved: the facts stay on it,
	// unsaved, for whatever the run writes next (the failure, a release).
	r.mu.Lock()
	facts(&r.job)
	r.unsaved = append(r.unsaved, facts)
	held := slices.Clone(r.unsaved)
	r.mu.Unlock()
	_, uerr := r.p.cfg.Store.UpdateJob(context.WithoutCancel(ctx), r.job.ID, func(j *job.Job) error {
		for _, f := range held {
			f(j)
		}
		if errors.Is(err, errLostLease) {
			// What the run's last call did is recorded: the job may go.
			j.Release(r.p.cfg.Worker, r.p.cfg.Now())
		}
		return nil
	})
	if uerr != nil {
		r.log.ErrorContext(ctx, "recording what the outside world did on a job that changed meanwhile failed", "error", uerr)
	}
	return err
}

// save persists the in-memory job. On a version conflict (the heartbeat or
// a user wrote meanwhile) it re-reads: if the job is still ours and
// running, mutate is applied again to the fresh copy and saved. When it
// fails, the in-memory job is left as it was before (as last saved, with
// the unsaved facts): what comes next — the failure's record, a release —
// starts from what the table holds, not from a change that was not
// written (a success whose write failed is not a success).
func (r *run) save(ctx context.Context, mutate func(*job.Job)) (err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	before := cloneJob(r.job)
	defer func() {
		if err != nil {
			r.job = before
		}
	}()
	mutate(&r.job)
	r.noteLease()
	r.job.UpdatedAt = r.p.cfg.Now().UTC()
	for range 5 {
		sent := r.p.cfg.Now()
		err := r.p.cfg.Store.SaveJob(ctx, &r.job)
		if err == nil {
			r.unsaved = nil
			if r.job.Status == job.Running && r.job.LeaseOwner == r.p.cfg.Worker {
				r.seen = sent
			}
		}
		if !errors.Is(err, fault.ErrConflict) {
			return err
		}
		fresh, err := r.p.cfg.Store.GetJob(ctx, r.job.ID)
		if err != nil {
			return err
		}
		if fresh.Status != job.Running || fresh.LeaseOwner != r.p.cfg.Worker {
			r.lost = true
			return errLostLease
		}
		r.job = fresh
		r.noteLease()
		for _, f := range r.unsaved {
			f(&r.job)
		}
		mutate(&r.job)
		r.noteLease()
		r.job.UpdatedAt = r.p.cfg.Now().UTC()
	}
	return fmt.Errorf("saving job %s: %w", r.job.ID, fault.ErrConflict)
}

// cloneJob returns a copy of j that shares nothing a mutation writes
// through (slices' elements, the wait and the error).
func cloneJob(j job.Job) job.Job {
	j.Phases, j.Items, j.Pending, j.MediaRefs = slices.Clone(j.Phases), slices.Clone(j.Items), slices.Clone(j.Pending), slices.Clone(j.MediaRefs)
	if j.Wait != nil {
		w := *j.Wait
		j.Wait = &w
	}
	if j.Error != nil {
		e := *j.Error
		j.Error = &e
	}
	return j
}

// noteLease keeps the job's lease end in leased when it is the latest
// yet; the caller holds mu (or the run is not shared yet).
func (r *run) noteLease() {
	if u := r.job.LeaseUntil; u != nil && u.After(r.leased) {
		r.leased = *u
	}
}

// snapshot returns a copy of the job for reading outside the lock.
func (r *run) snapshot() job.Job {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.job
}

// heartbeat refreshes the job's heartbeat and lease until ctx ends; if the
// job stops being ours (cancelled, taken over), it stops, and Hold refuses
// every further call. A call in flight is not cut: its outcome would be
// unknown, and the lease a cancel keeps covers it until it returns.
func (r *run) heartbeat(ctx context.Context) {
	t := time.NewTicker(r.p.cfg.Heartbeat)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			err := r.save(ctx, func(j *job.Job) {
				now := r.p.cfg.Now().UTC()
				until := now.Add(r.p.leaseFor())
				if j.LeaseUntil != nil && j.LeaseUntil.After(until) {
					until = *j.LeaseUntil // extended for a long call (Hold)
				}
				j.HeartbeatAt, j.LeaseUntil = &now, &until
			})
			if errors.Is(err, errLostLease) {
				r.log.WarnContext(ctx, "job changed under the worker; no further call")
				return
			}
			if err != nil && ctx.Err() == nil {
				r.log.WarnContext(ctx, "heartbeat failed", "error", err)
			}
		}
	}
}
