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

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/google/go-cmp/cmp"

	"github.com/conveyor/conveyor/internal/aws/awsclient"
	"github.com/conveyor/conveyor/internal/aws/bus"
	"github.com/conveyor/conveyor/internal/aws/queue"
	"github.com/conveyor/conveyor/internal/aws/store"
	"github.com/conveyor/conveyor/internal/handler"
	"github.com/conveyor/conveyor/internal/ids"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/relay"
	"github.com/conveyor/conveyor/internal/resources"
	"github.com/conveyor/conveyor/localstack/awstest"
	"github.com/conveyor/conveyor/localstack/lambdaruntime"
)

func TestMain(m *testing.M) { awstest.Main(m) }

// bundle is one test's provisioned environment, with a queue subscribed to
// the bus (FIFO, one group: it keeps the order of the puts) and a stream
// poller feeding the relay as the event source mapping does.
type bundle struct {
	env awstest.Env
	// sends counts the relay's requests to SQS (its webhook sends).
	sends    *awsclient.Counter
	def      resources.Definition
	st       *store.Store
	busQueue string
	poller   *lambdaruntime.StreamPoller
}

func setup(t *testing.T, hooks relay.Webhooks, batchSize, maxRetries int) *bundle {
	t.Helper()
	b := prepare(t, hooks, batchSize, maxRetries, nil)
	b.start(t)
	return b
}

// prepare provisions the bundle without starting its poller; wrap, when
// set, stands between the relay and the bus.
func prepare(t *testing.T, hooks relay.Webhooks, batchSize, maxRetries int, wrap func(relay.Bus) relay.Bus) *bundle {
	t.Helper()
	env := awstest.Provision(t)
	def := env.Res.Definition
	b := &bundle{env: env, def: def, st: store.New(env.Clients.DynamoDB, def.Table.Name, time.Now), sends: awsclient.NewCounter()}
	b.busQueue = awstest.TapBus(t, env.Clients, def, awstest.Config(t).Region)
	var logw io.Writer = io.Discard
	if testing.Verbose() {
		logw = os.Stderr
	}
	log := slog.New(slog.NewJSONHandler(logw, nil))
	var eb relay.Bus = bus.New(env.Config, def.EventBus)
	if wrap != nil {
		eb = wrap(eb)
	}
	r, err := relay.New(relay.Config{Decode: store.DecodeEvents, Bus: eb, Source: resources.EventSource(def.Env),
		Sender: queue.NewSender(awsclient.New(b.sends.Attach(env.Config)).SQS, env.Res.QueueURLs, queue.Fairness{}), Webhooks: hooks, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	m := def.EventStream
	b.poller = &lambdaruntime.StreamPoller{
		Streams: awsclient.Streams(awstest.Config(t)), StreamARN: env.Res.TableStreamARN, Region: "us-east-1",
		BatchSize: batchSize, BatchingWindow: 100 * time.Millisecond, MaxRetries: maxRetries, BisectOnError: m.BisectOnError,
		ParallelizationFactor: m.ParallelizationFactor, PartitionKey: def.Table.PartitionKey.Name,
		StartingPosition: m.StartingPosition, Filter: m.Filter, SQS: env.Clients.SQS, FailureQueueURL: env.Res.RelayFailureQueueURL,
		Function: lambdaruntime.InProcess("relay", handler.RelayHandler(r, handler.NewEmitter(io.Discard, "local", time.Now), log)),
		Timeout:  time.Minute, PollInterval: 50 * time.Millisecond, RetryWait: 20 * time.Millisecond, Logger: log,
	}
	return b
}

// start runs the bundle's stream poller until the test ends.
func (b *bundle) start(t *testing.T) {
	t.Helper()
	pctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.poller.Run(pctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("poller: %v", err)
		}
	})
}

// newJob stores a new queued job (its job.enqueued event is seq 1).
func (b *bundle) newJob(t *testing.T, owner string, webhook bool) string {
	t.Helper()
	now := time.Now().UTC()
	j := &job.Job{ID: ids.New("job"), Type: "http", Status: job.Queued, Tier: job.Low, Owner: owner,
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

// TestWebhooksAreQueuedTenPerRequest: the deliveries of the events one
// PutEvents carries go to the system tier together, ten per request, not
// one request each; each arrives once, naming its job's owner.
func TestWebhooksAreQueuedTenPerRequest(t *testing.T) {
	t.Parallel()
	const jobs = 12
	b := prepare(t, relay.JobWebhooks{}, 50, 3, nil)
	// Every event is in the stream before the mapping starts, which reads
	// the shard one batch at a time: one batch of 24 records, three
	// PutEvents.
	b.poller.ParallelizationFactor = 1
	want := map[string]int{}
	owners := map[string]string{}
	for i := range jobs {
		owner := fmt.Sprintf("usr_%d", i)
		id := b.newJob(t, owner, true)
		b.emit(t, id, job.EventSucceeded)
		want[id], owners[id] = 2, owner
	}
	b.start(t)
	if _, n := b.collect(t, allOf(want), 2*time.Minute); n < 2*jobs {
		t.Fatalf("%d events reached the bus, want %d", n, 2*jobs)
	}
	got := map[string]int{}
	for len(got) < jobs {
		out, err := b.env.Clients.SQS.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(b.env.Res.QueueURLs[job.System]),
			MaxNumberOfMessages: 10, WaitTimeSeconds: 1, VisibilityTimeout: 60})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Messages) == 0 {
			break
		}
		for _, m := range out.Messages {
			msg, err := queue.Decode(aws.ToString(m.Body))
			if err != nil || msg.Kind != queue.KindWebhook || msg.Owner != owners[msg.JobID] {
				t.Errorf("system tier message %+v (%v)", msg, err)
			}
			got[msg.JobID]++
		}
	}
	for id := range want {
		if got[id] != 1 {
			t.Errorf("job %s: %d deliveries queued, want 1", id, got[id])
		}
	}
	if s := b.sends.Snapshot(); s["SQS.SendMessage"] != 0 || s["SQS.SendMessageBatch"] < 1 || s["SQS.SendMessageBatch"] > 3 {
		t.Errorf("the relay's SQS requests %v: want at most one SendMessageBatch per PutEvents (3), no SendMessage", s)
	}
}

// prefetching is JobWebhooks that notes what the relay asks it to
// prefetch and whether an event was planned before its owner was.
type prefetching struct {
	mu       sync.Mutex
	asked    map[string]bool
	unasked  int // events planned whose owner was not prefetched first
	requests int
}

func (p *prefetching) Prefetch(_ context.Context, owners []string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.requests++
	for _, o := range owners {
		p.asked[o] = true
	}
	return nil
}

func (p *prefetching) Deliveries(ctx context.Context, ev store.EventRecord) ([]queue.Message, error) {
	p.mu.Lock()
	if job.WebhookEvents[ev.Type] && !p.asked[ev.Owner] {
		p.unasked++
	}
	p.mu.Unlock()
	return relay.JobWebhooks{}.Deliveries(ctx, ev)
}

// TestOwnersArePrefetchedPerBatch: the relay hands a Prefetcher the owners
// of a batch's webhook events once, before it plans any of them (the
// endpoints' read for many users in one request), and only those owners.
func TestOwnersArePrefetchedPerBatch(t *testing.T) {
	t.Parallel()
	hooks := &prefetching{asked: map[string]bool{}}
	b := prepare(t, hooks, 50, 3, nil)
	b.poller.ParallelizationFactor = 1
	want := map[string]int{}
	for i := range 6 {
		id := b.newJob(t, fmt.Sprintf("usr_pf%d", i), false)
		if i%2 == 0 {
			b.emit(t, id, job.EventSucceeded)
			want[id] = 2
		} else {
			want[id] = 1
		}
	}
	b.start(t)
	b.collect(t, allOf(want), 2*time.Minute)
	hooks.mu.Lock()
	defer hooks.mu.Unlock()
	if hooks.unasked != 0 || hooks.requests != 1 {
		t.Errorf("%d prefetches, %d webhook events planned before their owner was prefetched: want one prefetch, none", hooks.requests, hooks.unasked)
	}
	for i := range 6 {
		if o := fmt.Sprintf("usr_pf%d", i); hooks.asked[o] != (i%2 == 0) {
			t.Errorf("owner %s prefetched: %t", o, hooks.asked[o])
		}
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
	out, err := b.env.Clients.SQS.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(b.env.Res.QueueURLs[job.System]), MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
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
	want := []queue.Message{{Kind: queue.KindWebhook, JobID: x, Owner: "usr_x", Seq: 6, DeliveryID: fmt.Sprintf("dlv_%s_6", x)}}
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
	var f lambdaruntime.FailureRecord
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

// applied is how far a consumer that needs a job's events strictly in order
// gets through seqs (the job's events as the bus delivered them): it
// applies an event whose seq follows the last one applied and skips the
// others.
func applied(seqs []int64) int64 {
	var last int64
	for _, s := range seqs {
		if s == last+1 {
			last = s
		}
	}
	return last
}

// neverAhead reports whether no event in seqs came before every earlier
// event of its job had come: the sequence starts at 1 and each event is
// at most one past the highest before it (it may repeat from a point).
func neverAhead(seqs []int64) bool {
	var high int64
	for _, s := range seqs {
		if s > high+1 {
			return false
		}
		high = max(high, s)
	}
	return true
}

// inOrder is done when an in-order consumer has applied each job's n
// events.
func inOrder(n map[string]int) func(map[string][]int64) bool {
	return func(got map[string][]int64) bool {
		for id, k := range n {
			if applied(got[id]) < int64(k) {
				return false
			}
		}
		return true
	}
}

// refusing stands between the relay and the emulator's bus: it has the bus
// refuse one event's entry a number of times (its detail made malformed,
// which EventBridge refuses entry by entry while it takes the others) and
// notes the events each request carried.
type refusing struct {
	relay.Bus
	mu       sync.Mutex
	jobID    string
	seq      int64
	left     int
	requests [][]carried
}

// carried is one entry of a request: its event, and whether it was made
// to be refused.
type carried struct {
	relay.Body
	refused bool
}

func (r *refusing) Put(ctx context.Context, in []relay.Entry) ([]error, error) {
	r.mu.Lock()
	entries := slices.Clone(in)
	var req []carried
	for i, e := range entries {
		var c carried
		if err := json.Unmarshal([]byte(e.Detail), &c.Body); err != nil {
			r.mu.Unlock()
			return nil, fmt.Errorf("the relay put a detail that is not JSON: %w", err)
		}
		if c.JobID == r.jobID && c.Seq == r.seq && r.left > 0 {
			r.left--
			c.refused = true
			entries[i].Detail = `{"cut short":`
		}
		req = append(req, c)
	}
	r.requests = append(r.requests, req)
	r.mu.Unlock()
	return r.Bus.Put(ctx, entries)
}

// TestARefusedEntryHoldsBackTheLaterEventsOfItsJob: a job's events go
// several to a PutEvents request; the bus refuses one entry (twice) while
// it takes the rest of the request, later events of the same job included.
// No later request carries a later event of that job before the refused
// one is put again, and then in order: a consumer applying the job's
// events strictly in order gets all of them, and the other job's events
// never come ahead of their turn.
func TestARefusedEntryHoldsBackTheLaterEventsOfItsJob(t *testing.T) {
	t.Parallel()
	const xEvents = 14 // more than one request carries
	bus := &refusing{seq: 2, left: 2}
	b := prepare(t, relay.JobWebhooks{}, 50, 5, func(inner relay.Bus) relay.Bus {
		bus.Bus = inner
		return bus
	})
	x, y := b.newJob(t, "usr_x", false), b.newJob(t, "usr_y", false)
	bus.mu.Lock()
	bus.jobID = x
	bus.mu.Unlock()
	for i := range xEvents - 1 {
		b.emit(t, x, job.EventProgress)
		if i < 4 {
			b.emit(t, y, job.EventProgress)
		}
	}
	// Every event is in the stream before the poller reads it: the first
	// read hands each job's events to its lane together.
	b.start(t)
	got, _ := b.collect(t, inOrder(map[string]int{x: xEvents, y: 5}), 3*time.Minute)
	if a := applied(got[x]); a != xEvents {
		t.Errorf("job X on the bus: %v: an in-order consumer applies up to %d, want %d", got[x], a, xEvents)
	}
	if !neverAhead(got[y]) || applied(got[y]) != 5 {
		t.Errorf("job Y on the bus: %v: want 1..5, repeated from a point at most", got[y])
	}
	bus.mu.Lock()
	defer bus.mu.Unlock()
	withX2, packed, waiting := 0, false, false
	for i, req := range bus.requests {
		var xs []int64
		refused := false
		for _, c := range req {
			if c.JobID != x {
				continue
			}
			xs = append(xs, c.Seq)
			refused = refused || c.refused
		}
		if len(xs) > 0 && waiting && xs[0] != 2 {
			t.Errorf("request %d carried X's events %v before X's refused event 2 came again", i, xs)
		}
		if slices.Contains(xs, 2) {
			withX2++
			waiting = refused
		}
		if !slices.IsSorted(xs) {
			t.Errorf("request %d carried X's events out of order: %v", i, xs)
		}
		packed = packed || len(xs) > 1
	}
	if withX2 != 3 || bus.left != 0 {
		t.Errorf("X's event 2 went in %d requests (%d refusals left), want 3: refused twice, then taken", withX2, bus.left)
	}
	if !packed {
		t.Errorf("no request carried two events of job X: %v", bus.requests)
	}
}

// TestARefusedEntryFailsTheLaterEntriesOfItsJob calls the relay with a
// batch read from the table's stream: one request carries both jobs'
// events; the bus refuses X's event 2 and takes the others, X's later
// events included. The relay reports X's records from event 2 on, though
// the bus took 3 to 5, and nothing of Y.
func TestARefusedEntryFailsTheLaterEntriesOfItsJob(t *testing.T) {
	t.Parallel()
	bus := &refusing{seq: 2, left: 1}
	b := prepare(t, relay.JobWebhooks{}, 50, 5, func(inner relay.Bus) relay.Bus {
		bus.Bus = inner
		return bus
	})
	x, y := b.newJob(t, "usr_x", false), b.newJob(t, "usr_y", false)
	bus.mu.Lock()
	bus.jobID = x
	bus.mu.Unlock()
	for range 4 {
		b.emit(t, x, job.EventProgress)
		b.emit(t, y, job.EventProgress)
	}
	batch := b.streamBatch(t, 10)
	r, err := relay.New(relay.Config{Decode: store.DecodeEvents, Bus: bus, Source: resources.EventSource(b.def.Env),
		Sender: queue.NewSender(b.env.Clients.SQS, b.env.Res.QueueURLs, queue.Fairness{}), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	resp, res := r.Handle(context.Background(), batch)
	var want []string
	for _, rec := range batch.Records {
		evs, err := store.DecodeEvents(rec.Change.NewImage)
		if err != nil {
			t.Fatal(err)
		}
		if ev := evs[len(evs)-1]; ev.JobID == x && ev.Seq >= 2 {
			want = append(want, rec.Change.SequenceNumber)
		}
	}
	var reported []string
	for _, f := range resp.BatchItemFailures {
		reported = append(reported, f.ItemIdentifier)
	}
	if diff := cmp.Diff(want, reported); diff != "" {
		t.Errorf("reported records (-want +got):\n%s", diff)
	}
	if res.Relayed != 6 || res.Failed != 4 || len(bus.requests) != 1 {
		t.Errorf("relayed %d, failed %d in %d requests; want 6 relayed (X's 1, Y's 5), 4 failed, one request", res.Relayed, res.Failed, len(bus.requests))
	}
	got, _ := b.collect(t, allOf(map[string]int{x: 4, y: 5}), time.Minute)
	if diff := cmp.Diff(map[string][]int64{x: {1, 3, 4, 5}, y: seqs(5)}, got); diff != "" {
		t.Errorf("on the bus (-want +got):\n%s", diff)
	}
}

// streamBatch reads the table's stream from its start until it has n event
// items, and returns them as the mapping hands them to the relay.
func (b *bundle) streamBatch(t *testing.T, n int) events.DynamoDBEvent {
	t.Helper()
	ctx := context.Background()
	streams := awsclient.Streams(awstest.Config(t))
	var batch events.DynamoDBEvent
	deadline := time.Now().Add(time.Minute)
	for len(batch.Records) < n && time.Now().Before(deadline) {
		batch.Records = nil
		d, err := streams.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(b.env.Res.TableStreamARN)})
		if err != nil {
			t.Fatal(err)
		}
		for _, sh := range d.StreamDescription.Shards {
			it, err := streams.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{StreamArn: aws.String(b.env.Res.TableStreamARN),
				ShardId: sh.ShardId, ShardIteratorType: streamtypes.ShardIteratorTypeTrimHorizon})
			if err != nil {
				t.Fatal(err)
			}
			for iter := it.ShardIterator; iter != nil; {
				out, err := streams.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: iter})
				if err != nil {
					t.Fatal(err)
				}
				for _, r := range out.Records {
					rec := lambdaruntime.LambdaRecord(r, b.env.Res.TableStreamARN, "us-east-1")
					if rec.EventName == "INSERT" && relay.IsEventItem(rec.Change.Keys) {
						batch.Records = append(batch.Records, rec)
					}
				}
				if len(out.Records) == 0 {
					break
				}
				iter = out.NextShardIterator
			}
		}
	}
	if len(batch.Records) != n {
		t.Fatalf("the stream holds %d event items, want %d", len(batch.Records), n)
	}
	return batch
}

// TestALifecycleBusKeepsProgressOffTheBus: with BusEvents lifecycle, a
// job's job.progress and job.phase.completed events are relayed (the
// stream moves past them) without a PutEvents entry, its other events go
// on the bus in order, and the webhook of its job.succeeded is queued; with
// BusEvents all the same batch puts every event.
func TestALifecycleBusKeepsProgressOffTheBus(t *testing.T) {
	t.Parallel()
	b := prepare(t, relay.JobWebhooks{}, 50, 5, nil)
	x, y := b.newJob(t, "usr_x", true), b.newJob(t, "usr_y", false)
	for _, id := range []string{x, y} {
		b.emit(t, id, job.EventStarted)
		b.emit(t, id, job.EventProgress)
		b.emit(t, id, job.EventPhaseCompleted)
		b.emit(t, id, job.EventProgress)
		b.emit(t, id, job.EventSucceeded)
	}
	batch := b.streamBatch(t, 12)
	for _, tc := range []struct {
		setting job.BusEvents
		put     []string // the detail types each job puts, in order
	}{
		{job.BusLifecycle, []string{job.EventEnqueued, job.EventStarted, job.EventSucceeded}},
		{job.BusAll, []string{job.EventEnqueued, job.EventStarted, job.EventProgress, job.EventPhaseCompleted, job.EventProgress, job.EventSucceeded}},
	} {
		sends := awsclient.NewCounter()
		bus := &refusing{Bus: &putNothing{}} // refuses nothing: jobID is empty
		r, err := relay.New(relay.Config{Decode: store.DecodeEvents, Bus: bus, Source: resources.EventSource(b.def.Env), BusEvents: tc.setting,
			Sender: queue.NewSender(awsclient.New(sends.Attach(b.env.Config)).SQS, b.env.Res.QueueURLs, queue.Fairness{}), Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		resp, res := r.Handle(context.Background(), batch)
		if len(resp.BatchItemFailures) != 0 || res.Relayed != 12 || res.Put != 2*len(tc.put) {
			t.Errorf("%s: relayed %d, put %d, reported %v; want 12 relayed, %d put, none reported", tc.setting, res.Relayed, res.Put, resp.BatchItemFailures, 2*len(tc.put))
		}
		got := map[string][]string{}
		entries := 0
		for _, req := range bus.requests {
			entries += len(req)
			for _, c := range req {
				got[c.JobID] = append(got[c.JobID], c.Type)
			}
		}
		if diff := cmp.Diff(map[string][]string{x: tc.put, y: tc.put}, got); diff != "" {
			t.Errorf("%s: detail types on the bus (-want +got):\n%s", tc.setting, diff)
		}
		if want := (entries + relay.MaxEntriesPerPut - 1) / relay.MaxEntriesPerPut; len(bus.requests) != want {
			t.Errorf("%s: %d PutEvents for %d entries, want %d (full requests)", tc.setting, len(bus.requests), entries, want)
		}
		if res.Webhooks != 1 || sends.Get("SQS.SendMessageBatch") != 1 {
			t.Errorf("%s: %d webhooks queued in %d sends, want X's job.succeeded's, in one", tc.setting, res.Webhooks, sends.Get("SQS.SendMessageBatch"))
		}
	}
}

// putNothing is a bus that takes every entry and sends nothing anywhere.
type putNothing struct{}

func (putNothing) Put(_ context.Context, in []relay.Entry) ([]error, error) {
	return make([]error, len(in)), nil
}
