package queue

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

	"github.com/conveyor/conveyor/internal/job"
)

// The operators' side of the queues (internal/admin): depths, peeks into
// the dead-letter queues, and redrives back to the tier queues.

// RedriveDefault is the most messages one redrive moves.
const RedriveDefault = 1000

// holdFor is how long a peeked or redriven message stays invisible while
// it is worked on; every message that is not deleted is made visible
// again at once when the work is done.
const holdFor = 30 * time.Second

// OperatorAPI is the part of the SQS client the operators' side uses.
type OperatorAPI interface {
	GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error)
	ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, optFns ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	ChangeMessageVisibilityBatch(ctx context.Context, in *sqs.ChangeMessageVisibilityBatchInput, optFns ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error)
	SendMessage(ctx context.Context, in *sqs.SendMessageInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
	DeleteMessage(ctx context.Context, in *sqs.DeleteMessageInput, optFns ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error)
	StartMessageMoveTask(ctx context.Context, in *sqs.StartMessageMoveTaskInput, optFns ...func(*sqs.Options)) (*sqs.StartMessageMoveTaskOutput, error)
}

// Depth is a queue's approximate number of messages.
type Depth struct {
	// Visible messages wait to be received.
	Visible int
	// InFlight messages were received and are not yet deleted (or are
	// held by a peek or a redrive).
	InFlight int
}

// Peeked is a message read without consuming it.
type Peeked struct {
	// ID is the message's id.
	ID string
	// Body is the message body (Decode reads it).
	Body string
	// SentAt is when the message was first sent (zero when unknown).
	SentAt time.Time
	// ReceiveCount is how often SQS handed the message out.
	ReceiveCount int
}

// Inspector reads queues for operators without consuming their messages.
type Inspector struct {
	SQS OperatorAPI
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// Depth reads the queue at url's approximate depth (one
// GetQueueAttributes).
func (i Inspector) Depth(ctx context.Context, url string) (Depth, error) {
	names := []sqstypes.QueueAttributeName{
		sqstypes.QueueAttributeNameApproximateNumberOfMessages,
		sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
	}
	out, err := i.SQS.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url), AttributeNames: names})
	if err != nil {
		return Depth{}, err
	}
	var d Depth
	d.Visible, _ = strconv.Atoi(out.Attributes[string(names[0])])
	d.InFlight, _ = strconv.Atoi(out.Attributes[string(names[1])])
	return d, nil
}

// Peek returns up to limit messages of the queue at url, received ten at a
// time and made visible again before it returns.
func (i Inspector) Peek(ctx context.Context, url string, limit int) ([]Peeked, error) {
	var held []sqstypes.Message
	defer func() { release(context.WithoutCancel(ctx), i.SQS, url, held, logger(i.Logger)) }()
	for len(held) < limit {
		got, err := receive(ctx, i.SQS, url, min(10, limit-len(held)), 0)
		if err != nil {
			return nil, err
		}
		if len(got) == 0 {
			break
		}
		held = append(held, got...)
	}
	out := make([]Peeked, len(held))
	for n, m := range held {
		p := Peeked{ID: aws.ToString(m.MessageId), Body: aws.ToString(m.Body)}
		if ms, err := strconv.ParseInt(m.Attributes[string(sqstypes.MessageSystemAttributeNameSentTimestamp)], 10, 64); err == nil {
			p.SentAt = time.UnixMilli(ms).UTC()
		}
		p.ReceiveCount, _ = strconv.Atoi(m.Attributes[string(sqstypes.MessageSystemAttributeNameApproximateReceiveCount)])
		out[n] = p
	}
	return out, nil
}

// Redrive is one redrive: which messages of a dead-letter queue go back
// to which tier queue, and how their jobs are prepared.
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
	Rearm func(ctx context.Context, m Message) (Message, error)
}

// Mover moves DLQ messages back to their tier's queue and reports how many
// it moved (or, for an asynchronous move, started moving).
type Mover interface {
	Move(ctx context.Context, r Redrive) (int, error)
}

// SQSMover redrives by receiving from the DLQ, sending a fresh copy (same
// message group and attributes, re-armed job, new deduplication id) to the
// tier's queue and deleting the original — send before delete, so a crash
// in between duplicates a message (harmless: a job runs once) but never
// loses one. It works everywhere, including on emulators without
// StartMessageMoveTask, and it can select messages by job.
type SQSMover struct {
	SQS    OperatorAPI
	Logger *slog.Logger
	// Progress, when set, is called after each moved message.
	Progress func(moved int)
}

// Move implements Mover.
func (m SQSMover) Move(ctx context.Context, r Redrive) (int, error) {
	log := logger(m.Logger)
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
			body, err := Decode(aws.ToString(msg.Body))
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

func (m SQSMover) moveOne(ctx context.Context, r Redrive, msg sqstypes.Message, body Message) error {
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
	dedup := DedupID(body.JobID, body.Send)
	if body.Kind != "" && body.Kind != KindJob {
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
	SQS      OperatorAPI
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
	log := logger(m.Logger)
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
			body, err := Decode(aws.ToString(msg.Body))
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
func receive(ctx context.Context, c OperatorAPI, url string, n int, wait int32) ([]sqstypes.Message, error) {
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
func release(ctx context.Context, c OperatorAPI, url string, held []sqstypes.Message, log *slog.Logger) {
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
		if err != nil {
			log.WarnContext(ctx, "making DLQ messages visible again failed; they return after their hold", "hold", holdFor.String(), "error", err)
		}
	}
}

func logger(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.Default()
	}
	return l
}
