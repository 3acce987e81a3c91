package relay_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/google/go-cmp/cmp"

	"github.com/conveyor/conveyor/internal/awsclient"
	"github.com/conveyor/conveyor/internal/handler/relayfn"
	"github.com/conveyor/conveyor/internal/ids"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/metrics"
	"github.com/conveyor/conveyor/internal/queue"
	"github.com/conveyor/conveyor/internal/relay"
	"github.com/conveyor/conveyor/internal/resources"
	"github.com/conveyor/conveyor/internal/store"
	"github.com/conveyor/conveyor/localstack/awstest"
	"github.com/conveyor/conveyor/localstack/runtime"
)

func TestMain(m *testing.M) { awstest.Main(m) }

// bundle is one test's provisioned environment, with a queue subscribed to
// the bus (FIFO, one group: it keeps the order of the puts) and a stream
// poller feeding the relay as the event source mapping does.
type bundle struct {
	env      awstest.Env
	def      resources.Definition
	st       *store.Store
	busQueue string
	poller   *runtime.StreamPoller
}

func setup(t *testing.T, hooks relay.Webhooks, batchSize, maxRetries int) *bundle {
	t.Helper()
	env := awstest.Provision(t)
	def := env.Res.Definition
	ctx := context.Background()
	b := &bundle{env: env, def: def, st: store.New(env.Clients.DynamoDB, def.Table.Name, time.Now)}
	q, err := env.Clients.SQS.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(def.Prefix + "-bus-tap.fifo"),
		Attributes: map[string]string{"FifoQueue": "true", "ContentBasedDeduplication": "true"}})
	if err != nil {
		t.Fatal(err)
	}
	b.busQueue = aws.ToString(q.QueueUrl)
	pattern, _ := json.Marshal(map[string]any{"source": []string{resources.EventSource(def.Env)}})
	if _, err := env.Clients.EventBridge.PutRule(ctx, &eventbridge.PutRuleInput{Name: aws.String("tap"), EventBusName: aws.String(def.EventBus),
		EventPattern: aws.String(string(pattern))}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Clients.EventBridge.PutTargets(ctx, &eventbridge.PutTargetsInput{Rule: aws.String("tap"), EventBusName: aws.String(def.EventBus),
		Targets: []ebtypes.Target{{Id: aws.String("q"), Arn: aws.String("arn:aws:sqs:" + awstest.Config(t).Region + ":123456789012:" + def.Prefix + "-bus-tap.fifo"),
			SqsParameters: &ebtypes.SqsParameters{MessageGroupId: aws.String("all")}}}}); err != nil {
		t.Fatal(err)
	}
	var logw io.Writer = io.Discard
	if testing.Verbose() {
		logw = os.Stderr
	}
	log := slog.New(slog.NewJSONHandler(logw, nil))
	r, err := relay.New(relay.Config{Bus: env.Clients.EventBridge, BusName: def.EventBus, Source: resources.EventSource(def.Env),
		Sender: queue.NewSender(env.Clients.SQS, env.Res.QueueURLs), Webhooks: hooks, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	m := def.EventStream
	b.poller = &runtime.StreamPoller{
		Streams: awsclient.Streams(awstest.Config(t)), StreamARN: env.Res.TableStreamARN, Region: "us-east-1",
		BatchSize: batchSize, BatchingWindow: 100 * time.Millisecond, MaxRetries: maxRetries, BisectOnError: m.BisectOnError,
		StartingPosition: m.StartingPosition, Filter: m.Filter, SQS: env.Clients.SQS, FailureQueueURL: env.Res.RelayFailureQueueURL,
		Function: runtime.InProcess("relay", relayfn.Handler(r, metrics.New(io.Discard, "local", time.Now), log)),
		Timeout:  time.Minute, PollInterval: 50 * time.Millisecond, RetryWait: 20 * time.Millisecond, Logger: log,
	}
	pctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.poller.Run(pctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("poller: %v", err)
		}
	})
	return b
}

// newJob stores a new queued job (its job.enqueued event is seq 1).
func (b *bundle) newJob(t *testing.T, owner string, webhook bool) string {
	t.Helper()
	now := time.Now().UTC()
	j := &job.Job{ID: ids.New("job"), Type: "http", Status: job.Queued, Tier: string(resources.Low), Owner: owner,
		Hash: ids.New("h"), MaxAttempts: 7, CreatedAt: now, UpdatedAt: now}
	if webhook {
		j.WebhookURL = "https://hooks.example.com/x"
	}
	j.Emit(job.EventEnqueued, now, nil)
	if _, _, err := b.st.CreateJob(context.Background(), j); err != nil {
		t.Fatalf("creating a job: %v", err)
	}
	return j.ID
}

// emit appends one event to a job, in its own transaction.
func (b *bundle) emit(t *testing.T, id, typ string) {
	t.Helper()
	if _, err := b.st.UpdateJob(context.Background(), id, func(j *job.Job) error {
		j.Emit(typ, time.Now(), map[string]string{"n": fmt.Sprint(j.EventSeq + 1)})
		return nil
	}); err != nil {
		t.Errorf("emitting on %s: %v", id, err)
	}
}

// busEvent is one event as the bus delivered it to the tap queue.
type busEvent struct {
	Source     string     `json:"source"`
	DetailType string     `json:"detail-type"`
	Detail     relay.Body `json:"detail"`
}

// collect reads the tap queue until done says every expected event
// arrived (or the deadline passed), and returns each job's seqs in arrival
// order and how many events arrived.
func (b *bundle) collect(t *testing.T, done func(map[string][]int64) bool, wait time.Duration) (map[string][]int64, int) {
	t.Helper()
	got := map[string][]int64{}
	n := 0
	deadline := time.Now().Add(wait)
	for !done(got) && time.Now().Before(deadline) {
		out, err := b.env.Clients.SQS.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(b.busQueue),
			MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
		if err != nil {
			t.Fatal(err)
		}
		var del []string
		for _, m := range out.Messages {
			var ev busEvent
			if err := json.Unmarshal([]byte(aws.ToString(m.Body)), &ev); err != nil {
				t.Fatalf("a bus event that is not JSON: %v", err)
			}
			if ev.Source != resources.EventSource(b.def.Env) || ev.DetailType != ev.Detail.Type {
				t.Errorf("event %+v: source or detail-type wrong", ev)
			}
			got[ev.Detail.JobID] = append(got[ev.Detail.JobID], ev.Detail.Seq)
			n++
			del = append(del, aws.ToString(m.ReceiptHandle))
		}
		for _, h := range del {
			if _, err := b.env.Clients.SQS.DeleteMessage(context.Background(), &sqs.DeleteMessageInput{QueueUrl: aws.String(b.busQueue), ReceiptHandle: aws.String(h)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	return got, n
}

// distinct is s without repeats, in order of first arrival.
func distinct(s []int64) []int64 {
	var out []int64
	seen := map[int64]bool{}
	for _, v := range s {
		if !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	return out
}

// allOf is done when each job has its n events (distinct).
func allOf(n map[string]int) func(map[string][]int64) bool {
	return func(got map[string][]int64) bool {
		for id, k := range n {
			if len(distinct(got[id])) < k {
				return false
			}
		}
		return true
	}
}

func seqs(n int) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = int64(i + 1)
	}
	return out
}

// TestEveryEventReachesTheBusInOrderPerJob writes events for many jobs
// (many partitions) concurrently, far more than one relay batch carries,
// and sees every one on the bus exactly once, each job's in order.
func TestEveryEventReachesTheBusInOrderPerJob(t *testing.T) {
	t.Parallel()
	const jobs, perJob, batch = 24, 5, 10 // 120 events, batches of 10
	b := setup(t, relay.JobWebhooks{}, batch, 3)
	ids := make([]string, jobs)
	var wg sync.WaitGroup
	for i := range jobs {
		wg.Go(func() {
			ids[i] = b.newJob(t, fmt.Sprintf("usr_%d", i%7), false)
			for range perJob - 1 {
				b.emit(t, ids[i], job.EventProgress)
			}
		})
	}
	wg.Wait()
	want := map[string]int{}
	for _, id := range ids {
		want[id] = perJob
	}
	got, n := b.collect(t, allOf(want), 8*time.Minute)
	if n != jobs*perJob {
		t.Errorf("%d events reached the bus, want %d", n, jobs*perJob)
	}
	for _, id := range ids {
		if diff := cmp.Diff(seqs(perJob), got[id]); diff != "" {
			t.Errorf("job %s: seqs on the bus (-want +got):\n%s", id, diff)
		}
	}
	// Nothing else is queued: no failures, no webhooks.
	a, err := b.env.Clients.SQS.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{QueueUrl: aws.String(b.env.Res.RelayFailureQueueURL),
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages}})
	if err != nil {
		t.Fatal(err)
	}
	if v := a.Attributes["ApproximateNumberOfMessages"]; v != "0" {
		t.Errorf("failure queue holds %s messages, want 0", v)
	}
}

// flaky fails the deliveries of one event a number of times, then defers
// to the job's own webhook.
type flaky struct {
	mu    sync.Mutex
	jobID string
	seq   int64
	left  int
	calls int
}

func (f *flaky) Deliveries(ctx context.Context, ev store.EventRecord) ([]queue.Message, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if ev.JobID == f.jobID && ev.Seq == f.seq {
		f.calls++
		if f.left > 0 {
			f.left--
			return nil, errors.New("the webhook store is unavailable")
		}
	}
	return relay.JobWebhooks{}.Deliveries(ctx, ev)
}

// TestAFailedRecordIsRetriedFromItselfAndHoldsBackItsJob: one event's
// webhooks fail twice. The mapping resumes at that record; the later
// events of its job reach the bus only after it, other jobs' events are
// not held back, and nothing is lost.
func TestAFailedRecordIsRetriedFromItselfAndHoldsBackItsJob(t *testing.T) {
	t.Parallel()
	hooks := &flaky{seq: 3, left: 2}
	b := setup(t, hooks, 50, 5)
	// Create every job first, so the failing record sits among others.
	x := b.newJob(t, "usr_x", true)
	hooks.mu.Lock()
	hooks.jobID = x
	hooks.mu.Unlock()
	others := []string{b.newJob(t, "usr_y", false), b.newJob(t, "usr_z", false)}
	for range 4 {
		b.emit(t, x, job.EventProgress)
		for _, o := range others {
			b.emit(t, o, job.EventProgress)
		}
	}
	b.emit(t, x, job.EventSucceeded) // seq 6, triggers a webhook
	got, _ := b.collect(t, allOf(map[string]int{x: 6, others[0]: 5, others[1]: 5}), 3*time.Minute)
	// X's record 3 was put on the bus on each of its three tries (at least
	// once: consumers dedupe by id); 4 and later never before its last.
	xs := got[x]
	last3 := slices.Index(xs, 3)
	for i, s := range xs {
		if s == 3 {
			last3 = i
		}
	}
	if first4 := slices.Index(xs, 4); last3 < 0 || first4 < last3 {
		t.Errorf("job X on the bus: %v: seq 4 before the last try of seq 3", xs)
	}
	if diff := cmp.Diff(seqs(6), distinct(xs)); diff != "" {
		t.Errorf("job X's distinct seqs on the bus (-want +got):\n%s", diff)
	}
	// The other jobs went on while X's record was retried; records after
	// the failed one in its batch come again with the retry (the mapping
	// resumes at the lowest failed record), so each job's sequence may
	// repeat from a point, never skip or reorder.
	for _, o := range others {
		if diff := cmp.Diff(seqs(5), distinct(got[o])); diff != "" {
			t.Errorf("job %s on the bus (-want +got):\n%s", o, diff)
		}
	}
	hooks.mu.Lock()
	if hooks.calls != 3 {
		t.Errorf("the failing record was tried %d times, want 3", hooks.calls)
	}
	hooks.mu.Unlock()
	// The job.succeeded webhook was queued once, to the system tier.
	out, err := b.env.Clients.SQS.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(b.env.Res.QueueURLs[resources.System]), MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
	if err != nil {
		t.Fatal(err)
	}
	var msgs []queue.Message
	for _, m := range out.Messages {
		msg, err := queue.Decode(aws.ToString(m.Body))
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, msg)
	}
	want := []queue.Message{{Kind: queue.KindWebhook, JobID: x, Seq: 6, DeliveryID: fmt.Sprintf("dlv_%s_6", x)}}
	if diff := cmp.Diff(want, msgs); diff != "" {
		t.Errorf("system tier (-want +got):\n%s", diff)
	}
}

// TestAPoisonRecordGoesToTheFailureQueue: an event item no relay can
// read fails every try; once the retries are spent the mapping describes
// its batch on the failure queue (shard and sequence numbers) and the
// stream moves on.
func TestAPoisonRecordGoesToTheFailureQueue(t *testing.T) {
	t.Parallel()
	b := setup(t, relay.JobWebhooks{}, 10, 2)
	ctx := context.Background()
	poisonJob := ids.New("job")
	if _, err := b.env.Clients.DynamoDB.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(b.def.Table.Name), Item: map[string]ddbtypes.AttributeValue{
		resources.AttrPK: &ddbtypes.AttributeValueMemberS{Value: "JOB#" + poisonJob},
		resources.AttrSK: &ddbtypes.AttributeValueMemberS{Value: resources.EventSKPrefix + "000000000001"},
		"jobId":          &ddbtypes.AttributeValueMemberS{Value: poisonJob},
		"seq":            &ddbtypes.AttributeValueMemberS{Value: "not a number"},
	}}); err != nil {
		t.Fatal(err)
	}
	var f runtime.FailureRecord
	deadline := time.Now().Add(time.Minute)
	for f.BatchInfo.StartSequenceNumber == "" && time.Now().Before(deadline) {
		out, err := b.env.Clients.SQS.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(b.env.Res.RelayFailureQueueURL), WaitTimeSeconds: 1})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range out.Messages {
			if err := json.Unmarshal([]byte(aws.ToString(m.Body)), &f); err != nil {
				t.Fatal(err)
			}
		}
	}
	if f.BatchInfo.BatchSize != 1 || f.BatchInfo.StartSequenceNumber == "" || f.BatchInfo.StreamARN != b.env.Res.TableStreamARN ||
		f.RequestContext.Condition != "RetryAttemptsExhausted" || f.RequestContext.ApproximateInvokeCount != 3 {
		t.Errorf("failure record %+v: want the poison record alone, after 3 tries", f)
	}
	// The stream moved on: a later job's events arrive.
	id := b.newJob(t, "usr_after", false)
	got, _ := b.collect(t, allOf(map[string]int{id: 1}), 2*time.Minute)
	if diff := cmp.Diff(map[string][]int64{id: {1}}, got); diff != "" {
		t.Errorf("after the poison (-want +got):\n%s", diff)
	}
}
