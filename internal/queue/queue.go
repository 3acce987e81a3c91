// Package queue sends work to the tier FIFO queues. A message carries ids
// only — never media or secrets. Every send of a job is its own message
// group and has its own deduplication id: one job's retries never hold back
// another's, a duplicate of one send is dropped, and a resend by recovery is
// not stuck behind the message of a worker that died (an in-flight message
// holds back its group until its visibility timeout ends). The order of a
// job's messages does not matter: the job's state in DynamoDB and the
// worker's conditional claim decide.
package queue

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/conveyor/conveyor/internal/job"
)

// Kinds of work.
const (
	// KindJob is a job of any kind on a tier queue (the job's type is on
	// the job; the value is the one from when publish was the only kind,
	// kept so that messages in flight across a deploy still read).
	KindJob = "publish"
	// KindPublish is the former name of KindJob.
	//
	// Deprecated: use KindJob.
	KindPublish = KindJob
	KindWebhook = "webhook"
)

// Message is the body of every queue message.
type Message struct {
	Kind  string `json:"kind"`
	JobID string `json:"jobId"`
	// Owner is the job's owner (a user id): with it the worker reads the
	// job and the owner's connected account in one request. Optional:
	// messages without it (sent before it existed) still work.
	Owner string `json:"owner,omitempty"`
	// Uploads are the uploads the job's items name (its media references):
	// the worker reads them with the job and the account, in the same
	// request, to describe items that submission left undescribed.
	// Optional: without it the worker reads them apart when it needs them.
	Uploads []string `json:"uploads,omitempty"`
	// Send is the job's enqueue counter at the time of sending.
	Send int `json:"send"`
	// DeliveryID names a webhook delivery (system tier).
	DeliveryID string `json:"deliveryId,omitempty"`
	// Seq is the job event a webhook delivers.
	Seq int64 `json:"seq,omitempty"`
	// Endpoint names the owner's webhook endpoint ("whe_…") a delivery
	// goes to; empty for the job's own webhookUrl.
	Endpoint string `json:"endpoint,omitempty"`
}

// ForJob is the message that sends job id of owner for the send-th time.
// ForJob is the message that sends j (as stored) to its tier queue.
func ForJob(j job.Job) Message {
	return Message{Kind: KindJob, JobID: j.ID, Owner: j.Owner, Uploads: j.MediaRefs, Send: j.Enqueues}
}

// Decode parses a message body.
func Decode(body string) (Message, error) {
	var m Message
	if err := json.Unmarshal([]byte(body), &m); err != nil {
		return Message{}, fmt.Errorf("decoding queue message: %w", err)
	}
	if m.JobID == "" {
		return Message{}, fmt.Errorf("decoding queue message: no jobId")
	}
	return m, nil
}

// Sender sends messages to the tier queues.
type Sender struct {
	sqs  *sqs.Client
	urls map[job.Tier]string
}

// NewSender returns a Sender for the queues at urls.
func NewSender(client *sqs.Client, urls map[job.Tier]string) *Sender {
	return &Sender{sqs: client, urls: urls}
}

// DedupID is the deduplication id of a job's n-th send.
func DedupID(jobID string, send int) string { return jobID + "-" + strconv.Itoa(send) }

// Send puts m on tier's queue, in the job's message group.
func (s *Sender) Send(ctx context.Context, tier job.Tier, m Message) error {
	url, ok := s.urls[tier]
	if !ok {
		return fmt.Errorf("no queue configured for tier %q", tier)
	}
	body, err := json.Marshal(m)
	if err != nil {
		return err
	}
	dedup := DedupID(m.JobID, m.Send)
	if m.DeliveryID != "" {
		dedup = m.DeliveryID
	}
	if _, err := s.sqs.SendMessage(ctx, &sqs.SendMessageInput{
		QueueUrl:               aws.String(url),
		MessageBody:            aws.String(string(body)),
		MessageGroupId:         aws.String(dedup),
		MessageDeduplicationId: aws.String(dedup),
	}); err != nil {
		return fmt.Errorf("sending job %s to the %s queue: %w", m.JobID, tier, err)
	}
	return nil
}
