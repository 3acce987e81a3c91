package lambdaruntime

import (
	"context"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// Poller feeds a queue's messages to a function the way Lambda's SQS event
// source mapping does: batches of up to BatchSize, the function's timeout
// as the invocation deadline, whole-batch retry when the handler errors, and
// with ReportBatchItemFailures only the reported messages left in the queue
// (they come back after their visibility timeout; the DLQ takes them after
// maxReceiveCount receives). Workers run like concurrent Lambda instances;
// FIFO group order is the queue's own (an in-flight message holds its group).
type Poller struct {
	// SQS is the client; QueueURL and QueueARN name the queue.
	SQS      *sqs.Client
	QueueURL string
	QueueARN string
	Region   string
	// BatchSize is the most messages per invocation (default 10).
	BatchSize int
	// Concurrency is how many invocations may run at once (default 2).
	Concurrency int
	// MinPollers is how many workers long-poll the queue even while it is
	// idle (default 1, at most Concurrency). Lambda's SQS event source
	// mapping keeps five pollers on a queue, so that messages arriving one
	// at a time are received one at a time (five receives wait for them);
	// one poller lets them gather into batches between receives, which
	// makes fewer receives and deletes per message than AWS does.
	MinPollers int
	// Timeout is the function's timeout (default 2m).
	Timeout time.Duration
	// Wait is the long-poll wait per receive (default 1s, short so that
	// shutdown is quick).
	Wait time.Duration
	// Paused, when it returns true, stops receiving — the local twin of a
	// disabled event source mapping. Nil means never paused.
	Paused func(context.Context) bool
	// Function is the consumer function.
	Function Invoker
	// Logger defaults to slog.Default().
	Logger *slog.Logger

	// busy counts the workers between their Paused check and the end of
	// the receive (and invocation) it allowed.
	busy atomic.Int32
	// running counts the workers not waiting for a wake; invoking those
	// handing a batch to the function; wake wakes a waiting worker.
	running, invoking atomic.Int32
	wake              chan struct{}
}

// Receiving reports how many workers are receiving or handing a batch to
// the function, or are about to after finding the queue not paused. Once
// Paused answers true, a Receiving of 0 means no message can reach the
// function any more: a test waits for it instead of sleeping.
func (p *Poller) Receiving() int { return int(p.busy.Load()) }

// Run polls until ctx ends.
func (p *Poller) Run(ctx context.Context) {
	if p.BatchSize == 0 {
		p.BatchSize = 10
	}
	if p.Concurrency == 0 {
		p.Concurrency = 2
	}
	if p.Timeout == 0 {
		p.Timeout = 2 * time.Minute
	}
	if p.Wait == 0 {
		p.Wait = time.Second
	}
	if p.Logger == nil {
		p.Logger = slog.Default()
	}
	p.MinPollers = min(max(p.MinPollers, 1), p.Concurrency)
	// Like the event source mapping, poll with one worker while the queue
	// is idle and add workers while receives come back with messages: an
	// idle queue costs one long poll per Wait, not one per worker. While
	// invocations run, one more worker keeps polling as long as there is
	// capacity (as the mapping's pollers do, apart from the invocations),
	// so a message that arrives meanwhile — another message group's — is
	// not held back until a batch ends.
	p.wake = make(chan struct{}, p.Concurrency)
	p.running.Store(int32(p.MinPollers))
	var wg sync.WaitGroup
	for i := range p.Concurrency {
		wg.Go(func() { p.worker(ctx, i < p.MinPollers) })
	}
	wg.Wait()
}

// worker polls. The first starts polling; the others wait for a wake:
// a receive that found messages, or an invocation that left no worker
// polling. A worker goes back to waiting after an empty receive when
// another worker is polling.
func (p *Poller) worker(ctx context.Context, first bool) {
	idle := !first
	for ctx.Err() == nil {
		if idle {
			select {
			case <-p.wake:
				idle = false
				p.running.Add(1)
			case <-ctx.Done():
				return
			}
		}
		p.busy.Add(1)
		if p.Paused != nil && p.Paused(ctx) {
			p.busy.Add(-1)
			sleep(ctx, p.Wait)
			continue
		}
		got, err := p.PollOnce(ctx)
		p.busy.Add(-1)
		if err != nil && ctx.Err() == nil {
			p.Logger.WarnContext(ctx, "polling failed", "queue", p.QueueURL, "error", err)
			sleep(ctx, p.Wait)
		}
		if got > 0 {
			p.wakeOne() // one more worker joins
		} else if p.running.Load()-p.invoking.Load() > int32(p.MinPollers) {
			// Enough other workers poll: this one rests.
			idle = true
			p.running.Add(-1)
		}
	}
}

// wakeOne asks an idle worker to poll.
func (p *Poller) wakeOne() {
	if p.wake == nil {
		return
	}
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// PollOnce receives one batch and invokes the function with it; it returns
// how many messages were handed over.
func (p *Poller) PollOnce(ctx context.Context) (int, error) {
	out, err := p.SQS.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
		QueueUrl:                    aws.String(p.QueueURL),
		MaxNumberOfMessages:         int32(p.BatchSize),
		WaitTimeSeconds:             int32(p.Wait / time.Second),
		MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAll},
		MessageAttributeNames:       []string{"All"},
	})
	if err != nil {
		return 0, err
	}
	if len(out.Messages) == 0 {
		return 0, nil
	}
	ev := events.SQSEvent{Records: make([]events.SQSMessage, 0, len(out.Messages))}
	for _, m := range out.Messages {
		rec := events.SQSMessage{
			MessageId: aws.ToString(m.MessageId), ReceiptHandle: aws.ToString(m.ReceiptHandle),
			Body: aws.ToString(m.Body), Md5OfBody: aws.ToString(m.MD5OfBody),
			Attributes: m.Attributes, EventSource: "aws:sqs", EventSourceARN: p.QueueARN, AWSRegion: p.Region,
			MessageAttributes: map[string]events.SQSMessageAttribute{},
		}
		for k, v := range m.MessageAttributes {
			rec.MessageAttributes[k] = events.SQSMessageAttribute{StringValue: v.StringValue, BinaryValue: v.BinaryValue, DataType: aws.ToString(v.DataType)}
		}
		ev.Records = append(ev.Records, rec)
	}
	if p.invoking.Add(1) >= p.running.Load() {
		p.wakeOne() // no worker is left polling
	}
	ictx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.Timeout)
	resp, err := p.invoke(ictx, ev)
	cancel()
	p.invoking.Add(-1)
	if err != nil {
		// Lambda retries the whole batch: leave every message in flight.
		p.Logger.WarnContext(ctx, "consumer failed; the batch returns after its visibility timeout", "queue", p.QueueURL, "error", err)
		return len(ev.Records), nil
	}
	failed := map[string]bool{}
	for _, f := range resp.BatchItemFailures {
		failed[f.ItemIdentifier] = true
	}
	var del []sqstypes.DeleteMessageBatchRequestEntry
	for i, m := range ev.Records {
		if !failed[m.MessageId] {
			del = append(del, sqstypes.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: aws.String(m.ReceiptHandle)})
		}
	}
	if len(del) > 0 {
		if _, err := p.SQS.DeleteMessageBatch(context.WithoutCancel(ctx), &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(p.QueueURL), Entries: del}); err != nil {
			return len(ev.Records), err
		}
	}
	return len(ev.Records), nil
}

// invoke calls the function with the batch.
func (p *Poller) invoke(ctx context.Context, ev events.SQSEvent) (resp events.SQSEventResponse, err error) {
	err = invokeJSON(ctx, p.Function, ev, &resp)
	return resp, err
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
