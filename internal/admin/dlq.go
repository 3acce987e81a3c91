package admin

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/conveyor/conveyor/internal/aws/queue"
	"github.com/conveyor/conveyor/internal/aws/store"
	"github.com/conveyor/conveyor/internal/ids"
	"github.com/conveyor/conveyor/internal/invalid"
	"github.com/conveyor/conveyor/internal/job"
)

// DLQMessage is one message of a dead-letter queue and its job.
type DLQMessage struct {
	MessageID string `json:"messageId"`
	// JobID is empty when the body is not a message Conveyor can read.
	JobID string `json:"jobId"`
	// Kind of work (publish, webhook).
	Kind string `json:"kind,omitempty"`
	// Status of the job now ("" when the job is gone).
	Status string `json:"status,omitempty"`
	// Attempts the job has spent, and its error.
	Attempts int        `json:"attempts"`
	Error    *job.Error `json:"error"`
	// SentAt is when the message was first sent (SentTimestamp).
	SentAt *time.Time `json:"sentAt"`
	// ReceiveCount is how often SQS handed the message out.
	ReceiveCount int `json:"receiveCount"`
}

// DLQPeek returns up to limit (1 to MaxPeek) messages of tier's DLQ with
// their jobs' attempts and errors, without consuming them: they are held
// for a moment and made visible again.
func (s *Service) DLQPeek(ctx context.Context, tier string, limit int) ([]DLQMessage, error) {
	t, err := s.tier(tier)
	if err != nil {
		return nil, err
	}
	if limit < 1 || limit > MaxPeek {
		return nil, invalid.Field("limit", fmt.Sprintf("must be between 1 and %d", MaxPeek))
	}
	url := s.cfg.DLQURLs[t]
	if url == "" {
		return []DLQMessage{}, nil
	}
	held, err := s.cfg.Queues.Peek(ctx, url, limit)
	if err != nil {
		return nil, fmt.Errorf("peeking into the %s DLQ: %w", t, err)
	}
	out := make([]DLQMessage, len(held))
	parallel(len(held), BulkConcurrency, func(i int) {
		out[i] = s.describe(ctx, held[i])
	})
	return out, nil
}

// describe joins a DLQ message with its job.
func (s *Service) describe(ctx context.Context, m queue.Peeked) DLQMessage {
	d := DLQMessage{MessageID: m.ID, ReceiveCount: m.ReceiveCount}
	if !m.SentAt.IsZero() {
		t := m.SentAt
		d.SentAt = &t
	}
	msg, err := queue.Decode(m.Body)
	if err != nil {
		d.Error = &job.Error{Code: "unreadable", Message: "the message body is not a Conveyor message"}
		return d
	}
	d.JobID, d.Kind = msg.JobID, msg.Kind
	j, err := s.cfg.Store.GetJob(ctx, msg.JobID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		d.Error = &job.Error{Code: "job_gone", Message: "the job no longer exists"}
	case err != nil:
		s.cfg.Logger.WarnContext(ctx, "reading a DLQ message's job failed", "job_id", msg.JobID, "error", err)
	default:
		d.Status, d.Attempts, d.Error = string(j.Status), j.Attempts, j.Error
	}
	return d
}

// Redriven is the answer of a redrive.
type Redriven struct {
	Moved int `json:"moved"`
}

// DLQRedrive moves tier's DLQ messages (those of jobIDs only, when given)
// back to the tier's queue. Each message's job is re-armed first: a failed
// job is retried (its unfinished items run again); an active job is left
// as it is; a cancelled, stale or succeeded job stays finished and its
// message is dropped by the publisher. max bounds the messages moved (0:
// RedriveDefault).
func (s *Service) DLQRedrive(ctx context.Context, tier string, jobIDs []string, max int, by string) (Redriven, error) {
	t, err := s.tier(tier)
	if err != nil {
		return Redriven{}, err
	}
	if max < 0 || max > RedriveDefault {
		return Redriven{}, invalid.Field("max", fmt.Sprintf("must be between 1 and %d", RedriveDefault))
	}
	r := queue.Redrive{Tier: t, DLQURL: s.cfg.DLQURLs[t], QueueURL: s.cfg.QueueURLs[t], Max: max, Rearm: s.rearm}
	if jobIDs != nil {
		list, err := checkIDs(jobIDs)
		if err != nil {
			return Redriven{}, err
		}
		// A redrive answers a count, not each id: an entry that is no job
		// id is refused rather than silently matching nothing.
		for i, id := range jobIDs {
			if !ids.Valid(ids.Job, id) {
				return Redriven{}, invalid.Field(fmt.Sprintf("jobIds[%d]", i), "is not a job id")
			}
		}
		r.JobIDs = map[string]bool{}
		for _, id := range list {
			r.JobIDs[id] = true
		}
	}
	if r.DLQURL == "" {
		return Redriven{}, nil
	}
	n, err := s.cfg.Mover.Move(ctx, r)
	if n > 0 || err == nil {
		s.cfg.Logger.InfoContext(ctx, "DLQ redriven by an operator", "tier", t, "moved", n, "by", by, "selected", len(r.JobIDs))
	}
	return Redriven{Moved: n}, err
}

// rearm retries a failed job and gives the message a fresh send number.
func (s *Service) rearm(ctx context.Context, m queue.Message) (queue.Message, error) {
	if m.Kind != "" && m.Kind != queue.KindJob {
		return m, nil
	}
	now := s.cfg.Now()
	j, err := s.cfg.Store.UpdateJob(ctx, m.JobID, func(j *job.Job) error {
		if j.Status == job.Failed {
			if err := j.Apply(job.Retry, now); err != nil {
				return err
			}
		}
		j.Enqueues++
		return nil
	})
	switch {
	case errors.Is(err, store.ErrNotFound):
		return m, nil // moot: the publisher drops it
	case err != nil:
		return m, err
	}
	m.Send = j.Enqueues
	return m, nil
}
