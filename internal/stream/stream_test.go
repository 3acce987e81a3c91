package stream_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/conveyor/conveyor/internal/aws/awsclient"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/localstack/awstest"
	"github.com/conveyor/conveyor/localstack/stack"
)

func TestMain(m *testing.M) { awstest.Main(m) }

type frame = awstest.SSEFrame

// open connects to an SSE URL and returns a channel of frames.
func open(t *testing.T, ctx context.Context, url, token, lastID string) (<-chan frame, *http.Response) {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	ch := awstest.ReadSSE(resp.Body)
	return ch, resp
}

func next(t *testing.T, ch <-chan frame, skipPings bool) frame {
	t.Helper()
	for {
		select {
		case f, ok := <-ch:
			if !ok {
				t.Fatal("stream closed")
			}
			if skipPings && f.Event == "ping" {
				continue
			}
			return f
		case <-time.After(20 * time.Second):
			t.Fatal("no frame within 20 s")
		}
	}
}

// ends fails unless the stream ends (pings aside) within 10 s.
func ends(t *testing.T, ch <-chan frame, after string) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case f, ok := <-ch:
			if !ok {
				return
			}
			if f.Event != "ping" {
				t.Fatalf("%s: frame %+v, want the stream to end", after, f)
			}
		case <-deadline:
			t.Fatalf("%s: the stream is still open after 10 s", after)
		}
	}
}

func TestJobStreamSnapshotLiveResumeAndDisconnect(t *testing.T) {
	t.Parallel()
	counter := awsclient.NewCounter()
	b := awstest.Setup(t, map[string]string{"CONVEYOR_STREAM_PING": "300ms"}, stack.Options{Counter: counter})
	tok := b.Token("u-sse", "user", "pro")
	b.Connect(tok)
	up := b.Upload(tok, awstest.PNG(t, 6))
	id := b.Must(b.Call("POST", "/v1/jobs", tok, map[string]any{"items": []any{map[string]any{"uploadId": up}}, "params": map[string]any{"title": "streamed"}, "scheduleAt": time.Now().Add(time.Hour).Format(time.RFC3339)}), 201).Body["id"].(string)

	// Someone else's job: 404 before any stream.
	other := b.Token("u-other", "user", "pro")
	if _, resp := open(t, context.Background(), b.Stack.APIURL+"/v1/jobs/"+id+"/events", other, ""); resp.StatusCode != 404 {
		t.Fatalf("foreign job stream: %d", resp.StatusCode)
	}

	ctx, cancel := context.WithCancel(context.Background())
	ch, resp := open(t, ctx, b.Stack.APIURL+"/v1/jobs/"+id+"/events", tok, "")
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q", ct)
	}
	snap := next(t, ch, false)
	if snap.Event != "snapshot" || !strings.Contains(snap.Data, `"status":"scheduled"`) {
		t.Fatalf("first frame %+v, want the snapshot", snap)
	}
	if f := next(t, ch, false); f.Event != "ping" {
		t.Fatalf("no ping while idle: %+v", f)
	}
	// Run it: release now, the pollers publish it.
	if _, err := b.Stack.App.Jobs.Requeue(context.Background(), id, job.Release); err != nil {
		t.Fatal(err)
	}
	var seen []frame
	var lags []time.Duration
	for {
		f := next(t, ch, true)
		seen = append(seen, f)
		var at struct {
			At time.Time `json:"at"`
		}
		if json.Unmarshal([]byte(f.Data), &at) == nil && !at.At.IsZero() {
			lags = append(lags, time.Since(at.At))
		}
		if f.Event == job.EventSucceeded {
			break
		}
	}
	var sum, worst time.Duration
	for _, l := range lags {
		sum += l
		worst = max(worst, l)
	}
	if len(lags) > 0 {
		t.Logf("transition → SSE client: mean %s, worst %s over %d events", sum/time.Duration(len(lags)), worst, len(lags))
	}
	wantOrder := []string{job.EventEnqueued, job.EventStarted}
	for i, w := range wantOrder {
		if seen[i].Event != w {
			t.Fatalf("event %d = %s, want %s (all: %+v)", i, seen[i].Event, w, seen)
		}
	}
	prev := int64(0)
	for _, f := range seen {
		var body struct {
			Seq int64 `json:"seq"`
			Job struct {
				Status string `json:"status"`
			} `json:"job"`
		}
		if err := json.Unmarshal([]byte(f.Data), &body); err != nil {
			t.Fatalf("%s: %v", f.Data, err)
		}
		if body.Seq != prev+1 || f.ID == "" {
			t.Errorf("event %s seq %d after %d (id %q): ids must be consecutive", f.Event, body.Seq, prev, f.ID)
		}
		prev = body.Seq
	}
	last := seen[len(seen)-1]
	if !strings.Contains(last.Data, `"status":"succeeded"`) {
		t.Errorf("the completed event does not carry the succeeded job: %s", last.Data)
	}
	// The job is finished, and so is its stream.
	ends(t, ch, "after job.succeeded")
	// The persisted job agrees with what the event said.
	j, _ := b.Stack.App.Store.GetJob(context.Background(), id)
	if j.Status != job.Succeeded || j.EventSeq < prev {
		t.Errorf("stored job %s seq %d, event seq %d", j.Status, j.EventSeq, prev)
	}
	cancel()

	// Resume after the second event: everything from the third on comes again.
	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	ch2, _ := open(t, ctx2, b.Stack.APIURL+"/v1/jobs/"+id+"/events", tok, "2")
	if f := next(t, ch2, false); f.Event != "snapshot" {
		t.Fatalf("resume: first frame %+v", f)
	}
	if f := next(t, ch2, true); f.ID != "3" || f.Event != seen[2].Event {
		t.Errorf("resume: got %+v, want id 3 %s", f, seen[2].Event)
	}
	for f := next(t, ch2, true); f.Event != job.EventSucceeded; f = next(t, ch2, true) {
	}
	ends(t, ch2, "a resumed stream of a finished job, after job.succeeded")
	cancel2()

	// A finished job's stream: its snapshot, then the end.
	ch3, _ := open(t, context.Background(), b.Stack.APIURL+"/v1/jobs/"+id+"/events", tok, "")
	if f := next(t, ch3, false); f.Event != "snapshot" || !strings.Contains(f.Data, `"status":"succeeded"`) {
		t.Fatalf("finished job: first frame %+v, want the succeeded snapshot", f)
	}
	ends(t, ch3, "a finished job's snapshot")

	// A closed client stops the server's work: its reads end with it.
	b.Eventually(func() bool { return b.Stack.App.Streams.Active() == 0 }, "every stream to end after its client left")
}

func TestAllJobsStream(t *testing.T) {
	t.Parallel()
	b := awstest.Setup(t, map[string]string{"CONVEYOR_STREAM_PING": "1s"}, stack.Options{})
	tok := b.Token("u-all", "user", "free")
	b.Connect(tok)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, _ := open(t, ctx, b.Stack.APIURL+"/v1/events", tok, "")
	if f := next(t, ch, false); f.Event != "snapshot" {
		t.Fatalf("first frame %+v", f)
	}
	up := b.Upload(tok, awstest.PNG(t, 7))
	id := b.Must(b.Call("POST", "/v1/jobs", tok, map[string]any{"items": []any{map[string]any{"uploadId": up}}, "params": map[string]any{"title": "all"}}), 201).Body["id"].(string)
	for {
		f := next(t, ch, true)
		if !strings.HasPrefix(f.ID, id+":") {
			t.Fatalf("event of another job: %+v", f)
		}
		if f.Event == job.EventSucceeded {
			break
		}
	}
}
