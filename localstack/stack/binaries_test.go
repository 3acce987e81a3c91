package stack_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/relay"
	"github.com/conveyor/conveyor/internal/resources"
	"github.com/conveyor/conveyor/internal/webhook"
	"github.com/conveyor/conveyor/localstack/awstest"
	"github.com/conveyor/conveyor/localstack/stack"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

func TestMain(m *testing.M) { awstest.Main(m) }

// setupBinaries starts a stack whose functions run as their own binaries.
func setupBinaries(t *testing.T, env map[string]string, opts stack.Options) *awstest.Bundle {
	t.Helper()
	out := &awstest.Buffer{}
	opts.Binaries, opts.Bootstraps, opts.FunctionOutput = true, awstest.Bootstraps(t), out
	b := awstest.Setup(t, env, opts)
	t.Cleanup(func() {
		if t.Failed() {
			all := out.String()
			t.Logf("the functions' output, last lines:\n%s", all[max(0, len(all)-6000):])
		}
	})
	return b
}

type frame = awstest.SSEFrame

// openSSE reads an event stream's frames into a channel until ctx ends.
func openSSE(t *testing.T, ctx context.Context, url, token string) <-chan frame {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Fatalf("GET %s: %s %s", url, resp.Status, body)
	}
	ch := awstest.ReadSSE(resp.Body)
	return ch
}

// hooks is a webhook receiver on loopback that checks signatures.
type hooks struct {
	mu     sync.Mutex
	events []string
	bad    int
	got    chan struct{}
}

func (h *hooks) handler(wh *standardwebhooks.Webhook) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		h.mu.Lock()
		defer h.mu.Unlock()
		if wh.Verify(body, r.Header) != nil {
			h.bad++
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		h.events = append(h.events, r.Header.Get(webhook.HeaderEvent))
		select {
		case h.got <- struct{}{}:
		default:
		}
		w.WriteHeader(http.StatusNoContent)
	}
}

// TestJobThroughEveryFunctionBinary takes one job through the real
// bootstrap of every function, under the local Runtime API: the upload is
// confirmed by its S3 event through confirm; the job is submitted through
// api (scheduled a moment ahead), released by recovery, published by
// publisher; recovery's relay queues the webhook, which system delivers,
// signed with the owner's secret (sealed by KMS, read through the API and
// checked with the Standard Webhooks library); and the job's events
// reach an SSE client through stream, at its own URL; an operator reads
// the job through admin. The upload is signed through uploads, and a
// recurring schedule made and paused through schedules.
func TestJobThroughEveryFunctionBinary(t *testing.T) {
	t.Parallel()
	b := setupBinaries(t, map[string]string{
		"CONVEYOR_SCHEDULE_INTERVAL": "300ms", "CONVEYOR_RECOVERY_INTERVAL": "300ms", "CONVEYOR_STREAM_PING": "2s",
	}, stack.Options{})
	s := b.Stack
	if s.StreamURL == s.APIURL || s.StreamURL == "" {
		t.Fatalf("stream URL %q: want the stream function's own origin, not the API's %q", s.StreamURL, s.APIURL)
	}
	tok := b.Token("u-binaries", "user", "pro")
	secret := b.Must(b.Call("GET", "/v1/webhooks/secret", tok, nil), 200).Body["secret"].(string)
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	receiver := &hooks{got: make(chan struct{}, 1)}
	srv := httptest.NewServer(receiver.handler(wh))
	defer srv.Close()

	tap := tapBus(t, s)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	frames := openSSE(t, ctx, s.StreamURL+"/v1/events", tok)

	b.Connect(tok)
	up := b.Upload(tok, awstest.PNG(t, 6))
	at := time.Now().Add(2 * time.Second).UTC().Format(time.RFC3339)
	r := b.Must(b.Call("POST", "/v1/jobs", tok, map[string]any{"type": "publish", "items": []any{map[string]any{"uploadId": up}},
		"params": map[string]any{"title": "Through the binaries"}, "scheduleAt": at, "webhookUrl": srv.URL + "/hook"}), 201)
	id := r.Body["id"].(string)
	if r.Body["status"] != "scheduled" {
		t.Errorf("a job for %s is %v, want scheduled", at, r.Body["status"])
	}
	done := b.WaitStatus(tok, id, "succeeded")
	if res, _ := done.Body["result"].(map[string]any); res["deviationId"] == nil {
		t.Errorf("the succeeded job has no deviation: %s", done.Raw)
	}

	// The stream function told the SSE client.
	deadline := time.After(30 * time.Second)
	for seen := false; !seen; {
		select {
		case f, ok := <-frames:
			if !ok {
				t.Fatal("the event stream ended")
			}
			seen = f.Event == job.EventSucceeded && strings.Contains(f.Data, id)
		case <-deadline:
			t.Fatal("no job.succeeded for the job on the event stream")
		}
	}

	// The relay function (its binary, fed by the local stream poller) put
	// the job's lifecycle events on the bus (busEvents "lifecycle", the
	// default: progress stays in the table and SSE), in order.
	var onBus []int64
	var types []string
	deadline = time.After(60 * time.Second)
	for !slices.Contains(types, job.EventSucceeded) {
		select {
		case <-deadline:
			t.Fatalf("job.succeeded never reached the bus; got %v %v", onBus, types)
		default:
		}
		for _, ev := range tap.receive(t) {
			if ev.Detail.JobID == id {
				onBus, types = append(onBus, ev.Detail.Seq), append(types, ev.DetailType)
			}
		}
	}
	increasing := onBus[0] == 1
	for i := 1; i < len(onBus); i++ {
		increasing = increasing && onBus[i] > onBus[i-1]
	}
	if !increasing || !slices.Equal(types, []string{job.EventEnqueued, job.EventStarted, job.EventSucceeded}) {
		t.Fatalf("the job's events on the bus: seqs %v (%v), want job.enqueued (1), job.started, job.succeeded in order", onBus, types)
	}

	// The system function delivered the signed webhook.
	select {
	case <-receiver.got:
	case <-time.After(30 * time.Second):
		t.Fatal("no webhook arrived")
	}
	receiver.mu.Lock()
	if receiver.bad != 0 || len(receiver.events) == 0 || receiver.events[0] != job.EventSucceeded {
		t.Errorf("webhooks: events %v, %d with a bad signature", receiver.events, receiver.bad)
	}
	receiver.mu.Unlock()

	// The operators' view of the job, through the gateway's admin route:
	// the admin function's own binary answers it.
	op := b.Token("op-binaries", "admin", "")
	if got := b.Must(b.Call("GET", "/v1/admin/jobs/"+id, op, nil), 200).Body["status"]; got != "succeeded" {
		t.Errorf("GET /v1/admin/jobs/%s: status %v, want succeeded", id, got)
	}
	if r := b.Call("GET", "/v1/admin/overview", tok, nil); r.Status != http.StatusForbidden {
		t.Errorf("GET /v1/admin/overview as a user: %d, want 403", r.Status)
	}

	// A recurring schedule through the gateway's schedules routes: the
	// schedules function's own binary (with its embedded zone database and
	// the Scheduler client) creates, lists, pauses and deletes it.
	sc := b.Must(b.Call("POST", "/v1/schedules", tok, map[string]any{"name": "weekly", "cron": "0 9 * * 1", "timezone": "Asia/Tokyo",
		"job": map[string]any{"type": "publish", "items": []any{map[string]any{"uploadId": up}}, "params": map[string]any{"title": "Weekly"}}}), 201)
	scID, _ := sc.Body["id"].(string)
	if list := b.Must(b.Call("GET", "/v1/schedules", tok, nil), 200).Body["schedules"].([]any); len(list) != 1 {
		t.Errorf("GET /v1/schedules: %v, want the one schedule", list)
	}
	if got := b.Must(b.Call("POST", "/v1/schedules/"+scID+"/pause", tok, nil), 200).Body["status"]; got != "paused" {
		t.Errorf("a paused schedule is %v", got)
	}
	b.Must(b.Call("DELETE", "/v1/schedules/"+scID, tok, nil), 204)

	// Every function ran as its own process, started once at least.
	for _, name := range s.Provisioned.Definition.Functions {
		fn := s.Functions.Binaries[name]
		if fn == nil {
			t.Errorf("function %s has no binary", name)
			continue
		}
		st := fn.Stats()
		if st.Started == 0 {
			t.Errorf("function %s never started", name)
		}
		t.Logf("%-9s instances started %d, cold starts (process start → first invocation/next) %v", name, st.Started, fn.ColdStarts())
	}

	// As in AWS, the API does not serve the streams.
	if r := b.Call("GET", "/v1/events", tok, nil); r.Status != http.StatusNotFound {
		t.Errorf("GET /v1/events on the API: %d, want 404 (the stream function's URL serves it)", r.Status)
	}
}

// busTap is a FIFO queue subscribed to a stack's bus (one message group,
// so it keeps the order of the puts).
type busTap struct {
	sqs *sqs.Client
	url string
}

type busEvent struct {
	Source     string     `json:"source"`
	DetailType string     `json:"detail-type"`
	Detail     relay.Body `json:"detail"`
}

func tapBus(t *testing.T, s *stack.Stack) *busTap {
	t.Helper()
	return &busTap{sqs: s.App.Clients.SQS, url: awstest.TapBus(t, s.App.Clients, s.Provisioned.Definition, "us-east-1")}
}

// receive takes what arrived (waiting up to a second).
func (b *busTap) receive(t *testing.T) []busEvent {
	t.Helper()
	out, err := b.sqs.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(b.url), MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
	if err != nil {
		t.Fatal(err)
	}
	var evs []busEvent
	for _, m := range out.Messages {
		var ev busEvent
		if err := json.Unmarshal([]byte(aws.ToString(m.Body)), &ev); err != nil {
			t.Fatal(err)
		}
		evs = append(evs, ev)
		if _, err := b.sqs.DeleteMessage(context.Background(), &sqs.DeleteMessageInput{QueueUrl: aws.String(b.url), ReceiptHandle: m.ReceiptHandle}); err != nil {
			t.Fatal(err)
		}
	}
	return evs
}

// TestSampleEventsThroughTheirBinaries feeds every sample in events/ to its
// function's real binary (the samples name make run's resources; they are
// renamed to this test's) and checks the answer.
func TestSampleEventsThroughTheirBinaries(t *testing.T) {
	t.Parallel()
	b := setupBinaries(t, nil, stack.Options{DisablePollers: true})
	s := b.Stack
	prefix := s.Provisioned.Definition.Prefix
	dir := filepath.Join("..", "..", "events")
	samples := map[string]struct {
		fn    string
		check func(t *testing.T, answer []byte)
	}{
		"api-healthz.json": {resources.FuncAPI, func(t *testing.T, answer []byte) {
			var resp events.APIGatewayV2HTTPResponse
			if err := json.Unmarshal(answer, &resp); err != nil || resp.StatusCode != http.StatusOK {
				t.Errorf("answer %s (%v), want a 200 response", answer, err)
			}
		}},
		// An object of no known upload is ignored, not retried.
		"s3-object-created.json": {resources.FuncConfirm, func(t *testing.T, answer []byte) {
			if string(answer) != "null" {
				t.Errorf("answer %s, want null", answer)
			}
		}},
		// A message of no known job is dropped, not redelivered.
		"sqs-publish.json": {resources.FuncPublisher, func(t *testing.T, answer []byte) {
			var resp events.SQSEventResponse
			if err := json.Unmarshal(answer, &resp); err != nil || len(resp.BatchItemFailures) != 0 {
				t.Errorf("answer %s (%v), want no batch item failures", answer, err)
			}
		}},
		// An event item reaches the bus: nothing to retry.
		"dynamodb-stream-event.json": {resources.FuncRelay, func(t *testing.T, answer []byte) {
			var resp events.DynamoDBEventResponse
			if err := json.Unmarshal(answer, &resp); err != nil || len(resp.BatchItemFailures) != 0 {
				t.Errorf("answer %s (%v), want no batch item failures", answer, err)
			}
		}},
		"scheduled-recovery.json": {resources.FuncRecovery, func(t *testing.T, answer []byte) {
			if string(answer) != "null" {
				t.Errorf("answer %s, want null", answer)
			}
		}},
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if _, ok := samples[e.Name()]; !ok && strings.HasSuffix(e.Name(), ".json") {
			t.Errorf("sample %s is fed to no function", e.Name())
		}
	}
	for file, sample := range samples {
		t.Run(file, func(t *testing.T) {
			t.Parallel()
			raw, err := os.ReadFile(filepath.Join(dir, file))
			if err != nil {
				t.Fatal(err)
			}
			raw = bytes.ReplaceAll(raw, []byte("conveyor-local"), []byte(prefix))
			fn := s.Functions.Binaries[sample.fn]
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			answer, err := fn.Invoke(ctx, raw)
			if err != nil {
				t.Fatalf("%s: %v", sample.fn, err)
			}
			sample.check(t, answer)
			if st := fn.Stats(); st.Started != 1 {
				t.Errorf("%s started %d instances, want 1", sample.fn, st.Started)
			}
		})
	}
}
