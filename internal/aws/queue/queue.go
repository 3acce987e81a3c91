// Package queue sends work to the tier FIFO queues. A message carries ids
// only — never media or secrets. Every send of a job has its own
// deduplication id, so a duplicate of one send is dropped. Its message
// group is one of its owner's few slots (Fairness): an owner holds at most
// that many jobs in flight, and every other owner's jobs are delivered
// alongside; a message that must wait leaves the slot for the job's own
// group. The order of a job's messages does not matter: the job's state in
// DynamoDB and the worker's conditional claim decide.
//
// It is the SQS adapter, the one package that talks to SQS: besides
// sending (Sender) it delays a consumer's message and moves one out of its
// owner's slot (Delay, MoveOut), and gives operators the queues' depths,
// peeks into the dead-letter queues and redrives (Inspector, SQSMover,
// TaskMover).
package queue

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/telemetry"
)

// Kinds of work (job.Message…: the message is the vocabulary's, which
// the domain sends without reaching SQS).
const (
	// KindJob is a job of any kind on a tier queue (job.MessageJob).
	KindJob = job.MessageJob
	// KindPublish is the former name of KindJob.
	//
	// Deprecated: use KindJob.
	KindPublish = KindJob
	// KindWebhook is a webhook delivery (job.MessageWebhook).
	KindWebhook = job.MessageWebhook
	// KindOperation is the system tier's message that works the next
	// chunk of an operator's bulk operation (job.MessageOperation).
	KindOperation = job.MessageOperation
)

// Message is the body of every queue message (job.Message).
type Message = job.Message

// ForJob is the message that sends job id of owner for the send-th time.
// ForJob is the message that sends j (as stored) to its tier queue.
func ForJob(j job.Job) Message {
	return Message{Kind: KindJob, JobID: j.ID, Owner: j.Owner, Uploads: j.MediaRefs, Send: j.Enqueues, Plan: j.Plan, Traceparent: j.Trace}
}

// Decode parses a message body.
func Decode(body string) (Message, error) {
	var m Message
	if err := json.Unmarshal([]byte(body), &m); err != nil {
		return Message{}, fmt.Errorf("decoding queue message: %w", err)
	}
	if m.JobID == "" && (m.Kind != KindOperation || m.Operation == "") {
		return Message{}, fmt.Errorf("decoding queue message: no jobId")
	}
	return m, nil
}

// Sender sends messages to the tier queues.
type Sender struct {
	sqs  *sqs.Client
	urls map[job.Tier]string
	fair Fairness
}

// NewSender returns a Sender for the queues at urls that groups jobs'
// messages by fair (a zero Fairness: a group per job).
func NewSender(client *sqs.Client, urls map[job.Tier]string, fair Fairness) *Sender {
	return &Sender{sqs: client, urls: urls, fair: fair}
}

// DedupID is the deduplication id of a job's n-th send.
func DedupID(jobID string, send int) string { return jobID + "-" + strconv.Itoa(send) }

// dedupID is m's deduplication id (and the group of a message in its own
// group): a job's send (and move), or a webhook delivery.
func dedupID(m Message) string {
	if m.Operation != "" {
		id := DedupID(m.Operation, m.Send)
		if m.Redelivery > 0 {
			id += "-r" + strconv.FormatInt(m.Redelivery, 10)
		}
		return id
	}
	if m.DeliveryID != "" {
		id := m.DeliveryID
		if m.Redelivery > 0 {
			id += "-r" + strconv.FormatInt(m.Redelivery, 10)
		}
		if m.Move > 0 {
			return id + "-m" + strconv.Itoa(m.Move)
		}
		return id
	}
	if m.Move > 0 {
		return DedupID(m.JobID, m.Send) + "-m" + strconv.Itoa(m.Move)
	}
	return DedupID(m.JobID, m.Send)
}

func (s *Sender) url(tier job.Tier) (string, error) {
	url, ok := s.urls[tier]
	if !ok {
		return "", fmt.Errorf("no queue configured for tier %q", tier)
	}
	return url, nil
}

// SendJob puts j's message (ForJob) on j's tier queue.
func (s *Sender) SendJob(ctx context.Context, j job.Job) error {
	return s.Send(ctx, j.Tier, ForJob(j))
}

// Send puts m on tier's queue, in one of its owner's slots (a group of
// its own when fairness is off for the owner). The send is a producer
// span in m's trace (its job's; ctx's when m has none), and m carries
// that span's trace context to its consumer.
func (s *Sender) Send(ctx context.Context, tier job.Tier, m Message) (err error) {
	url, err := s.url(tier)
	if err != nil {
		return err
	}
	ctx, span := telemetry.Start(telemetry.Join(ctx, m.Traceparent), "send "+queueName(url), trace.SpanKindProducer,
		attribute.String("messaging.system", "aws_sqs"), attribute.String("messaging.destination.name", queueName(url)),
		telemetry.AttrJobID.String(m.JobID))
	defer func() { telemetry.End(span, err) }()
	m.Traceparent = telemetry.Traceparent(ctx)
	body, err := json.Marshal(m)
	if err != nil {
		return err
	}
	if _, err := s.sqs.SendMessage(ctx, &sqs.SendMessageInput{
		QueueUrl:               aws.String(url),
		MessageBody:            aws.String(string(body)),
		MessageGroupId:         aws.String(s.fair.group(m)),
		MessageDeduplicationId: aws.String(dedupID(m)),
	}); err != nil {
		return fmt.Errorf("sending job %s to the %s queue: %w", m.JobID, tier, err)
	}
	return nil
}

// queueName is the last part of a queue's URL (its name).
func queueName(url string) string { return url[strings.LastIndex(url, "/")+1:] }

// MaxBatch is the most messages one SendMessageBatch takes.
const MaxBatch = 10

// SendBatch puts msgs on tier's queue, each in its group as Send does, MaxBatch per request. It returns the error of each message
// that was not sent (nil for those that were): a request that failed fails
// all of its messages, an entry SQS refused fails alone. Sending one again
// is safe: its deduplication id drops the copy for five minutes.
func (s *Sender) SendBatch(ctx context.Context, tier job.Tier, msgs []Message) []error {
	errs := make([]error, len(msgs))
	url, err := s.url(tier)
	if err != nil {
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	for start := 0; start < len(msgs); start += MaxBatch {
		chunk := msgs[start:min(start+MaxBatch, len(msgs))]
		var entries []sqstypes.SendMessageBatchRequestEntry
		for i, m := range chunk {
			if m.Traceparent == "" {
				m.Traceparent = telemetry.Traceparent(ctx)
			}
			body, err := json.Marshal(m)
			if err != nil {
				errs[start+i] = err
				continue
			}
			entries = append(entries, sqstypes.SendMessageBatchRequestEntry{
				Id:                     aws.String(strconv.Itoa(start + i)),
				MessageBody:            aws.String(string(body)),
				MessageGroupId:         aws.String(s.fair.group(m)),
				MessageDeduplicationId: aws.String(dedupID(m)),
			})
		}
		if len(entries) == 0 {
			continue
		}
		out, err := s.sqs.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(url), Entries: entries})
		if err != nil {
			for _, e := range entries {
				i, _ := strconv.Atoi(aws.ToString(e.Id))
				errs[i] = fmt.Errorf("sending job %s to the %s queue: %w", msgs[i].JobID, tier, err)
			}
			continue
		}
		answered := map[int]bool{}
		for _, ok := range out.Successful {
			i, _ := strconv.Atoi(aws.ToString(ok.Id))
			answered[i] = true
		}
		for _, f := range out.Failed {
			i, err := strconv.Atoi(aws.ToString(f.Id))
			if err != nil || i < start || i >= start+len(chunk) {
				continue
			}
			answered[i] = true
			errs[i] = fmt.Errorf("sending job %s to the %s queue: %s: %s", msgs[i].JobID, tier, aws.ToString(f.Code), aws.ToString(f.Message))
		}
		for _, e := range entries {
			if i, _ := strconv.Atoi(aws.ToString(e.Id)); !answered[i] {
				errs[i] = fmt.Errorf("sending job %s to the %s queue: no answer for the entry", msgs[i].JobID, tier)
			}
		}
	}
	return errs
}
