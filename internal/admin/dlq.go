package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/conveyor/conveyor/internal/ids"
	"github.com/conveyor/conveyor/internal/invalid"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/queue"
	"github.com/conveyor/conveyor/internal/store"
)

// holdFor is how long a peeked or redriven message stays invisible while we
// work on it; every message we do not delete is made visible again at once
// when we are done.
const holdFor = 30 * time.Second

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
	var held []sqstypes.Message
	defer func() { release(context.WithoutCancel(ctx), s.cfg.SQS, url, held, s.cfg.Logger) }()
	for len(held) < limit {
		got, err := receive(ctx, s.cfg.SQS, url, min(10, limit-len(held)), 0)
		if err != nil {
			return nil, fmt.Errorf("peeking into the %s DLQ: %w", t, err)
		}
		if len(got) == 0 {
			break
		}
		held = append(held, got...)
	}
	out := make([]DLQMessage, len(held))
	parallel(len(held), BulkConcurrency, func(i int) {
		out[i] = s.describe(ctx, held[i])
	})
	return out, nil
}

// describe joins a DLQ message with its job.
func (s *Service) describe(ctx context.Context, m sqstypes.Message) DLQMessage {
	d := DLQMessage{MessageID: aws.ToString(m.MessageId)}
	if ms, err := strconv.ParseInt(m.Attributes[string(sqstypes.MessageSystemAttributeNameSentTimestamp)], 10, 64); err == nil {
		t := time.UnixMilli(ms).UTC()
		d.SentAt = &t
	}
	d.ReceiveCount, _ = strconv.Atoi(m.Attributes[string(sqstypes.MessageSystemAttributeNameApproximateReceiveCount)])
	msg, err := queue.Decode(aws.ToString(m.Body))
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

// Redrive is one redrive: which messages go back where, and how their jobs
// are prepared.
type Redrive struct {
	Tier     job.Tier
	DLQURL   string
	QueueURL string
	// JobIDs, when not empty, selects the messages of these jobs only.
	JobIDs map[string]bool
	// Max bounds how many messages move (0: RedriveDefault).
	Max int
	// Rearm prepares a message's job to run again and returns the message
	// to send in its place (a fresh deduplication id).
	Rearm func(ctx context.Context, m queue.Message) (queue.Message, error)
}

// Mover moves DLQ messages back to their tier's queue and reports how many
// it moved (or, for an asynchronous move, started moving).
type Mover interface {
	Move(ctx context.Context, r Redrive) (int, error)
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
	r := Redrive{Tier: t, DLQURL: s.cfg.DLQURLs[t], QueueURL: s.cfg.QueueURLs[t], Max: max, Rearm: s.rearm}
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

// SQSMover redrives by receiving from the DLQ, sending a fresh copy (same
// message group and attributes, re-armed job, new deduplication id) to the
// tier's queue and deleting the original — send before delete, so a crash
// in between duplicates a message (harmless: a job runs once) but never
// loses one. It works everywhere, including on emulators without
// StartMessageMoveTask, and it can select messages by job.
type SQSMover struct {
	SQS    SQSAPI
	Logger *slog.Logger
	// Progress, when set, is called after each moved message.
	Progress func(moved int)
}

// Move implements Mover.
func (m SQSMover) Move(ctx context.Context, r Redrive) (int, error) {
	log := m.Logger
	if log == nil {
		log = slog.Default()
	}
	limit := r.Max
	if limit == 0 {
		limit = RedriveDefault
	}
	var held []sqstypes.Message
	defer func() { release(context.WithoutCancel(ctx), m.SQS, r.DLQURL, held, log) }()
	seen := map[string]bool{}
	found := 0
	moved := 0
	for moved < limit && (r.JobIDs == nil || found < len(r.JobIDs)) {
		got, err := receive(ctx, m.SQS, r.DLQURL, min(10, limit-moved), 1)
		if err != nil {
			return moved, fmt.Errorf("receiving from the %s DLQ: %w", r.Tier, err)
		}
		if len(got) == 0 {
			break
		}
		again := false
		for _, msg := range got {
			id := aws.ToString(msg.MessageId)
			if seen[id] {
				// Our hold ran out: we went round the whole queue.
				again = true
			}
			seen[id] = true
			body, err := queue.Decode(aws.ToString(msg.Body))
			if err != nil || (r.JobIDs != nil && !r.JobIDs[body.JobID]) || moved >= limit {
				held = append(held, msg)
				continue
			}
			if r.JobIDs != nil {
				found++
			}
			if err := m.moveOne(ctx, r, msg, body); err != nil {
				held = append(held, msg)
				return moved, err
			}
			moved++
			if m.Progress != nil {
				m.Progress(moved)
			}
		}
		if again {
			break
		}
	}
	return moved, nil
}

func (m SQSMover) moveOne(ctx context.Context, r Redrive, msg sqstypes.Message, body queue.Message) error {
	if r.Rearm != nil {
		var err error
		if body, err = r.Rearm(ctx, body); err != nil {
			return fmt.Errorf("re-arming job %s: %w", body.JobID, err)
		}
	}
	raw, err := json.Marshal(body)
	if err != nil {
		return err
	}
	group := msg.Attributes[string(sqstypes.MessageSystemAttributeNameMessageGroupId)]
	if group == "" {
		group = body.JobID
	}
	dedup := queue.DedupID(body.JobID, body.Send)
	if body.Kind != "" && body.Kind != queue.KindJob {
		dedup = "redrive-" + aws.ToString(msg.MessageId)
	}
	in := &sqs.SendMessageInput{
		QueueUrl: aws.String(r.QueueURL), MessageBody: aws.String(string(raw)),
		MessageGroupId: aws.String(group), MessageDeduplicationId: aws.String(dedup),
	}
	if len(msg.MessageAttributes) > 0 {
		in.MessageAttributes = msg.MessageAttributes
	}
	if _, err := m.SQS.SendMessage(ctx, in); err != nil {
		return fmt.Errorf("sending job %s back to the %s queue: %w", body.JobID, r.Tier, err)
	}
	if _, err := m.SQS.DeleteMessage(context.WithoutCancel(ctx), &sqs.DeleteMessageInput{QueueUrl: aws.String(r.DLQURL), ReceiptHandle: msg.ReceiptHandle}); err != nil {
		return fmt.Errorf("deleting job %s's message from the %s DLQ (it was sent back; the copy is harmless): %w", body.JobID, r.Tier, err)
	}
	return nil
}

// TaskMover redrives with SQS StartMessageMoveTask, the AWS way (FIFO DLQs
// since November 2023): the move runs asynchronously inside SQS and the
// redriven messages get new ids. Before starting it, it re-arms the jobs of
// the messages in the DLQ (one pass of peeks), so that failed jobs run
// again. A redrive of selected jobs cannot be a move task: it goes to
// Fallback. Emulators that lack the call (moto answers 500) use SQSMover.
type TaskMover struct {
	SQS      SQSAPI
	Fallback Mover
	Logger   *slog.Logger
}

// Move implements Mover; the count is the DLQ's approximate depth when the
// task started.
func (m TaskMover) Move(ctx context.Context, r Redrive) (int, error) {
	if r.JobIDs != nil || r.Max > 0 {
		if m.Fallback == nil {
			return 0, errors.New("a move task cannot select messages, and no fallback mover is configured")
		}
		return m.Fallback.Move(ctx, r)
	}
	log := m.Logger
	if log == nil {
		log = slog.Default()
	}
	arns, err := m.SQS.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(r.DLQURL),
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn, sqstypes.QueueAttributeNameApproximateNumberOfMessages}})
	if err != nil {
		return 0, fmt.Errorf("reading the %s DLQ: %w", r.Tier, err)
	}
	dst, err := m.SQS.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(r.QueueURL),
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}})
	if err != nil {
		return 0, fmt.Errorf("reading the %s queue: %w", r.Tier, err)
	}
	depth, _ := strconv.Atoi(arns.Attributes[string(sqstypes.QueueAttributeNameApproximateNumberOfMessages)])
	if depth == 0 {
		return 0, nil
	}
	if r.Rearm != nil {
		if err := m.rearmAll(ctx, r, depth, log); err != nil {
			return 0, err
		}
	}
	_, err = m.SQS.StartMessageMoveTask(ctx, &sqs.StartMessageMoveTaskInput{
		SourceArn:      aws.String(arns.Attributes[string(sqstypes.QueueAttributeNameQueueArn)]),
		DestinationArn: aws.String(dst.Attributes[string(sqstypes.QueueAttributeNameQueueArn)]),
	})
	if err != nil {
		return 0, fmt.Errorf("starting the %s DLQ's move task: %w", r.Tier, err)
	}
	return depth, nil
}

// rearmAll peeks at up to depth messages and re-arms their jobs; the
// messages themselves stay in the DLQ for the move task.
func (m TaskMover) rearmAll(ctx context.Context, r Redrive, depth int, log *slog.Logger) error {
	var held []sqstypes.Message
	defer func() { release(context.WithoutCancel(ctx), m.SQS, r.DLQURL, held, log) }()
	for len(held) < depth {
		got, err := receive(ctx, m.SQS, r.DLQURL, min(10, depth-len(held)), 0)
		if err != nil {
			return fmt.Errorf("receiving from the %s DLQ: %w", r.Tier, err)
		}
		if len(got) == 0 {
			return nil
		}
		held = append(held, got...)
		for _, msg := range got {
			body, err := queue.Decode(aws.ToString(msg.Body))
			if err != nil {
				continue
			}
			if _, err := r.Rearm(ctx, body); err != nil {
				return fmt.Errorf("re-arming job %s: %w", body.JobID, err)
			}
		}
	}
	return nil
}

// receive takes up to n messages, held for holdFor, with their system
// attributes.
func receive(ctx context.Context, c SQSAPI, url string, n int, wait int32) ([]sqstypes.Message, error) {
	out, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
		QueueUrl: aws.String(url), MaxNumberOfMessages: int32(n), WaitTimeSeconds: wait,
		VisibilityTimeout:           int32(holdFor / time.Second),
		MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAll},
		MessageAttributeNames:       []string{"All"},
	})
	if err != nil {
		return nil, err
	}
	return out.Messages, nil
}

// release makes held messages visible again, ten at a time.
func release(ctx context.Context, c SQSAPI, url string, held []sqstypes.Message, log *slog.Logger) {
	for start := 0; start < len(held); start += 10 {
		batch := held[start:min(start+10, len(held))]
		entries := make([]sqstypes.ChangeMessageVisibilityBatchRequestEntry, len(batch))
		for i, m := range batch {
			entries[i] = sqstypes.ChangeMessageVisibilityBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: m.ReceiptHandle, VisibilityTimeout: 0}
		}
		out, err := c.ChangeMessageVisibilityBatch(ctx, &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: aws.String(url), Entries: entries})
		if err == nil && len(out.Failed) > 0 {
			err = fmt.Errorf("%d of %d messages: %s", len(out.Failed), len(entries), aws.ToString(out.Failed[0].Message))
		}
		if err != nil && log != nil {
			log.WarnContext(ctx, "making DLQ messages visible again failed; they return after their hold", "hold", holdFor.String(), "error", err)
		}
	}
}
