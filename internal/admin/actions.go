package admin

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/conveyor/conveyor/internal/aws/queue"
	"github.com/conveyor/conveyor/internal/aws/store"
	"github.com/conveyor/conveyor/internal/ids"
	"github.com/conveyor/conveyor/internal/invalid"
	"github.com/conveyor/conveyor/internal/job"
)

// Skipped is a job a bulk call left alone, and why.
type Skipped struct {
	ID     string `json:"id"`
	Reason string `json:"reason"`
}

// Reasons a bulk call skips a job for, beside "job is <status>" (a
// transition its state does not allow).
const (
	ReasonNotAJobID = "not a job id"
	ReasonNotFound  = "not found"
	ReasonInternal  = "internal error; try again"
)

// Selection is what a bulk call by filter selected: how many jobs matched
// when it looked, the most it acts on, and the ids it took (newest
// created first). In a dry run nothing else happens.
type Selection struct {
	DryRun  bool     `json:"dryRun"`
	Matched int      `json:"matched"`
	Limit   int      `json:"limit"`
	JobIDs  []string `json:"jobIds"`
}

// Restarted is the answer of a bulk restart; Selection is set for one by
// filter.
type Restarted struct {
	Restarted []string  `json:"restarted"`
	Skipped   []Skipped `json:"skipped"`
	*Selection
}

// Stopped is the answer of a bulk stop; Selection is set for one by
// filter.
type Stopped struct {
	Stopped []string  `json:"stopped"`
	Skipped []Skipped `json:"skipped"`
	*Selection
}

// StopCode is the error code a stopped job carries.
const StopCode = "stopped"

// Restartable and Stoppable are the statuses a bulk restart and a bulk
// stop act on; a bulk call by filter names one of them.
var (
	Restartable = []job.Status{job.Failed, job.Cancelled, job.Stale}
	Stoppable   = []job.Status{job.Scheduled, job.Queued, job.Running}
)

// outcome is what happened to one job of a bulk call.
type outcome struct {
	done   bool
	reason string
}

// bulk applies fn to every job id of in (BulkConcurrency at once) and
// sorts them into done and skipped, in the order given: entries that are
// no job id are skipped (ReasonNotAJobID), as are the ids fn refuses, each
// with its reason; the others are done.
func (s *Service) bulk(ctx context.Context, what string, in []string, fn func(ctx context.Context, id string) error) ([]string, []Skipped, error) {
	jobIDs, err := checkIDs(in)
	if err != nil {
		return nil, nil, err
	}
	res := make([]outcome, len(jobIDs))
	parallel(len(jobIDs), BulkConcurrency, func(i int) {
		if !ids.Valid(ids.Job, jobIDs[i]) {
			res[i] = outcome{reason: ReasonNotAJobID}
			return
		}
		err := fn(ctx, jobIDs[i])
		var te *job.TransitionError
		switch {
		case err == nil:
			res[i] = outcome{done: true}
		case errors.Is(err, store.ErrNotFound):
			res[i] = outcome{reason: ReasonNotFound}
		case errors.As(err, &te):
			res[i] = outcome{reason: "job is " + string(te.From)}
		default:
			s.cfg.Logger.ErrorContext(ctx, what+" failed", "job_id", jobIDs[i], "error", err)
			res[i] = outcome{reason: ReasonInternal}
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

// restart re-queues one job through the state machine.
func (s *Service) restart(ctx context.Context, id string) error {
	_, err := s.cfg.Jobs.Requeue(ctx, id, job.Retry)
	return err
}

// stop cancels one job with the error code "stopped".
func (s *Service) stop(ctx context.Context, id string) error {
	_, err := s.cfg.Jobs.Stop(ctx, id, &job.Error{Code: StopCode, Message: "stopped by an operator", Retryable: true})
	return err
}

// RestartJobs re-queues every failed, cancelled or stale job of jobIDs:
// published items and completed phases are kept, the rest runs again.
// Other jobs are skipped with the reason, as are entries that are no job
// id: one bad id never holds back the others.
func (s *Service) RestartJobs(ctx context.Context, jobIDs []string, by string) (Restarted, error) {
	done, skipped, err := s.bulk(ctx, "restarting a job", jobIDs, s.restart)
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
// skipped with the reason, as are entries that are no job id.
func (s *Service) StopJobs(ctx context.Context, jobIDs []string, by string) (Stopped, error) {
	done, skipped, err := s.bulk(ctx, "stopping a job", jobIDs, s.stop)
	if err != nil {
		return Stopped{}, err
	}
	s.cfg.Logger.InfoContext(ctx, "jobs stopped by an operator", "by", by, "stopped", len(done), "skipped", len(skipped))
	return Stopped{Stopped: done, Skipped: skipped}, nil
}

// RestartMatching restarts the jobs f selects (as RestartJobs does), at
// most limit (nil: MaxBulk) per call, newest created first; f.Status must
// be one of Restartable. A restarted job leaves the filter's status, so
// calling again until Matched is 0 goes through every match. With dryRun
// nothing changes: the answer says how many match and which this call
// would take.
//
// Without limit, a call whose filter matches more than the configured
// BulkSyncMax jobs acts on none itself: it starts an operation that
// restarts every match in the background and returns it instead.
func (s *Service) RestartMatching(ctx context.Context, f Filter, limit *int, dryRun bool, by string) (Restarted, *Operation, error) {
	sel, large, err := s.selectJobs(ctx, f, limit, dryRun, Restartable)
	if err != nil {
		return Restarted{}, nil, err
	}
	if large {
		op, err := s.startOperation(ctx, ActionRestart, f, sel.Matched, by)
		return Restarted{}, &op, err
	}
	out := Restarted{Restarted: []string{}, Skipped: []Skipped{}, Selection: &sel}
	if dryRun || len(sel.JobIDs) == 0 {
		return out, nil, nil
	}
	if out.Restarted, out.Skipped, err = s.bulk(ctx, "restarting a job", sel.JobIDs, s.restart); err != nil {
		return Restarted{}, nil, err
	}
	s.cfg.Logger.InfoContext(ctx, "jobs restarted by an operator, by filter", "by", by, "filter", f.String(),
		"matched", sel.Matched, "restarted", len(out.Restarted), "skipped", len(out.Skipped))
	return out, nil, nil
}

// StopMatching stops the jobs f selects (as StopJobs does), at most limit
// (nil: MaxBulk) per call, newest created first; f.Status must be one of
// Stoppable. dryRun, and the operation a large match starts, as for
// RestartMatching.
func (s *Service) StopMatching(ctx context.Context, f Filter, limit *int, dryRun bool, by string) (Stopped, *Operation, error) {
	sel, large, err := s.selectJobs(ctx, f, limit, dryRun, Stoppable)
	if err != nil {
		return Stopped{}, nil, err
	}
	if large {
		op, err := s.startOperation(ctx, ActionStop, f, sel.Matched, by)
		return Stopped{}, &op, err
	}
	out := Stopped{Stopped: []string{}, Skipped: []Skipped{}, Selection: &sel}
	if dryRun || len(sel.JobIDs) == 0 {
		return out, nil, nil
	}
	if out.Stopped, out.Skipped, err = s.bulk(ctx, "stopping a job", sel.JobIDs, s.stop); err != nil {
		return Stopped{}, nil, err
	}
	s.cfg.Logger.InfoContext(ctx, "jobs stopped by an operator, by filter", "by", by, "filter", f.String(),
		"matched", sel.Matched, "stopped", len(out.Stopped), "skipped", len(out.Skipped))
	return out, nil, nil
}

// selectJobs validates a bulk call's filter and limit and reads, from the
// inspector's indexes, how many jobs it selects in all and the first limit
// of them. large reports a call that runs as an operation (no limit given,
// not a dry run, more matches than BulkSyncMax): it is known from the
// count, so then no job is read and sel holds the count only.
func (s *Service) selectJobs(ctx context.Context, f Filter, limit *int, dryRun bool, statuses []job.Status) (sel Selection, large bool, err error) {
	names := make([]string, len(statuses))
	for i, st := range statuses {
		names[i] = string(st)
	}
	if f.Status == "" {
		return Selection{}, false, invalid.Field("filter.status", "is required: one of "+strings.Join(names, ", "))
	}
	q, err := SearchRequest{Status: f.Status, Tier: f.Tier, Owner: f.Owner, Type: f.Type, ErrorCode: f.ErrorCode}.query()
	if err != nil {
		return Selection{}, false, invalid.Under("filter", err)
	}
	if !slices.Contains(statuses, q.Status) {
		return Selection{}, false, invalid.Field("filter.status", "must be one of "+strings.Join(names, ", "))
	}
	q.Limit = MaxBulk
	if limit != nil {
		if *limit < 1 || *limit > MaxBulk {
			return Selection{}, false, invalid.Field("limit", fmt.Sprintf("must be between 1 and %d", MaxBulk))
		}
		q.Limit = *limit
	}
	total, err := s.cfg.Store.CountSearch(ctx, q)
	if err != nil {
		return Selection{}, false, err
	}
	sel = Selection{DryRun: dryRun, Matched: total, Limit: q.Limit, JobIDs: []string{}}
	if limit == nil && !dryRun && total > s.cfg.BulkSyncMax {
		return sel, true, nil
	}
	jobs, _, err := s.cfg.Store.SearchJobs(ctx, q)
	if err != nil {
		return Selection{}, false, err
	}
	for _, j := range jobs {
		sel.JobIDs = append(sel.JobIDs, j.ID)
	}
	return sel, false, nil
}

// Filter selects jobs for a bulk call by filter: the inspector's filters
// (Search), every one optional but Status.
type Filter struct {
	Status    string `json:"status"`
	Tier      string `json:"tier,omitempty"`
	ErrorCode string `json:"errorCode,omitempty"`
	Type      string `json:"type,omitempty"`
	Owner     string `json:"owner,omitempty"`
}

// String is the filter for a log line.
func (f Filter) String() string {
	var parts []string
	for _, kv := range [][2]string{{"status", f.Status}, {"tier", f.Tier}, {"errorCode", f.ErrorCode}, {"type", f.Type}, {"owner", f.Owner}} {
		if kv[1] != "" {
			parts = append(parts, kv[0]+"="+kv[1])
		}
	}
	return strings.Join(parts, " ")
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
	if j.InBacklog() {
		log.InfoContext(ctx, "item restarted by an operator; the job waits in its owner's backlog")
		return j, nil
	}
	// A restarted job's earlier message may still hold its slot: this
	// later send goes to the owner's next slot (queue.Fairness).
	if err := s.cfg.Sender.Send(ctx, j.Tier, queue.ForJob(j)); err != nil {
		// The job is stored as queued: recovery sends it.
		log.ErrorContext(ctx, "enqueue failed; recovery will send the job", "error", err)
	}
	log.InfoContext(ctx, "item restarted by an operator")
	return j, nil
}
