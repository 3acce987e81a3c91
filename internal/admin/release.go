package admin

import (
	"context"
	"errors"
	"fmt"

	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/queue"
	"github.com/conveyor/conveyor/internal/store"
)

// ReleaseBatch bounds how many parked jobs one reset or resume releases at
// once; the release sweep sends any beyond it when they are due.
const ReleaseBatch = 1000

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
	released := 0
	for _, p := range parked {
		now := s.cfg.Now()
		j, err := s.cfg.Store.UpdateJob(ctx, p.ID, func(j *job.Job) error {
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
			continue
		case err != nil:
			return released, fmt.Errorf("releasing job %s: %w", p.ID, err)
		}
		if j.InBacklog() {
			released++ // sent when its owner's backlog is admitted
			continue
		}
		if err := s.cfg.Sender.Send(ctx, j.Tier, queue.ForJob(j)); err != nil {
			// Unparked and queued: recovery sends it if this send was lost.
			s.cfg.Logger.ErrorContext(ctx, "sending a released job failed; recovery sends it", "job_id", j.ID, "error", err)
		}
		released++
	}
	return released, nil
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
