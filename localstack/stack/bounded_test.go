package stack_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/conveyor/conveyor/internal/aws/awsclient"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/relay"
	"github.com/conveyor/conveyor/localstack/awstest"
	"github.com/conveyor/conveyor/localstack/stack"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// TestTheLargestHTTPJobReachesTheBusAndItsWebhooks sends the largest
// inputs the contract allows through every path of a job: an http job
// whose headers and body fill the 64 KiB the contract allows, of the
// characters that encode largest (HTML's <, > and &), against a target
// that answers the largest body the result keeps (256 KiB, of <>& and a
// control character, which JSON escapes in six bytes). The job must
// succeed, be read alone, in the user's list and on the inspector's page,
// and every one of its lifecycle events must reach the bus — each
// PutEvents entry within EventBridge's 256 KiB as AWS counts it (moto does
// not refuse larger ones; the local clients do, as AWS does) — and its
// webhooks (its own webhookUrl and a subscribed endpoint) and SSE must
// carry its outcome.
func TestTheLargestHTTPJobReachesTheBusAndItsWebhooks(t *testing.T) {
	t.Parallel()
	answer := strings.Repeat("<>&\x01", 64<<10) // 256 KiB
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte(answer))
	}))
	defer target.Close()
	counter := awsclient.NewCounter()
	b := awstest.Setup(t, nil, stack.Options{Counter: counter})
	s := b.Stack
	tok := b.Token("u-largest", "user", "pro")
	secret := b.Must(b.Call("GET", "/v1/webhooks/secret", tok, nil), 200).Body["secret"].(string)
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	receiver := &hooks{got: make(chan struct{}, 10)}
	srv := httptest.NewServer(receiver.handler(wh))
	defer srv.Close()
	b.Must(b.Call("POST", "/v1/webhooks", tok, map[string]any{"url": srv.URL + "/endpoint", "events": []string{job.EventSucceeded}}), 201)
	tap := tapBus(t, s)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	frames := openSSE(t, ctx, s.StreamURL+"/v1/events", tok)

	// Headers and body at the contract's 64 KiB together.
	headers := map[string]string{"X-Large": strings.Repeat("v", 4<<10), "Content-Type": "text/html"}
	size := 0
	for k, v := range headers {
		size += len(k) + len(v)
	}
	body := strings.Repeat("<&>", (64<<10-size)/3)
	body += strings.Repeat("<", 64<<10-size-len(body))
	// Sent as a client would write it: < as one byte (encoding/json's
	// default, \u003c, would take six and exceed the 256 KiB request).
	var req strings.Builder
	enc := json.NewEncoder(&req)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(map[string]any{"type": "http", "webhookUrl": srv.URL + "/hook",
		"params": map[string]any{"method": "POST", "url": target.URL + "/largest?q=<&>", "headers": headers, "body": body}}); err != nil {
		t.Fatal(err)
	}
	r := b.Must(b.Call("POST", "/v1/jobs", tok, []byte(req.String()), "Content-Type", "application/json"), 201)
	id := r.Body["id"].(string)
	done := b.WaitStatus(tok, id, "succeeded")
	t.Logf("the job's document is %d bytes as the API answers it", len(done.Raw))
	params, _ := done.Body["params"].(map[string]any)
	if params["body"] != body {
		t.Errorf("the job's params body changed: %d bytes, want %d", len(params["body"].(string)), len(body))
	}
	if res, _ := done.Body["result"].(map[string]any); res == nil || res["status"] != float64(200) || !strings.HasPrefix(answer, res["body"].(string)) {
		t.Errorf("the job's result is not a prefix of the answer: %.300s", done.Raw)
	}

	// The user's list and the inspector's page hold it.
	list := b.Must(b.Call("GET", "/v1/jobs?limit=200", tok, nil), 200)
	if jobs, _ := list.Body["jobs"].([]any); len(jobs) != 1 {
		t.Errorf("GET /v1/jobs: %d jobs, want 1: %.300s", len(jobs), list.Raw)
	}
	op := b.Token("op-largest", "admin", "")
	page := b.Must(b.Call("GET", "/v1/admin/jobs?owner=u-largest&limit=200", op, nil), 200)
	if jobs, _ := page.Body["jobs"].([]any); len(jobs) != 1 {
		t.Errorf("GET /v1/admin/jobs: %d jobs, want 1: %.300s", len(jobs), page.Raw)
	}

	// SSE carries the outcome with the job.
	sseDeadline := time.After(30 * time.Second)
	for seen := false; !seen; {
		select {
		case f, ok := <-frames:
			if !ok {
				t.Fatal("the event stream ended")
			}
			if f.Event == job.EventSucceeded && strings.Contains(f.Data, id) {
				seen = true
				var ev job.EventBody
				if err := json.Unmarshal([]byte(f.Data), &ev); err != nil || !strings.Contains(string(ev.Job), `"succeeded"`) {
					t.Errorf("the SSE job.succeeded does not carry the job: %v %.300s", err, f.Data)
				}
			}
		case <-sseDeadline:
			t.Fatal("no job.succeeded for the job on the event stream")
		}
	}

	// Every lifecycle event of the job reached the bus, in order.
	var types []string
	busDeadline := time.Now().Add(45 * time.Second)
	for !slices.Contains(types, job.EventSucceeded) && time.Now().Before(busDeadline) {
		for _, ev := range tap.receive(t) {
			if ev.Detail.JobID == id {
				types = append(types, ev.DetailType)
			}
		}
	}
	if want := []string{job.EventEnqueued, job.EventStarted, job.EventSucceeded}; !slices.Equal(types, want) {
		t.Errorf("the job's events on the bus: %v, want %v", types, want)
	}
	items := counter.Items()
	if largest := items["EventBridge.PutEvents largest entry bytes"]; largest > relay.MaxPutBytes || largest == 0 {
		t.Errorf("the largest PutEvents entry sent was %d bytes, want 1 … %d (EventBridge's limit)", largest, relay.MaxPutBytes)
	}

	// Both webhooks arrived: the job's own and the endpoint's.
	hookDeadline := time.Now().Add(30 * time.Second)
	for {
		receiver.mu.Lock()
		n := len(receiver.events)
		got := slices.Clone(receiver.events)
		bad := receiver.bad
		receiver.mu.Unlock()
		if n >= 2 || time.Now().After(hookDeadline) {
			if !slices.Equal(got, []string{job.EventSucceeded, job.EventSucceeded}) || bad != 0 {
				t.Errorf("webhooks: %v with %d bad signatures, want job.succeeded twice (webhookUrl and endpoint)", got, bad)
			}
			break
		}
		select {
		case <-receiver.got:
		case <-time.After(time.Second):
		}
	}
}
