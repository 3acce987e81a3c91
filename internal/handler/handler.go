// Package handler holds the Lambda-facing handlers of every function: each
// decodes its trigger's event, calls the domain and encodes the answer. The
// functions' main packages and the local runtime call exactly these.
package handler

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/conveyor/conveyor/internal/breaker"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/metrics"
	"github.com/conveyor/conveyor/internal/publish"
	"github.com/conveyor/conveyor/internal/queue"
	"github.com/conveyor/conveyor/internal/recovery"
	"github.com/conveyor/conveyor/internal/resources"
	"github.com/conveyor/conveyor/internal/retry"
	"github.com/conveyor/conveyor/internal/uploads"
	"github.com/conveyor/conveyor/internal/webhook"
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

// GroupConcurrency bounds how many message groups of one batch a consumer
// works on at once.
const GroupConcurrency = 10

// consumeFIFO runs process over a FIFO batch the way FIFO rules allow:
// message groups in parallel (at most GroupConcurrency), each group's
// messages in order; once a message of a group is not done, it and every
// later message of that group are reported failed. process returns whether
// the message may be deleted.
func consumeFIFO(ctx context.Context, ev events.SQSEvent, process func(context.Context, events.SQSMessage) bool) events.SQSEventResponse {
	var order []string
	groups := map[string][]events.SQSMessage{}
	for _, m := range ev.Records {
		g := m.Attributes["MessageGroupId"]
		if _, ok := groups[g]; !ok {
			order = append(order, g)
		}
		groups[g] = append(groups[g], m)
	}
	failed := make([][]string, len(order))
	sem := make(chan struct{}, GroupConcurrency)
	var wg sync.WaitGroup
	for i, g := range order {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			broken := false
			for _, m := range groups[g] {
				if broken || ctx.Err() != nil || !process(ctx, m) {
					broken = true
					failed[i] = append(failed[i], m.MessageId)
				}
			}
		})
	}
	wg.Wait()
	var resp events.SQSEventResponse
	for _, ids := range failed {
		for _, id := range ids {
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: id})
		}
	}
	return resp
}

// delay makes a message visible again after d (at least the next second).
func delay(ctx context.Context, client *sqs.Client, urls QueueURLs, m events.SQSMessage, d time.Duration, log *slog.Logger) {
	url := urls.forARN(m.EventSourceARN)
	if url == "" {
		return
	}
	if _, err := client.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{
		QueueUrl: aws.String(url), ReceiptHandle: aws.String(m.ReceiptHandle), VisibilityTimeout: retry.VisibilityFor(d),
	}); err != nil {
		log.WarnContext(ctx, "could not delay the message", "message_id", m.MessageId, "error", err)
	}
}

// Publisher is the publisher function, consuming the publish tiers' FIFO
// queues with ReportBatchItemFailures. Each job is its own message group,
// so the jobs of a batch run in parallel; a job that must wait (backoff,
// circuit open) gets its message's visibility set to the wait and is
// reported failed, so SQS hands it back when it is due.
func Publisher(pub *publish.Publisher, client *sqs.Client, urls QueueURLs, log *slog.Logger) func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) {
	return func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		// The batch's outcomes reach the hourly counters in one write.
		defer func() {
			if err := pub.Flush(ctx); err != nil {
				log.WarnContext(ctx, "counting finished jobs failed; kept for the next batch", "error", err)
			}
		}()
		return consumeFIFO(ctx, ev, func(ctx context.Context, m events.SQSMessage) bool {
			msg, err := queue.Decode(m.Body)
			if err != nil {
				// A message no consumer can read: drop it, loudly.
				log.ErrorContext(ctx, "dropping unreadable message", "message_id", m.MessageId, "error", err)
				return true
			}
			receives, _ := strconv.Atoi(m.Attributes["ApproximateReceiveCount"])
			v, err := pub.Run(ctx, publish.Delivery{JobID: msg.JobID, Receives: receives})
			switch {
			case err != nil:
				log.WarnContext(ctx, "job run failed; the message comes back", "job_id", msg.JobID, "error", err)
				return false
			case !v.Done:
				delay(ctx, client, urls, m, v.RetryIn, log)
				return false
			}
			return true
		}), nil
	}
}

// Sweeper is what the recovery function runs.
type Sweeper interface {
	Run(ctx context.Context) (recovery.Result, error)
	ReleaseScheduled(ctx context.Context) (recovery.Result, error)
}

// Relayer moves events from the outbox to the bus.
type Relayer interface {
	Run(ctx context.Context) (int, error)
}

// BreakerGauge reports which circuits are open (breaker.Breaker).
type BreakerGauge interface {
	ReportOpen(ctx context.Context, s breaker.Sink) (int, error)
}

// Recovery is the scheduled recovery function. The schedule's detail names
// the task: "release" (every minute: scheduled jobs whose time came) or
// "recover" (stuck jobs and retention; the default). Both also drain the
// event outbox and send the breakers' open gauge.

func Recovery(s Sweeper, relay Relayer, breakers BreakerGauge, emf *metrics.Emitter, log *slog.Logger) func(context.Context, events.EventBridgeEvent) error {
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
		// Both schedules also drain the event outbox (events reach the bus
		// within a minute; SSE clients read the event log directly).
		relayed, rerr := relay.Run(ctx)
		if rerr != nil {
			log.WarnContext(ctx, "relaying events failed; they stay in the outbox", "error", rerr)
		}
		// The breaker gauge: an open circuit keeps its alarm up between
		// transitions (one datapoint per open host circuit per run).
		if _, berr := breakers.ReportOpen(ctx, emf); berr != nil {
			log.WarnContext(ctx, "reading the breakers for their gauge failed", "error", berr)
		}
		emf.Emit(map[string]float64{"Orphans": float64(res.Orphans), "Requeued": float64(res.Requeued),
			"FailedStuck": float64(res.FailedStuck), "Staled": float64(res.Staled), "Released": float64(res.Released), "EventsRelayed": float64(relayed)}, nil)
		log.InfoContext(ctx, "scheduled task done", "task", detail.Task, "released", res.Released, "orphans", res.Orphans,
			"requeued", res.Requeued, "failed_stuck", res.FailedStuck, "staled", res.Staled)
		return nil
	}
}

// Deliverer makes one webhook delivery attempt.
type Deliverer interface {
	Deliver(ctx context.Context, m queue.Message, attempt int) (webhook.Verdict, error)
}

// System is the system tier's consumer: webhook deliveries now, e-mail and
// billing work later (unknown kinds are dropped loudly). A delivery to
// retry gets its message delayed by the backoff and is reported failed.
func System(d Deliverer, client *sqs.Client, urls QueueURLs, log *slog.Logger) func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) {
	return func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		return consumeFIFO(ctx, ev, func(ctx context.Context, m events.SQSMessage) bool {
			msg, err := queue.Decode(m.Body)
			if err != nil || msg.Kind != queue.KindWebhook {
				log.ErrorContext(ctx, "dropping a system message no consumer knows", "message_id", m.MessageId, "kind", msg.Kind, "error", err)
				return true
			}
			attempt, _ := strconv.Atoi(m.Attributes["ApproximateReceiveCount"])
			v, err := d.Deliver(ctx, msg, max(attempt, 1))
			switch {
			case err != nil:
				log.WarnContext(ctx, "delivery could not be recorded; the message comes back", "job_id", msg.JobID, "error", err)
				return false
			case !v.Done:
				delay(ctx, client, urls, m, v.RetryIn, log)
				return false
			}
			return true
		}), nil
	}
}

// StreamServer is the SSE server.
type StreamServer interface {
	Open(ctx context.Context, owner, jobID string) (*job.Job, error)
	Stream(ctx context.Context, w io.Writer, flush func(), owner, jobID, lastEventID string) error
}

// Stream is the SSE function behind a Lambda function URL in
// response-streaming mode: it checks the token, then streams into the
// response body until the client disconnects (the context ends).
func Stream(srv StreamServer, verify func(string) (string, error), log *slog.Logger) func(context.Context, events.LambdaFunctionURLRequest) (*events.LambdaFunctionURLStreamingResponse, error) {
	jsonErr := func(status int, code, msg string) *events.LambdaFunctionURLStreamingResponse {
		b, _ := json.Marshal(map[string]any{"error": map[string]string{"code": code, "message": msg}})
		return &events.LambdaFunctionURLStreamingResponse{StatusCode: status, Headers: map[string]string{"Content-Type": "application/json"}, Body: strings.NewReader(string(b))}
	}
	return func(ctx context.Context, req events.LambdaFunctionURLRequest) (*events.LambdaFunctionURLStreamingResponse, error) {
		header := func(name string) string {
			for k, v := range req.Headers {
				if strings.EqualFold(k, name) {
					return v
				}
			}
			return ""
		}
		owner, err := verify(header("Authorization"))
		if err != nil {
			return jsonErr(401, "unauthorized", "a valid bearer token is required"), nil
		}
		path := req.RawPath
		jobID := ""
		switch {
		case path == "/v1/events":
		case strings.HasPrefix(path, "/v1/jobs/") && strings.HasSuffix(path, "/events"):
			jobID = strings.TrimSuffix(strings.TrimPrefix(path, "/v1/jobs/"), "/events")
			if _, err := srv.Open(ctx, owner, jobID); err != nil {
				return jsonErr(404, "not_found", "no such resource"), nil
			}
		default:
			return jsonErr(404, "not_found", "no such resource"), nil
		}
		pr, pw := io.Pipe()
		go func() {
			err := srv.Stream(ctx, pw, nil, owner, jobID, header("Last-Event-ID"))
			if err != nil && ctx.Err() == nil {
				log.WarnContext(ctx, "stream ended", "error", err)
			}
			pw.CloseWithError(err)
		}()
		return &events.LambdaFunctionURLStreamingResponse{StatusCode: 200, Body: pr,
			Headers: map[string]string{"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}}, nil
	}
}
