package admin

import (
	"context"
	"errors"
	"fmt"

	"github.com/conveyor/conveyor/internal/ids"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/queue"
	"github.com/conveyor/conveyor/internal/store"
)

// Skipped is a job a bulk call left alone, and why.
type Skipped struct {
	ID     string `json:"id"`
	Reason string `json:"reason"`
}

// Restarted is the answer of a bulk restart.
type Restarted struct {
	Restarted []string  `json:"restarted"`
	Skipped   []Skipped `json:"skipped"`
}

// Stopped is the answer of a bulk stop.
type Stopped struct {
	Stopped []string  `json:"stopped"`
	Skipped []Skipped `json:"skipped"`
}

// StopCode is the error code a stopped job carries.
const StopCode = "stopped"

// outcome is what happened to one job of a bulk call.
type outcome struct {
	done   bool
	reason string
}

// bulk applies fn to every id (BulkConcurrency at once) and sorts the ids
// into done and skipped, in the order given.
func (s *Service) bulk(ctx context.Context, what string, in []string, fn func(ctx context.Context, id string) error) ([]string, []Skipped, error) {
	jobIDs, err := checkIDs(in)
	if err != nil {
		return nil, nil, err
	}
	res := make([]outcome, len(jobIDs))
	parallel(len(jobIDs), BulkConcurrency, func(i int) {
		err := fn(ctx, jobIDs[i])
		var te *job.TransitionError
		switch {
		case err == nil:
			res[i] = outcome{done: true}
		case errors.Is(err, store.ErrNotFound):
			res[i] = outcome{reason: "not found"}
		case errors.As(err, &te):
			res[i] = outcome{reason: "job is " + string(te.From)}
		default:
			s.cfg.Logger.ErrorContext(ctx, what+" failed", "job_id", jobIDs[i], "error", err)
			res[i] = outcome{reason: "internal error; try again"}
		}
	})
	done, skipped := []string{}, []Skipped{}
	for i, o := range res {
		if o.done {
			done = append(done, jobIDs[i])
		} else {
			skipped = append(skipped, Skipped{ID: jobIDs[i], Reason: o.reason})
		}
	}
	return done, skipped, nil
}

// RestartJobs re-queues every failed, cancelled or stale job of jobIDs:
// published items and completed phases are kept, the rest runs again.
// Other jobs are skipped with the reason.
func (s *Service) RestartJobs(ctx context.Context, jobIDs []string, by string) (Restarted, error) {
	done, skipped, err := s.bulk(ctx, "restarting a job", jobIDs, func(ctx context.Context, id string) error {
		_, err := s.cfg.Jobs.Requeue(ctx, id, job.Retry)
		return err
	})
	if err != nil {
		return Restarted{}, err
	}
	s.cfg.Logger.InfoContext(ctx, "jobs restarted by an operator", "by", by, "restarted", len(done), "skipped", len(skipped))
	return Restarted{Restarted: done, Skipped: skipped}, nil
}

// StopJobs cancels every scheduled, queued or running job of jobIDs with
// the error code "stopped"; outputs already produced are kept. A message
// still in the queue then has no effect (the publisher drops messages of
// cancelled jobs) and a running worker makes no call after it (it finishes
// the call in flight, records it and releases the job). Finished jobs are
// skipped with the reason.
func (s *Service) StopJobs(ctx context.Context, jobIDs []string, by string) (Stopped, error) {
	done, skipped, err := s.bulk(ctx, "stopping a job", jobIDs, func(ctx context.Context, id string) error {
		_, err := s.cfg.Jobs.Stop(ctx, id, &job.Error{Code: StopCode, Message: "stopped by an operator", Retryable: true})
		return err
	})
	if err != nil {
		return Stopped{}, err
	}
	s.cfg.Logger.InfoContext(ctx, "jobs stopped by an operator", "by", by, "stopped", len(done), "skipped", len(skipped))
	return Stopped{Stopped: done, Skipped: skipped}, nil
}

// RestartItem restarts one unfinished item (failed, pending or uploaded) of
// a failed, cancelled or stale job: the job is retried, which resumes its
// unfinished items — the items before it keep their outputs. A published
// item gives a *ConflictError (409); a job that is still active or that
// succeeded, a *job.TransitionError (409); an unknown job or item,
// store.ErrNotFound.
func (s *Service) RestartItem(ctx context.Context, jobID, itemID, by string) (job.Job, error) {
	if !ids.Valid(ids.Job, jobID) || !ids.Valid(ids.Item, itemID) {
		return job.Job{}, store.ErrNotFound
	}
	now := s.cfg.Now()
	j, err := s.cfg.Store.UpdateJob(ctx, jobID, func(j *job.Job) error {
		i := -1
		for k, it := range j.Items {
			if it.ID == itemID {
				i = k
			}
		}
		if i < 0 {
			return store.ErrNotFound
		}
		if j.Items[i].Status == job.ItemPublished {
			return &ConflictError{Code: "item_published", Message: fmt.Sprintf("item %s is already published", itemID)}
		}
		if err := j.Apply(job.Retry, now); err != nil {
			return err
		}
		// Retry reset the failed items; this one runs again from where it
		// stopped (an uploaded item is only published).
		if j.Items[i].Status == job.ItemFailed {
			j.Items[i].Status = job.ItemPending
		}
		j.Items[i].Error = nil
		j.Enqueues++
		return nil
	})
	if err != nil {
		return job.Job{}, err
	}
	log := s.cfg.Logger.With("job_id", j.ID, "item_id", itemID, "tier", j.Tier, "by", by)
	if err := s.cfg.Sender.Send(ctx, j.Tier, queue.ForJob(j)); err != nil {
		// The job is stored as queued: recovery sends it.
		log.ErrorContext(ctx, "enqueue failed; recovery will send the job", "error", err)
	}
	log.InfoContext(ctx, "item restarted by an operator")
	return j, nil
}
