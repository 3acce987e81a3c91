package admin

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/conveyor/conveyor/internal/aws/queue"
	"github.com/conveyor/conveyor/internal/aws/store"
	"github.com/conveyor/conveyor/internal/job"
)

// ReleaseBatch bounds how many parked jobs one reset or resume releases in
// its request (BulkConcurrency at a time): a write and a send each, so the
// request ends in a second or two, far within API Gateway's 30 s, however
// many jobs wait. The release sweep sends the rest on its next run: a job
// a pause parked is due at once (the worker parks it until the moment it
// parked), one an open circuit parked at its old openUntil.
const ReleaseBatch = 200

// errNotWaiting aborts the release of a job that no longer waits for what
// the operator released.
var errNotWaiting = errors.New("the job no longer waits for this")

// releaseParked sends again, at once, the jobs parked in the table for
// reason (narrowed to breaker's circuit or to tier when set): what an
// operator's reset of a breaker or resume of a tier unblocked. Without it
// they would wait out the old RetryAt plus a sweep. Each job is unparked
// by a conditional write before its message is sent, so a release racing
// the release sweep or a worker sends it once. It returns how many jobs it
// released.
func (s *Service) releaseParked(ctx context.Context, reason, breaker string, tier job.Tier) (int, error) {
	parked, err := s.cfg.Store.ParkedFor(ctx, reason, breaker, tier, ReleaseBatch)
	if err != nil {
		return 0, err
	}
	var (
		mu       sync.Mutex
		released int
		failed   error
	)
	parallel(len(parked), BulkConcurrency, func(i int) {
		ok, err := s.releaseOne(ctx, parked[i].ID, reason, breaker)
		mu.Lock()
		defer mu.Unlock()
		if ok {
			released++
		}
		if err != nil && failed == nil {
			failed = err
		}
	})
	return released, failed
}

// releaseOne unparks job id if it still waits for reason (and breaker) and
// sends it; ok reports whether it was released (sent, or admitted to its
// owner's backlog).
func (s *Service) releaseOne(ctx context.Context, id, reason, breaker string) (ok bool, err error) {
	now := s.cfg.Now()
	j, err := s.cfg.Store.UpdateJob(ctx, id, func(j *job.Job) error {
		if !waitsFor(j, reason, breaker) {
			return errNotWaiting
		}
		if err := j.Unpark(now); err != nil {
			return err
		}
		j.Enqueues++
		return nil
	})
	var te *job.TransitionError
	switch {
	case errors.Is(err, errNotWaiting), errors.Is(err, store.ErrNotFound), errors.As(err, &te):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("releasing job %s: %w", id, err)
	}
	if j.InBacklog() {
		return true, nil // sent when its owner's backlog is admitted
	}
	if err := s.cfg.Sender.Send(ctx, j.Tier, queue.ForJob(j)); err != nil {
		// Unparked and queued: recovery sends it if this send was lost.
		s.cfg.Logger.ErrorContext(ctx, "sending a released job failed; recovery sends it", "job_id", j.ID, "error", err)
	}
	return true, nil
}

// waitsFor reports whether the fresh copy j is still parked for reason
// (and breaker's circuit when breaker is set).
func waitsFor(j *job.Job, reason, breaker string) bool {
	if j.Status != job.Queued || j.Waiting == "" {
		return false
	}
	if j.Wait == nil {
		return breaker == "" && j.Waiting == reason
	}
	return (j.Wait.Reason == reason || j.Waiting == reason) && (breaker == "" || j.Wait.Breaker == breaker)
}
