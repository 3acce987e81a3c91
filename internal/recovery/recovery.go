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
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/queue"
	"github.com/conveyor/conveyor/internal/store"
)

// Defaults.
const (
	// BatchDefault bounds how many jobs of one kind one run handles.
	BatchDefault = 500
)

// Sender puts a job's message on its tier's queue.
type Sender interface {
	Send(ctx context.Context, tier job.Tier, m queue.Message) error
}

// Config configures a Recoverer.
type Config struct {
	Store  *store.Store
	Sender Sender
	// S3 and Bucket: the stale stage removes a job's uploaded objects.
	S3     *s3.Client
	Bucket string
	// StuckAfter: a queued job not received, or a running job without a
	// heartbeat, for this long is stuck (default 20m).
	StuckAfter time.Duration
	// StaleAfter / DeleteAfter are the retention stages (default 168h / 720h).
	StaleAfter, DeleteAfter time.Duration
	// Paused reports whether a tier is paused; its queued jobs are not stuck.
	Paused func(ctx context.Context, tier job.Tier) bool
	// Batch bounds each kind of work per run (default BatchDefault).
	Batch int
	// Now defaults to time.Now.
	Now func() time.Time
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// Recoverer runs the sweeps.
type Recoverer struct{ cfg Config }

// New returns a Recoverer.
func New(cfg Config) *Recoverer {
	if cfg.Batch == 0 {
		cfg.Batch = BatchDefault
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
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
	// Staled finished jobs (first retention stage).
	Staled int
	// Unparked jobs whose wait in the table was over, sent again.
	Unparked int
	// MediaExpired uploads that no job may still need: marked expired and
	// their objects deleted.
	MediaExpired int
	// Lost races with another run or a worker (nothing done, correctly).
	Lost int
}

// ReleaseScheduled moves due scheduled jobs to the queue; it runs every
// minute so that a job starts within a minute after its time, never before.
func (r *Recoverer) ReleaseScheduled(ctx context.Context) (Result, error) {
	var res Result
	now := r.cfg.Now()
	due, err := r.cfg.Store.Due(ctx, job.Scheduled, now, r.cfg.Batch)
	if err != nil {
		return res, err
	}
	for _, j := range due {
		if j.ScheduleAt != nil && j.ScheduleAt.After(now) {
			continue
		}
		ok, err := r.requeue(ctx, j.ID, false, func(j *job.Job) error {
			if j.Status != job.Scheduled {
				return errSkip
			}
			return j.Apply(job.Release, now)
		})
		switch {
		case err != nil:
			return res, err
		case ok:
			res.Released++
		default:
			res.Lost++
		}
	}
	// Jobs parked in the table (job.Park) whose wait is over go back to
	// the queue; a paused tier's stay until it is resumed.
	waiting, err := r.cfg.Store.Due(ctx, store.Waiting, now, r.cfg.Batch)
	if err != nil {
		return res, fmt.Errorf("error fetching waiting jobs: %w", err)
	}
	for _, j := range waiting {
		if r.cfg.Paused != nil && r.cfg.Paused(ctx, j.Tier) {
			continue
		}
		ok, err := r.requeue(ctx, j.ID, false, func(cur *job.Job) error {
			if cur.Waiting == "" || cur.RetryAt == nil || cur.RetryAt.After(now) {
				return errSkip
			}
			return cur.Unpark(now)
		})
		switch {
		case err != nil:
			return res, err
		case ok:
			res.Unparked++
		default:
			res.Lost++
		}
	}
	return res, nil
}

// Run is the stuck-job recovery and retention sweep.
func (r *Recoverer) Run(ctx context.Context) (Result, error) {
	var res Result
	now := r.cfg.Now()
	stuckBefore := now.Add(-r.cfg.StuckAfter)
	for _, st := range []job.Status{job.Queued, job.Running} {
		due, err := r.cfg.Store.Due(ctx, st, stuckBefore, r.cfg.Batch)
		if err != nil {
			return res, fmt.Errorf("error fetching stuck jobs: %w", err)
		}
		for _, j := range due {
			if st == job.Queued && r.cfg.Paused != nil && r.cfg.Paused(ctx, j.Tier) {
				continue // waiting in a paused tier is not stuck
			}
			res.Orphans++
			failed := false
			ok, err := r.requeue(ctx, j.ID, true, func(cur *job.Job) error {
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
					cur.Error = &job.Error{Code: "stuck", Message: fmt.Sprintf("no progress for %s after %d attempts", r.cfg.StuckAfter, cur.Attempts), Retryable: true}
					return cur.Apply(job.Fail, now)
				}
				return cur.Apply(job.Requeue, now)
			})
			switch {
			case err != nil:
				return res, err
			case !ok:
				res.Lost++
			case failed:
				res.FailedStuck++
			default:
				res.Requeued++
			}
		}
	}
	staled, lost, err := r.expire(ctx, now)
	res.Staled, res.Lost = staled, res.Lost+lost
	if err != nil {
		return res, err
	}
	// After the stale stage, so media whose last job just went goes now.
	res.MediaExpired, err = r.expireMedia(ctx, now)
	if err != nil {
		return res, err
	}
	r.cfg.Logger.InfoContext(ctx, "recovery run", "orphans", res.Orphans, "requeued", res.Requeued,
		"failed_stuck", res.FailedStuck, "staled", res.Staled, "media_expired", res.MediaExpired, "lost_races", res.Lost)
	if res != (Result{}) { // an idle run costs only its queries
		if err := r.cfg.Store.RecordRecovery(ctx, store.RecoveryRun{At: now, Orphans: res.Orphans, Requeued: res.Requeued,
			FailedStuck: res.FailedStuck, Staled: res.Staled, Lost: res.Lost}); err != nil {
			r.cfg.Logger.WarnContext(ctx, "recording the recovery run failed", "error", err)
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

var errSkip = errors.New("skip")

// requeue applies change to the job and, if the status is then queued,
// sends it with a fresh deduplication id. Only the writer that wins the
// conditional write sends. It reports whether this run made the change.
func (r *Recoverer) requeue(ctx context.Context, id string, alone bool, change func(*job.Job) error) (bool, error) {
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
	msg := queue.ForJob(j)
	if alone {
		// A stuck job's old message may still hold its owner's slot (a
		// worker that died keeps it in flight until its visibility
		// timeout): the resend goes to a group of its own.
		msg = msg.Alone()
	}
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
// more) and sets their TTL to DeleteAfter after they finished.
func (r *Recoverer) expire(ctx context.Context, now time.Time) (staled, lost int, err error) {
	before := now.Add(-r.cfg.StaleAfter)
	for _, st := range []job.Status{job.Succeeded, job.Failed, job.Cancelled} {
		due, err := r.cfg.Store.Due(ctx, st, before, r.cfg.Batch)
		if err != nil {
			return staled, lost, fmt.Errorf("error fetching finished jobs: %w", err)
		}
		for _, j := range due {
			_, err := r.cfg.Store.StaleJob(ctx, j.ID, now, func(cur *job.Job) error {
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
				lost++
				continue
			case err != nil:
				return staled, lost, err
			}
			staled++
		}
	}
	return staled, lost, nil
}
