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
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/conveyor/conveyor/internal/auth"
	"github.com/conveyor/conveyor/internal/breaker"
	"github.com/conveyor/conveyor/internal/metrics"
	"github.com/conveyor/conveyor/internal/publish"
	"github.com/conveyor/conveyor/internal/queue"
	"github.com/conveyor/conveyor/internal/recovery"
	"github.com/conveyor/conveyor/internal/relay"
	"github.com/conveyor/conveyor/internal/resources"
	"github.com/conveyor/conveyor/internal/retry"
	"github.com/conveyor/conveyor/internal/schedule"
	"github.com/conveyor/conveyor/internal/stream"
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

// BreakerGauge reports which circuits are open (breaker.Breaker).
type BreakerGauge interface {
	ReportOpen(ctx context.Context, s breaker.Sink) (int, error)
}

// Firer submits a recurring schedule's job for one tick.
type Firer interface {
	Fire(ctx context.Context, t schedule.Tick) (schedule.FireResult, error)
}

// Recovery is the scheduled recovery function. The schedule's detail names
// the task: "release" (every minute: scheduled jobs whose time came),
// "schedule" (a user's recurring schedule ticked: submit its job) or
// "recover" (stuck jobs and retention; the default). Release and recover
// also send the breakers' open gauge.
func Recovery(s Sweeper, breakers BreakerGauge, ticks Firer, emf *metrics.Emitter, log *slog.Logger) func(context.Context, events.EventBridgeEvent) error {
	return func(ctx context.Context, ev events.EventBridgeEvent) error {
		var detail struct {
			Task string `json:"task"`
		}
		_ = json.Unmarshal(ev.Detail, &detail)
		if detail.Task == schedule.TaskTick {
			return tick(ctx, ticks, ev, log)
		}
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
		// The breaker gauge: an open circuit keeps its alarm up between
		// transitions (one datapoint per open host circuit per run).
		if _, berr := breakers.ReportOpen(ctx, emf); berr != nil {
			log.WarnContext(ctx, "reading the breakers for their gauge failed", "error", berr)
		}
		emf.Emit(map[string]float64{"Orphans": float64(res.Orphans), "Requeued": float64(res.Requeued),
			"FailedStuck": float64(res.FailedStuck), "Staled": float64(res.Staled), "Released": float64(res.Released)}, nil)
		log.InfoContext(ctx, "scheduled task done", "task", detail.Task, "released", res.Released, "orphans", res.Orphans,
			"requeued", res.Requeued, "failed_stuck", res.FailedStuck, "staled", res.Staled)
		return nil
	}
}

// Relayer relays a stream batch of event items to the bus.
type Relayer interface {
	Handle(ctx context.Context, batch events.DynamoDBEvent) (events.DynamoDBEventResponse, relay.Result)
}

// Relay is the relay function, fed by the DynamoDB Streams event source
// mapping on the table (filtered to new event items, with
// ReportBatchItemFailures): it answers the records to retry, so the
// mapping resumes at the first of them. It never returns an error for a
// record; an error would make the mapping retry (and bisect) the batch.
func Relay(r Relayer, emf *metrics.Emitter, log *slog.Logger) func(context.Context, events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
	return func(ctx context.Context, batch events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
		resp, res := r.Handle(ctx, batch)
		emf.Emit(map[string]float64{"EventsRelayed": float64(res.Relayed), "EventsFailed": float64(res.Failed),
			"WebhooksQueued": float64(res.Webhooks), "EventLagMaxMs": float64(res.MaxLag.Milliseconds())}, nil)
		log.InfoContext(ctx, "relayed a stream batch", "records", len(batch.Records), "relayed", res.Relayed,
			"failed", res.Failed, "ignored", res.Ignored, "webhooks", res.Webhooks, "max_lag_ms", res.MaxLag.Milliseconds())
		return resp, nil
	}
}

// tick fires a user's schedule. An error makes Scheduler retry the
// invocation; the tick is idempotent, so a retry creates no second job.
func tick(ctx context.Context, ticks Firer, ev events.EventBridgeEvent, log *slog.Logger) error {
	var d schedule.TickDetail
	if err := json.Unmarshal(ev.Detail, &d); err != nil {
		log.ErrorContext(ctx, "dropping an unreadable schedule tick", "error", err)
		return nil
	}
	at, err := time.Parse(time.RFC3339, d.At)
	if err != nil {
		log.ErrorContext(ctx, "dropping a schedule tick without its time", "schedule_id", d.ScheduleID, "at", d.At)
		return nil
	}
	if ticks == nil {
		return errors.New("this function has no schedules wired")
	}
	res, err := ticks.Fire(ctx, schedule.Tick{ScheduleID: d.ScheduleID, Owner: d.Owner, At: at})
	if err != nil {
		return err
	}
	log.InfoContext(ctx, "schedule ticked", "schedule_id", d.ScheduleID, "tick", at, "job_id", res.JobID, "created", res.Created, "skipped", res.Skipped)
	return nil
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

// StreamSession is an opened SSE stream (stream.Session).
type StreamSession interface {
	Run(ctx context.Context, w io.Writer, flush func()) error
	Close()
}

// StreamOpener opens a stream for a request, before any header is sent:
// stream.ErrNotFound, stream.ErrTooMany or another error.
type StreamOpener func(ctx context.Context, req stream.Request) (StreamSession, error)

// OpenStreams adapts a stream.Server.
func OpenStreams(s *stream.Server) StreamOpener {
	return func(ctx context.Context, req stream.Request) (StreamSession, error) { return s.Open(ctx, req) }
}

// Stream is the SSE function behind a Lambda function URL in
// response-streaming mode, and the only way into the streams: it checks
// the token and the route's role (admin streams need admin or service),
// opens the stream (404 for a job the caller may not see, 429 beyond the
// caller's open streams), then streams into the response body until the
// client disconnects (the context ends).
func Stream(open StreamOpener, verify func(string) (auth.Claims, error), log *slog.Logger) func(context.Context, events.LambdaFunctionURLRequest) (*events.LambdaFunctionURLStreamingResponse, error) {
	jsonErr := func(status int, code, msg string) *events.LambdaFunctionURLStreamingResponse {
		b, _ := json.Marshal(map[string]any{"error": map[string]string{"code": code, "message": msg}})
		h := map[string]string{"Content-Type": "application/json"}
		if status == http.StatusTooManyRequests {
			h["Retry-After"] = "5"
		}
		return &events.LambdaFunctionURLStreamingResponse{StatusCode: status, Headers: h, Body: strings.NewReader(string(b))}
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
		claims, err := verify(header("Authorization"))
		if err != nil {
			return jsonErr(http.StatusUnauthorized, "unauthorized", "a valid bearer token is required"), nil
		}
		path := req.RawPath
		sr := stream.Request{Caller: claims.Subject, LastEventID: header("Last-Event-ID")}
		jobEvents := func(prefix string) (string, bool) {
			rest, ok := strings.CutPrefix(path, prefix)
			if !ok {
				return "", false
			}
			id, ok := strings.CutSuffix(rest, "/events")
			return id, ok && id != "" && !strings.Contains(id, "/")
		}
		switch {
		case path == "/v1/events":
		case path == "/v1/admin/events":
			sr.Admin = true
		default:
			if id, ok := jobEvents("/v1/admin/jobs/"); ok {
				sr.JobID, sr.Admin = id, true
			} else if id, ok := jobEvents("/v1/jobs/"); ok {
				sr.JobID = id
			} else {
				return jsonErr(http.StatusNotFound, "not_found", "no such resource"), nil
			}
		}
		if method := req.RequestContext.HTTP.Method; method != "" && method != http.MethodGet {
			return jsonErr(http.StatusMethodNotAllowed, "method_not_allowed", "the event streams answer GET only"), nil
		}
		if sr.Admin && claims.Role != auth.RoleAdmin && claims.Role != auth.RoleService {
			return jsonErr(http.StatusForbidden, "forbidden", "the admin event streams need an admin or service token"), nil
		}
		sess, err := open(ctx, sr)
		switch {
		case errors.Is(err, stream.ErrNotFound):
			return jsonErr(http.StatusNotFound, "not_found", "no such resource"), nil
		case errors.Is(err, stream.ErrTooMany):
			return jsonErr(http.StatusTooManyRequests, "too_many_streams", "this user already has the most open event streams allowed; close one and retry"), nil
		case err != nil:
			log.ErrorContext(ctx, "opening a stream failed", "error", err)
			return jsonErr(http.StatusInternalServerError, "internal", "could not open the stream"), nil
		}
		pr, pw := io.Pipe()
		go func() {
			err := sess.Run(ctx, pw, nil)
			if err != nil && ctx.Err() == nil {
				log.WarnContext(ctx, "stream ended", "error", err)
			}
			pw.CloseWithError(err)
		}()
		return &events.LambdaFunctionURLStreamingResponse{StatusCode: http.StatusOK, Body: pr,
			Headers: map[string]string{"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}}, nil
	}
}
