package handler

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/conveyor/conveyor/internal/aws/queue"
	"github.com/conveyor/conveyor/internal/retry"
	"github.com/conveyor/conveyor/internal/telemetry"
)

// SQSHandler is the handler of a queue consumer (the publisher, system):
// an event source mapping's batch in, the messages to retry out
// (ReportBatchItemFailures).
type SQSHandler = func(context.Context, events.SQSEvent) (events.SQSEventResponse, error)

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

// VisibilityChanger is the part of the SQS client a consumer uses
// (queue.Consumer): Delay changes a message's visibility; a message that
// must wait leaves its owner's slot by a send into its job's own group
// (queue.MoveOut).
type VisibilityChanger = queue.Consumer

// GroupConcurrency bounds how many message groups of one batch a consumer
// works on at once.
const GroupConcurrency = 10

// ConsumeFIFO runs process over a FIFO batch the way FIFO rules allow:
// message groups in parallel (at most GroupConcurrency), each group's
// messages in order; once a message of a group is not done, it and every
// later message of that group are reported failed. process returns whether
// the message may be deleted.
func ConsumeFIFO(ctx context.Context, ev events.SQSEvent, process func(context.Context, events.SQSMessage) bool) events.SQSEventResponse {
	order, groups := fifoGroups(ev)
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

// fifoGroups splits a batch by message group: the groups in the order
// their first message comes, and each group's messages in order.
func fifoGroups(ev events.SQSEvent) (order []string, groups map[string][]events.SQSMessage) {
	groups = map[string][]events.SQSMessage{}
	for _, m := range ev.Records {
		g := m.Attributes["MessageGroupId"]
		if _, ok := groups[g]; !ok {
			order = append(order, g)
		}
		groups[g] = append(groups[g], m)
	}
	return order, groups
}

// Delay makes a message visible again after d (at least the next second);
// a failure is logged: the message then comes back at its queue's
// visibility timeout.
func Delay(ctx context.Context, client VisibilityChanger, urls QueueURLs, m events.SQSMessage, d time.Duration, log *slog.Logger) {
	url := urls.forARN(m.EventSourceARN)
	if url == "" {
		return
	}
	if err := queue.Delay(ctx, client, url, m.ReceiptHandle, retry.VisibilityFor(d)); err != nil {
		log.WarnContext(ctx, "could not delay the message", "message_id", m.MessageId, "error", err)
	}
}

// Outcome is what a consumer made of one message: Done deletes it;
// Readmit sends it back to the owner's slot it was moved out of, then
// deletes it; else it comes back after RetryIn (Delay) and is reported
// failed. Next, when set, is the message a wait moves out of its owner's
// slot instead of the one received (a delivery's count of attempts and
// due time travel in its body).
type Outcome struct {
	Done    bool
	RetryIn time.Duration
	Readmit bool
	Next    *queue.Message
}

// ConsumeMessages is ConsumeFIFO for the queues' own messages: each body is
// decoded, and one that does not decode or that accept refuses is dropped
// loudly (no consumer could ever read it); run gets the message and its
// receive count (ApproximateReceiveCount; 0 when absent). An error from
// run leaves the message to come back at the queue's visibility timeout
// (after ErrorBackoff in an owner's slot); an Outcome not Done delays it; a
// message never run comes back after SkippedVisibility.
//
// A message in an owner's slot (queue.Fairness), shared with the owner's
// other jobs, never waits there: before it would, it moves into its job's
// own group (a copy sent, the original deleted), where it waits alone;
// once due, it goes back to that slot (Readmit) before its job runs.
func ConsumeMessages(ctx context.Context, ev events.SQSEvent, client VisibilityChanger, urls QueueURLs, log *slog.Logger,
	accept func(queue.Message) bool, run func(context.Context, queue.Message, int) (Outcome, error)) events.SQSEventResponse {
	var handled sync.Map // message ids whose visibility was decided by their run
	resp := ConsumeFIFO(ctx, ev, func(ctx context.Context, m events.SQSMessage) bool {
		handled.Store(m.MessageId, true)
		msg, err := queue.Decode(m.Body)
		if err != nil || !accept(msg) {
			log.ErrorContext(ctx, "dropping a message no consumer can read", "message_id", m.MessageId, "kind", msg.Kind, "error", err)
			return true
		}
		receives, _ := strconv.Atoi(m.Attributes["ApproximateReceiveCount"])
		ctx, span := consumerSpan(ctx, m, msg, receives)
		out, err := run(ctx, msg, receives)
		span.SetAttributes(attribute.Bool("conveyor.done", out.Done))
		telemetry.End(span, err)
		shared := queue.IsOwnerGroup(m.Attributes["MessageGroupId"])
		switch {
		case err != nil:
			log.WarnContext(ctx, "the message comes back: its work failed", "job_id", msg.JobID, "kind", msg.Kind, "error", err)
			if shared {
				// Its owner's slot waits behind it: back soon, not at the
				// queue's visibility timeout. Receives still count toward
				// the DLQ, so a failure that lasts ends there.
				Delay(ctx, client, urls, m, ErrorBackoff, log)
			}
			return false
		case out.Readmit: // only for a message that Waits
			if err := queue.Readmit(ctx, client, urls.forARN(m.EventSourceARN), msg); err != nil {
				log.WarnContext(ctx, "could not send a due message back to its owner's slot; it comes back", "job_id", msg.JobID, "error", err)
				Delay(ctx, client, urls, m, ErrorBackoff, log)
				return false
			}
			return true
		case !out.Done && shared:
			url := urls.forARN(m.EventSourceARN)
			next := msg
			if out.Next != nil {
				next = *out.Next
			}
			if err := queue.MoveOut(ctx, client, url, next, m.Attributes["MessageGroupId"]); err != nil {
				log.WarnContext(ctx, "could not move a waiting message out of its owner's slot; it waits there", "job_id", msg.JobID, "error", err)
				Delay(ctx, client, urls, m, out.RetryIn, log)
				return false
			}
			return true
		case !out.Done:
			Delay(ctx, client, urls, m, out.RetryIn, log)
			return false
		}
		return true
	})
	// A message never run (behind one of its group that did not finish,
	// or once the invocation's time was up) comes back promptly, not at
	// the queue's visibility timeout: its group would wait that long.
	byID := map[string]events.SQSMessage{}
	for _, m := range ev.Records {
		byID[m.MessageId] = m
	}
	for _, f := range resp.BatchItemFailures {
		if _, ok := handled.Load(f.ItemIdentifier); !ok {
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
			Delay(dctx, client, urls, byID[f.ItemIdentifier], SkippedVisibility, log)
			cancel()
		}
	}
	return resp
}

// consumerSpan starts the span of one message's work, in the trace the
// message carries (its job's), with the job named on every log line.
func consumerSpan(ctx context.Context, m events.SQSMessage, msg queue.Message, receives int) (context.Context, trace.Span) {
	q := m.EventSourceARN[strings.LastIndex(m.EventSourceARN, ":")+1:]
	ctx = telemetry.WithJobID(telemetry.WithTraceparent(ctx, msg.Traceparent), msg.JobID)
	return telemetry.Start(ctx, "process "+q, trace.SpanKindConsumer,
		attribute.String("messaging.system", "aws_sqs"), attribute.String("messaging.destination.name", q),
		attribute.String("messaging.message.id", m.MessageId), attribute.Int("messaging.sqs.receive_count", receives),
		telemetry.AttrJobID.String(msg.JobID), attribute.String("conveyor.message.kind", msg.Kind))
}

// ErrorBackoff is when a message whose work failed (its outcome could not
// be recorded) comes back when it holds an owner's slot, which the owner's
// other jobs wait behind.
const ErrorBackoff = 5 * time.Second

// SkippedVisibility is when a message of a batch that was never run
// becomes visible again.
const SkippedVisibility = time.Second
