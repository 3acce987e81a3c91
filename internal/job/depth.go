package job

import (
	"fmt"
	"time"
)

// The counters a job is counted in (Job.Depth).
const (
	// DepthQueue: the job is queued or running, its message in the queue
	// (or due back there from a wait in the table).
	DepthQueue = "queue"
	// DepthBacklog: the job is queued but waits in the table for room in
	// its owner's share of the queue (WaitBacklog).
	DepthBacklog = "backlog"
)

// WaitBacklog: the owner already has the most jobs in the tier's queue
// that it may have; the job waits in the table, in order, and is sent as
// the owner's jobs ahead of it finish. No attempt is spent.
const WaitBacklog = "backlog"

// WantDepth is the counter j belongs in for its status: DepthBacklog for a
// queued job in its owner's backlog, DepthQueue for any other queued or
// running job (one parked for a wait comes back by itself), "" for the
// rest.
func (j *Job) WantDepth() string {
	switch {
	case j.Status == Queued && j.Waiting == WaitBacklog:
		return DepthBacklog
	case j.Status == Queued || j.Status == Running:
		return DepthQueue
	}
	return ""
}

// InBacklog reports whether j waits in its owner's backlog: no message of
// it is to be sent until it is admitted (Admit).
func (j *Job) InBacklog() bool { return j.Status == Queued && j.Waiting == WaitBacklog }

// Backlog makes a queued job that would go into the queue wait in its
// owner's backlog instead, bound being the most of the owner's jobs its
// tier's queue may hold. Its place in the backlog is when it was queued,
// so the backlog is admitted in order.
func (j *Job) Backlog(bound int, now time.Time) error {
	if j.Status != Queued || j.Waiting != "" && j.Waiting != WaitBacklog {
		return &TransitionError{From: j.Status, Action: "backlog"}
	}
	now = now.UTC()
	at := now
	if j.QueuedAt != nil {
		at = j.QueuedAt.UTC()
	}
	j.Waiting, j.RetryAt = WaitBacklog, &at
	j.UpdatedAt = now
	j.SetWait(WaitBacklog, nil, fmt.Sprintf("its owner has %d jobs in this tier's queue, the most it may; it is sent, in order, as they finish", bound), "")
	if j.Phase == "queued" || j.Phase == "" {
		j.Phase = "waiting"
	}
	return nil
}

// Admit takes a job out of its owner's backlog into the queue (the sender
// then sends it and counts the send).
func (j *Job) Admit(now time.Time) error {
	if !j.InBacklog() {
		return &TransitionError{From: j.Status, Action: "admit"}
	}
	if err := j.Unpark(now); err != nil {
		return err
	}
	j.Phase = "queued"
	return nil
}
