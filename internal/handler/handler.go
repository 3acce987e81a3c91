// Package handler holds the Lambda-facing handlers of every function: each
// decodes its trigger's event, calls the domain and encodes the answer. The
// functions' main packages and the local runtime call exactly these.
package handler

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/url"
	"strings"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/conveyor/conveyor/internal/metrics"
	"github.com/conveyor/conveyor/internal/publish"
	"github.com/conveyor/conveyor/internal/queue"
	"github.com/conveyor/conveyor/internal/recovery"
	"github.com/conveyor/conveyor/internal/resources"
	"github.com/conveyor/conveyor/internal/retry"
	"github.com/conveyor/conveyor/internal/uploads"
)

// Confirm is the confirm function: it settles the upload of every object
// in an S3 ObjectCreated event. An error makes S3/Lambda retry the event.
func Confirm(svc *uploads.Service) func(context.Context, events.S3Event) error {
	return func(ctx context.Context, ev events.S3Event) error {
		var errs []error
		for _, rec := range ev.Records {
			if !strings.HasPrefix(rec.EventName, "ObjectCreated:") && !strings.HasPrefix(rec.EventName, "s3:ObjectCreated:") {
				continue
			}
			key, err := url.QueryUnescape(rec.S3.Object.Key) // S3 event keys are URL-encoded
			if err != nil {
				key = rec.S3.Object.Key
			}
			if _, err := svc.ObjectCreated(ctx, rec.S3.Bucket.Name, key); err != nil {
				errs = append(errs, err)
			}
		}
		return errors.Join(errs...)
	}
}

// QueueURLs resolves a queue's URL from its name (the last part of both the
// ARN and the URL), as a consumer needs it for ChangeMessageVisibility.
type QueueURLs map[string]string

// NewQueueURLs indexes urls by queue name.
func NewQueueURLs(urls ...string) QueueURLs {
	m := QueueURLs{}
	for _, u := range urls {
		m[u[strings.LastIndex(u, "/")+1:]] = u
	}
	return m
}

func (q QueueURLs) forARN(arn string) string { return q[arn[strings.LastIndex(arn, ":")+1:]] }

// Publisher is the publisher function, consuming the publish tiers' FIFO
// queues with ReportBatchItemFailures. Records are handled in order; once a
// message of a message group fails, it and every later message of that
// group in the batch are reported failed, keeping FIFO order. A job that
// must wait (backoff, circuit open) gets its message's visibility set to
// the wait and is reported failed, so SQS hands it back when it is due.
func Publisher(pub *publish.Publisher, client *sqs.Client, urls QueueURLs, log *slog.Logger) func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) {
	return func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		var resp events.SQSEventResponse
		failedGroups := map[string]bool{}
		fail := func(m events.SQSMessage) {
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: m.MessageId})
			failedGroups[m.Attributes["MessageGroupId"]] = true
		}
		for _, m := range ev.Records {
			if g := m.Attributes["MessageGroupId"]; failedGroups[g] {
				fail(m)
				continue
			}
			msg, err := queue.Decode(m.Body)
			if err != nil {
				// A message no consumer can read: drop it, loudly.
				log.ErrorContext(ctx, "dropping unreadable message", "message_id", m.MessageId, "error", err)
				continue
			}
			if ctx.Err() != nil {
				fail(m)
				continue
			}
			v, err := pub.Run(ctx, msg.JobID)
			switch {
			case err != nil:
				log.WarnContext(ctx, "job run failed; the message comes back", "job_id", msg.JobID, "error", err)
				fail(m)
			case !v.Done:
				if url := urls.forARN(m.EventSourceARN); url != "" {
					if _, err := client.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{
						QueueUrl: aws.String(url), ReceiptHandle: aws.String(m.ReceiptHandle),
						VisibilityTimeout: retry.VisibilityFor(v.RetryIn),
					}); err != nil {
						log.WarnContext(ctx, "could not delay the message", "job_id", msg.JobID, "error", err)
					}
				}
				fail(m)
			}
		}
		return resp, nil
	}
}

// Sweeper is what the recovery function runs.
type Sweeper interface {
	Run(ctx context.Context) (recovery.Result, error)
	ReleaseScheduled(ctx context.Context) (recovery.Result, error)
}

// Recovery is the scheduled recovery function. The schedule's detail names
// the task: "release" (every minute: scheduled jobs whose time came) or
// "recover" (stuck jobs and retention; the default).
func Recovery(s Sweeper, emf *metrics.Emitter, log *slog.Logger) func(context.Context, events.EventBridgeEvent) error {
	return func(ctx context.Context, ev events.EventBridgeEvent) error {
		var detail struct {
			Task string `json:"task"`
		}
		_ = json.Unmarshal(ev.Detail, &detail)
		var res recovery.Result
		var err error
		switch detail.Task {
		case resources.TaskRelease:
			res, err = s.ReleaseScheduled(ctx)
		default:
			res, err = s.Run(ctx)
		}
		if err != nil {
			return err
		}
		emf.Emit(map[string]float64{"Orphans": float64(res.Orphans), "Requeued": float64(res.Requeued),
			"FailedStuck": float64(res.FailedStuck), "Staled": float64(res.Staled), "Released": float64(res.Released)}, nil)
		log.InfoContext(ctx, "scheduled task done", "task", detail.Task, "released", res.Released, "orphans", res.Orphans,
			"requeued", res.Requeued, "failed_stuck", res.FailedStuck, "staled", res.Staled)
		return nil
	}
}
