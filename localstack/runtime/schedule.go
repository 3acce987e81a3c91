package runtime

import (
	"context"
	"encoding/json"
	"log/slog"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/conveyor/conveyor/internal/ids"
)

// Ticker invokes a scheduled function every Interval with the event
// EventBridge Scheduler would deliver — the local twin of `rate(...)`,
// since the emulator's schedules never fire.
type Ticker struct {
	Name     string
	Interval time.Duration
	// Detail is the event's detail JSON (default {}).
	Detail string
	// Function is the scheduled function.
	Function Invoker
	Logger   *slog.Logger
}

// Run ticks until ctx ends. Runs never overlap within one Ticker (in AWS
// they may, and the handlers are written for that).
func (t *Ticker) Run(ctx context.Context) {
	log := t.Logger
	if log == nil {
		log = slog.Default()
	}
	detail := t.Detail
	if detail == "" {
		detail = "{}"
	}
	tick := time.NewTicker(t.Interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			ev := events.EventBridgeEvent{
				Version: "0", ID: ids.New("evt"), DetailType: "Scheduled Event", Source: "aws.scheduler",
				AccountID: "123456789012", Time: now.UTC(), Region: "us-east-1",
				Resources: []string{"arn:aws:scheduler:us-east-1:123456789012:schedule/default/" + t.Name},
				Detail:    json.RawMessage(detail),
			}
			if err := invokeJSON(ctx, t.Function, ev, nil); err != nil && ctx.Err() == nil {
				log.ErrorContext(ctx, "scheduled function failed", "schedule", t.Name, "error", err)
			}
		}
	}
}

// S3Bridge delivers the bucket's ObjectCreated notifications to their
// function. The emulator cannot invoke a Lambda, so provisioning points the
// notification at a standard queue; the bridge reads the genuine S3 event
// records from it and invokes the function, deleting a message only after
// the function succeeded (S3 → Lambda is asynchronous and retried too).
type S3Bridge struct {
	SQS      *sqs.Client
	QueueURL string
	// Function is the notified function.
	Function Invoker
	Logger   *slog.Logger
}

// Run delivers until ctx ends.
func (b *S3Bridge) Run(ctx context.Context) {
	log := b.Logger
	if log == nil {
		log = slog.Default()
	}
	for ctx.Err() == nil {
		out, err := b.SQS.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(b.QueueURL), MaxNumberOfMessages: 10, WaitTimeSeconds: 1,
		})
		if err != nil {
			if ctx.Err() == nil {
				log.WarnContext(ctx, "reading S3 notifications failed", "error", err)
				sleep(ctx, time.Second)
			}
			continue
		}
		for _, m := range out.Messages {
			var ev events.S3Event
			if err := json.Unmarshal([]byte(aws.ToString(m.Body)), &ev); err != nil || len(ev.Records) == 0 {
				// s3:TestEvent and anything that is no event: drop it.
				_, _ = b.SQS.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(b.QueueURL), ReceiptHandle: m.ReceiptHandle})
				continue
			}
			// The genuine event, byte for byte, as S3 would deliver it.
			if _, err := b.Function.Invoke(ctx, []byte(aws.ToString(m.Body))); err != nil {
				log.WarnContext(ctx, "S3 notification handler failed; it will be retried", "error", err)
				continue
			}
			_, _ = b.SQS.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(b.QueueURL), ReceiptHandle: m.ReceiptHandle})
		}
	}
}
