package lambdaruntime_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/google/go-cmp/cmp"

	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/localstack/awstest"
	"github.com/conveyor/conveyor/localstack/lambdaruntime"
)

var quiet = slog.New(slog.NewJSONHandler(io.Discard, nil))

// pollerBundle is a FIFO tier queue of the test's own and a consumer
// function that records every batch and answers as fail says.
type pollerBundle struct {
	sqs *sqs.Client
	url string

	mu      sync.Mutex
	batches [][]string      // bodies, per invocation
	fail    map[string]bool // bodies to report as failed items
	crash   bool            // fail the whole invocation
	got     chan string     // every body handed over
}

func setupPoller(t *testing.T) *pollerBundle {
	t.Helper()
	env := awstest.Provision(t)
	return &pollerBundle{sqs: env.Clients.SQS, url: env.Res.QueueURLs[job.Medium], fail: map[string]bool{}, got: make(chan string, 100)}
}

func (b *pollerBundle) consume(_ context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var bodies []string
	var resp events.SQSEventResponse
	for _, r := range ev.Records {
		bodies = append(bodies, r.Body)
		if r.EventSource != "aws:sqs" || r.ReceiptHandle == "" || r.Attributes["MessageGroupId"] == "" {
			return resp, fmt.Errorf("record %s is not what Lambda hands over: %+v", r.MessageId, r)
		}
		if b.fail[r.Body] {
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: r.MessageId})
		}
		b.got <- r.Body
	}
	b.batches = append(b.batches, bodies)
	if b.crash {
		return events.SQSEventResponse{}, errors.New("the consumer crashed")
	}
	return resp, nil
}

func (b *pollerBundle) poller() *lambdaruntime.Poller {
	return &lambdaruntime.Poller{SQS: b.sqs, QueueURL: b.url, QueueARN: "arn:aws:sqs:us-east-1:123456789012:q", Region: "us-east-1",
		BatchSize: 10, Concurrency: 2, Timeout: 10 * time.Second, Wait: time.Second,
		Function: lambdaruntime.InProcess("consumer", b.consume), Logger: quiet}
}

func (b *pollerBundle) send(t *testing.T, bodies ...string) {
	t.Helper()
	for _, body := range bodies {
		if _, err := b.sqs.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: aws.String(b.url), MessageBody: aws.String(body),
			MessageGroupId: aws.String(body), MessageDeduplicationId: aws.String(body)}); err != nil {
			t.Fatal(err)
		}
	}
}

// next returns the next body handed over; it fails the test when none
// comes within a minute (a hang, not a timing the test depends on).
func (b *pollerBundle) next(t *testing.T) string {
	t.Helper()
	select {
	case got := <-b.got:
		return got
	case <-time.After(time.Minute):
		t.Fatal("nothing was handed over within a minute")
		return ""
	}
}

// depth returns the queue's visible and in-flight message counts.
func (b *pollerBundle) depth(t *testing.T) (visible, inFlight int) {
	t.Helper()
	out, err := b.sqs.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{QueueUrl: aws.String(b.url),
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages, sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible}})
	if err != nil {
		t.Fatal(err)
	}
	visible, _ = strconv.Atoi(out.Attributes[string(sqstypes.QueueAttributeNameApproximateNumberOfMessages)])
	inFlight, _ = strconv.Atoi(out.Attributes[string(sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible)])
	return visible, inFlight
}

// TestPollOnceDeletesAllButTheReportedFailures: partial batch failures, as
// Lambda's event source mapping keeps them — the failed item stays in
// flight (it returns after its visibility timeout), the rest are deleted;
// a failed invocation leaves the whole batch in flight.
func TestPollOnceDeletesAllButTheReportedFailures(t *testing.T) {
	t.Parallel()
	b := setupPoller(t)
	ctx := context.Background()
	p := b.poller()
	b.fail["b"] = true
	b.send(t, "a", "b", "c")
	n := 0
	for n < 3 { // moto may hand the three over in more than one batch
		got, err := p.PollOnce(ctx)
		if err != nil {
			t.Fatal(err)
		}
		n += got
	}
	var all []string
	for _, batch := range b.batches {
		all = append(all, batch...)
	}
	sort.Strings(all)
	if diff := cmp.Diff([]string{"a", "b", "c"}, all); diff != "" {
		t.Errorf("handed over (-want +got):\n%s", diff)
	}
	if visible, inFlight := b.depth(t); visible != 0 || inFlight != 1 {
		t.Errorf("after a partial failure: %d visible, %d in flight; want 0 and the failed one", visible, inFlight)
	}

	b.crash = true
	b.send(t, "d")
	if got, err := p.PollOnce(ctx); err != nil || got != 1 {
		t.Fatalf("PollOnce = %d, %v; want the one message handed over", got, err)
	}
	if visible, inFlight := b.depth(t); visible != 0 || inFlight != 2 {
		t.Errorf("after a crash: %d visible, %d in flight; want 0 and 2", visible, inFlight)
	}
	if got, err := p.PollOnce(ctx); err != nil || got != 0 {
		t.Errorf("an empty queue: PollOnce = %d, %v", got, err)
	}
}

// TestPausedPollerReceivesNothing: once Paused answers true and Receiving
// is 0, a message sent stays in the queue however often the workers look;
// it is handed over once the queue is resumed.
func TestPausedPollerReceivesNothing(t *testing.T) {
	t.Parallel()
	b := setupPoller(t)
	var paused atomic.Bool
	checks := make(chan struct{}, 1000)
	p := b.poller()
	p.Wait = 50 * time.Millisecond
	p.Paused = func(context.Context) bool {
		select {
		case checks <- struct{}{}:
		default:
		}
		return paused.Load()
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { p.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })

	b.send(t, "before")
	if got := b.next(t); got != "before" {
		t.Fatalf("got %q", got)
	}
	paused.Store(true)
	for p.Receiving() > 0 {
		<-checks // a worker looked at the flag again
	}
	b.send(t, "while-paused")
	// Let every worker look at the flag a few more times.
	for len(checks) > 0 {
		<-checks
	}
	for range 4 * p.Concurrency {
		<-checks
	}
	if visible, inFlight := b.depth(t); visible != 1 || inFlight != 0 {
		t.Fatalf("while paused: %d visible, %d in flight; want the message waiting", visible, inFlight)
	}
	select {
	case got := <-b.got:
		t.Fatalf("a paused poller handed %q over", got)
	default:
	}
	paused.Store(false)
	if got := b.next(t); got != "while-paused" {
		t.Fatalf("after resume got %q", got)
	}
}
