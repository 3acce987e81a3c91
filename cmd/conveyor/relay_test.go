package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/conveyor/conveyor/internal/aws/awsclient"
	"github.com/conveyor/conveyor/internal/aws/queue"
	"github.com/conveyor/conveyor/internal/aws/store"
	"github.com/conveyor/conveyor/internal/ids"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/relay"
	"github.com/conveyor/conveyor/internal/resources"
	"github.com/conveyor/conveyor/localstack/awstest"
	"github.com/conveyor/conveyor/localstack/lambdaruntime"
)

// replayBundle is one replay test's environment: provisioned resources,
// a queue subscribed to the bus, and an env file naming them as .local/env
// does.
type replayBundle struct {
	env     awstest.Env
	def     resources.Definition
	st      *store.Store
	tap     string
	envFile string
	// events is every event written, "jobId:seq".
	events []string
	// hooks is every webhook delivery the events trigger.
	hooks []string
}

func newReplayBundle(t *testing.T) *replayBundle {
	t.Helper()
	env := awstest.Provision(t)
	def := env.Res.Definition
	b := &replayBundle{env: env, def: def, st: store.New(env.Clients.DynamoDB, def.Table.Name, time.Now)}
	b.tap = awstest.TapBus(t, env.Clients, def, env.Config.Region)
	// The env file make run writes: the stack's names and its emulators.
	vars := env.Res.Environ()
	ep := awstest.Endpoints(t)
	maps.Copy(vars, map[string]string{"AWS_ENDPOINT_URL": ep.Default, "AWS_ENDPOINT_URL_DYNAMODB": ep.DynamoDB, "AWS_REGION": env.Config.Region})
	keys := make([]string, 0, len(vars))
	for k := range vars {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var sb strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&sb, "export %s='%s'\n", k, vars[k])
	}
	b.envFile = filepath.Join(t.TempDir(), "env")
	if err := os.WriteFile(b.envFile, []byte(sb.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return b
}

// writeJobs stores n jobs, each enqueued then succeeded (two writes, two
// event items); every other one has a webhook URL, so its job.succeeded
// queues a delivery.
func (b *replayBundle) writeJobs(t *testing.T, n int) {
	t.Helper()
	ctx := context.Background()
	for i := range n {
		now := time.Now().UTC()
		j := &job.Job{ID: ids.New("job"), Type: "http", Status: job.Queued, Tier: job.Low, Owner: fmt.Sprintf("usr_%d", i),
			Hash: ids.New("h"), MaxAttempts: 7, CreatedAt: now, UpdatedAt: now}
		if i%2 == 0 {
			j.WebhookURL = "https://hooks.example.com/x"
		}
		j.Emit(job.EventEnqueued, now, nil)
		if _, _, err := b.st.CreateJob(ctx, j); err != nil {
			t.Fatalf("creating a job: %v", err)
		}
		if _, err := b.st.UpdateJob(ctx, j.ID, func(j *job.Job) error {
			j.Emit(job.EventSucceeded, time.Now(), nil)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		b.events = append(b.events, j.ID+":1", j.ID+":2")
		if j.WebhookURL != "" {
			b.hooks = append(b.hooks, fmt.Sprintf("dlv_%s_2", j.ID))
		}
	}
}

// failingRelay is the relay function failing every invocation: the
// mapping gives each batch up (no retry) and describes it on the failure
// queue, as Lambda does. It counts the records it was handed.
type failingRelay struct{ records, invocations atomic.Int64 }

func (f *failingRelay) Invoke(_ context.Context, payload []byte) ([]byte, error) {
	var ev struct {
		Records []json.RawMessage `json:"Records"`
	}
	_ = json.Unmarshal(payload, &ev)
	f.records.Add(int64(len(ev.Records)))
	f.invocations.Add(1)
	return nil, errors.New("the bus refused every event")
}

// failBatches runs the stream mapping's local twin over the table's
// stream with a relay that always fails, until every event item's batch
// is on the failure queue; it returns how many failure records there are.
func (b *replayBundle) failBatches(t *testing.T) int {
	t.Helper()
	fn := &failingRelay{}
	m := b.def.EventStream
	p := &lambdaruntime.StreamPoller{
		Streams: awsclient.Streams(b.env.Config), StreamARN: b.env.Res.TableStreamARN, Region: b.env.Config.Region,
		FunctionARN: "arn:aws:lambda:us-east-1:123456789012:function:" + b.def.Prefix + "-relay",
		BatchSize:   m.BatchSize, BatchingWindow: 100 * time.Millisecond, MaxRetries: 0,
		ParallelizationFactor: m.ParallelizationFactor, PartitionKey: b.def.Table.PartitionKey.Name,
		StartingPosition: m.StartingPosition, Filter: m.Filter, SQS: b.env.Clients.SQS, FailureQueueURL: b.env.Res.RelayFailureQueueURL,
		Function: fn, Timeout: time.Minute, PollInterval: 50 * time.Millisecond, RetryWait: 10 * time.Millisecond,
		Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)),
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("poller: %v", err)
		}
	}()
	want := int64(len(b.events)) // one event item per write here
	deadline := time.Now().Add(time.Minute)
	for fn.records.Load() < want {
		if time.Now().After(deadline) {
			t.Fatalf("the mapping handed the relay %d records, want %d", fn.records.Load(), want)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Each failed invocation (no retry, no bisection) is one record.
	for {
		if n := b.failureDepth(t); n >= int(fn.invocations.Load()) {
			return n
		}
		if time.Now().After(deadline) {
			t.Fatalf("the failure queue holds %d records, want one per invocation (%d)", b.failureDepth(t), fn.invocations.Load())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// failureDepth is how many messages the failure queue holds (visible or
// not).
func (b *replayBundle) failureDepth(t *testing.T) int {
	t.Helper()
	a, err := b.env.Clients.SQS.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{QueueUrl: aws.String(b.env.Res.RelayFailureQueueURL),
		AttributeNames: []sqstypes.QueueAttributeName{"ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"}})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, k := range []string{"ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"} {
		var v int
		fmt.Sscan(a.Attributes[k], &v)
		n += v
	}
	return n
}

// busEvents drains the tap: each event the bus delivered, "jobId:seq".
func (b *replayBundle) busEvents(t *testing.T) []string {
	t.Helper()
	var got []string
	for {
		out, err := b.env.Clients.SQS.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(b.tap),
			MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Messages) == 0 {
			return got
		}
		for _, m := range out.Messages {
			var ev struct {
				Detail relay.Body `json:"detail"`
			}
			if err := json.Unmarshal([]byte(aws.ToString(m.Body)), &ev); err != nil {
				t.Fatalf("a bus event that is not JSON: %v", err)
			}
			got = append(got, fmt.Sprintf("%s:%d", ev.Detail.JobID, ev.Detail.Seq))
			if _, err := b.env.Clients.SQS.DeleteMessage(context.Background(), &sqs.DeleteMessageInput{QueueUrl: aws.String(b.tap), ReceiptHandle: m.ReceiptHandle}); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// webhooks drains the system tier: each webhook delivery queued.
func (b *replayBundle) webhooks(t *testing.T) []string {
	t.Helper()
	var got []string
	for {
		out, err := b.env.Clients.SQS.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(b.env.Res.QueueURLs[job.System]),
			MaxNumberOfMessages: 10, WaitTimeSeconds: 1, VisibilityTimeout: 120})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Messages) == 0 {
			return got
		}
		for _, m := range out.Messages {
			msg, err := queue.Decode(aws.ToString(m.Body))
			if err != nil || msg.Kind != queue.KindWebhook {
				t.Errorf("system tier message %+v (%v)", msg, err)
			}
			got = append(got, msg.DeliveryID)
		}
	}
}

// replay runs `conveyor relay replay` against the bundle's env file.
func (b *replayBundle) replay(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errOut bytes.Buffer
	c := &cli{stdout: &out, stderr: &errOut, getenv: func(string) string { return "" },
		http: &http.Client{Timeout: 30 * time.Second}, now: time.Now}
	code = c.main(context.Background(), append([]string{"relay", "replay", "--env", "local", "--env-file", b.envFile}, args...))
	return out.String(), errOut.String(), code
}

// exactlyOnce reports how got differs from want, each of want once.
func exactlyOnce(want, got []string) string {
	n := map[string]int{}
	for _, g := range got {
		n[g]++
	}
	var diff []string
	for _, w := range want {
		if n[w] != 1 {
			diff = append(diff, fmt.Sprintf("%s ×%d", w, n[w]))
		}
		delete(n, w)
	}
	for g, k := range n {
		diff = append(diff, fmt.Sprintf("unexpected %s ×%d", g, k))
	}
	sort.Strings(diff)
	return strings.Join(diff, ", ")
}

// TestReplayRelaysTheFailedBatchesOnce: the relay fails every batch, the
// mapping describes them on the failure queue; a dry run changes nothing,
// the replay re-reads the batches from the stream and relays every event
// to the bus and every webhook delivery to the system tier exactly once,
// and deletes the records; a second replay finds nothing.
func TestReplayRelaysTheFailedBatchesOnce(t *testing.T) {
	t.Parallel()
	b := newReplayBundle(t)
	b.writeJobs(t, 6)
	records := b.failBatches(t)
	if records == 0 {
		t.Fatal("no failure record")
	}
	if got := b.busEvents(t); len(got) != 0 {
		t.Fatalf("before the replay the bus got %v", got)
	}

	out, stderr, code := b.replay(t, "--dry-run")
	if code != exitOK || !strings.Contains(out, fmt.Sprintf("%d failure records, %d events (%d from the stream, 0 from the table); nothing relayed", records, len(b.events), records)) {
		t.Fatalf("dry run: exit %d\nstdout %q\nstderr %q", code, out, stderr)
	}
	if got := b.busEvents(t); len(got) != 0 {
		t.Fatalf("a dry run put %v on the bus", got)
	}
	if n := b.failureDepth(t); n != records {
		t.Fatalf("after a dry run the failure queue holds %d, want %d", n, records)
	}

	out, stderr, code = b.replay(t)
	if code != exitOK {
		t.Fatalf("replay: exit %d\nstdout %q\nstderr %q", code, out, stderr)
	}
	want := fmt.Sprintf("local: %d failure records: %d replayed and deleted, 0 kept; %d events relayed (%d on the bus), %d webhooks queued\n",
		records, records, len(b.events), len(b.events), len(b.hooks))
	if out != want {
		t.Errorf("stdout %q, want %q", out, want)
	}
	if lines := strings.Count(stderr, "record deleted"); lines != records {
		t.Errorf("stderr has %d progress lines, want one per record (%d):\n%s", lines, records, stderr)
	}
	if d := exactlyOnce(b.events, b.busEvents(t)); d != "" {
		t.Errorf("bus: %s", d)
	}
	if d := exactlyOnce(b.hooks, b.webhooks(t)); d != "" {
		t.Errorf("webhooks: %s", d)
	}
	if n := b.failureDepth(t); n != 0 {
		t.Errorf("the failure queue still holds %d", n)
	}

	out, _, code = b.replay(t)
	if code != exitOK || out != "local: no relay failures to replay\n" {
		t.Errorf("second replay: exit %d, %q", code, out)
	}
	if got := b.busEvents(t); len(got) != 0 {
		t.Errorf("a second replay put %v on the bus", got)
	}
}

// TestReplayReadsATrimmedBatchFromTheTable: a failure record whose shard
// the stream no longer has (trimmed after 24 hours, or a stream of a table
// since replaced) is replayed from the table's events of its arrival
// window, each once, and deleted; a record that is not a failure record
// is kept, and the command says so and exits 1.
func TestReplayReadsATrimmedBatchFromTheTable(t *testing.T) {
	t.Parallel()
	b := newReplayBundle(t)
	from := time.Now().UTC()
	b.writeJobs(t, 3)
	to := time.Now().UTC()
	var rec relay.FailureRecord
	rec.Version, rec.RequestContext.Condition = "1.0", "RetryAttemptsExhausted"
	rec.BatchInfo = relay.BatchInfo{ShardID: "shardId-00000001700000000000-gone0000", StartSequenceNumber: "100000000000000000001",
		EndSequenceNumber: "100000000000000000009", BatchSize: len(b.events), StreamARN: b.env.Res.TableStreamARN,
		ApproximateArrivalOfFirstRecord: from.Format(time.RFC3339Nano), ApproximateArrivalOfLastRecord: to.Format(time.RFC3339Nano)}
	body, _ := json.Marshal(rec)
	ctx := context.Background()
	for _, msg := range []string{string(body), `{"not":"a failure record"}`} {
		if _, err := b.env.Clients.SQS.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(b.env.Res.RelayFailureQueueURL), MessageBody: aws.String(msg)}); err != nil {
			t.Fatal(err)
		}
	}
	out, stderr, code := b.replay(t)
	if code != exitFailure || !strings.Contains(out, fmt.Sprintf("2 failure records: 1 replayed and deleted, 1 kept; %d events relayed", len(b.events))) ||
		!strings.Contains(stderr, fmt.Sprintf("%d events from the table", len(b.events))) || !strings.Contains(stderr, "record kept: not a stream batch's failure record") {
		t.Fatalf("replay: exit %d\nstdout %q\nstderr %q", code, out, stderr)
	}
	if d := exactlyOnce(b.events, b.busEvents(t)); d != "" {
		t.Errorf("bus: %s", d)
	}
	if d := exactlyOnce(b.hooks, b.webhooks(t)); d != "" {
		t.Errorf("webhooks: %s", d)
	}
	if n := b.failureDepth(t); n != 1 {
		t.Errorf("the failure queue holds %d, want the one record that is not a failure record", n)
	}
}
