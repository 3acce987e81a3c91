package stack_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/conveyor/conveyor/localstack/awstest"
	"github.com/conveyor/conveyor/localstack/lambdaruntime"
	"github.com/conveyor/conveyor/localstack/stack"
)

// openStream opens url's /v1/events as tok and, when it is served, reads
// its snapshot so that the stream is really running. The response's body
// is left open; status is 0 when the request failed.
func openStream(t *testing.T, ctx context.Context, url, tok string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url+"/v1/events", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err.Error()
	}
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, string(body)
	}
	select {
	case f := <-awstest.ReadSSE(resp.Body):
		if f.Event != "snapshot" {
			t.Fatalf("first frame %q, want snapshot", f.Event)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no snapshot")
	}
	return resp, ""
}

// TestAStreamWhoseClientWentEndsAndFreesItsSlot runs the stream function
// as its binary behind a function URL that, as in AWS, does not stop a
// streaming invocation when its client goes. A user opens as many streams
// as allowed and closes them all (a dashboard reloaded): the closed
// streams still hold their slots, so an open at once is refused (429 with
// Retry-After, at once); once the streams have run their lifetime
// (CONVEYOR_STREAM_LIFETIME) they end by themselves, free their slots, and
// as many streams are served again.
func TestAStreamWhoseClientWentEndsAndFreesItsSlot(t *testing.T) {
	t.Parallel()
	const max = 2
	lifetime := 2 * time.Second
	b := setupBinaries(t, map[string]string{"CONVEYOR_STREAM_MAX_PER_USER": "2", "CONVEYOR_STREAM_PING": "15s",
		"CONVEYOR_STREAM_LIFETIME": lifetime.String()}, stack.Options{})
	s := b.Stack
	tok := b.Token("u-slots", "user", "free")

	ctx, cancel := context.WithCancel(context.Background())
	for i := range max {
		if resp, body := openStream(t, ctx, s.StreamURL, tok); resp == nil || resp.StatusCode != http.StatusOK {
			cancel()
			t.Fatalf("stream %d: %v %s, want 200", i, resp, body)
		}
	}
	cancel() // the client goes away from every stream at once
	closed := time.Now()

	resp, body := openStream(t, context.Background(), s.StreamURL, tok)
	if resp == nil || resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(body, "too_many_streams") || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("an open just after the client left: %v %s; want 429 too_many_streams with Retry-After (the closed streams run on, as in AWS)", resp, body)
	}
	b.EventuallyEvery(250*time.Millisecond, func() bool {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		for range max {
			resp, _ := openStream(t, ctx, s.StreamURL, tok)
			if resp == nil || resp.StatusCode != http.StatusOK {
				return false
			}
		}
		return true
	}, "the closed streams to end at their lifetime and free their slots")
	if waited := time.Since(closed); waited < lifetime/2 {
		t.Errorf("the slots were free %s after the client left, before the streams' lifetime (%s): the function was stopped when its client went", waited, lifetime)
	}
}

// TestARefusedStreamOpenAnswersAtOnce: the stream function has few
// executions (its reserved concurrency, which the local function URL
// enforces as Lambda does). A user holding all its streams keeps opening
// more: each is refused at once (429 with Retry-After), so the refusals do
// not hold the function's executions, and another user's stream opened
// just after is served.
func TestARefusedStreamOpenAnswersAtOnce(t *testing.T) {
	t.Parallel()
	b := setupBinaries(t, map[string]string{"CONVEYOR_STREAM_MAX_PER_USER": "2", "CONVEYOR_STREAM_PING": "15s"},
		stack.Options{StreamConcurrency: 4})
	s := b.Stack
	greedy, other := b.Token("u-greedy", "user", "free"), b.Token("u-other", "user", "free")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for i := range 2 {
		if resp, body := openStream(t, ctx, s.StreamURL, greedy); resp == nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("greedy stream %d: %v %s, want 200", i, resp, body)
		}
	}

	// Eight refused opens at once, into the two free executions.
	var wg sync.WaitGroup
	refused := make(chan string, 8)
	for range 8 {
		wg.Go(func() {
			resp, body := openStream(t, context.Background(), s.StreamURL, greedy)
			switch {
			case resp == nil:
				refused <- "failed: " + body
			case resp.StatusCode != http.StatusTooManyRequests:
				resp.Body.Close()
				refused <- resp.Status + " " + body
			case body != lambdaruntime.ThrottledBody && (!strings.Contains(body, "too_many_streams") || resp.Header.Get("Retry-After") == ""):
				refused <- "429 without the error or Retry-After: " + body
			}
		})
	}
	// Another user's open just after: served within a second or two, while
	// a refusal that waited for a slot would still hold both executions.
	time.Sleep(100 * time.Millisecond)
	deadline := time.Now().Add(2 * time.Second)
	for {
		resp, body := openStream(t, ctx, s.StreamURL, other)
		if resp != nil && resp.StatusCode == http.StatusOK {
			break
		}
		if resp == nil || body != lambdaruntime.ThrottledBody || time.Now().After(deadline) {
			t.Fatalf("another user's open: %v %s; want it served while the refused opens have answered", resp, body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	wg.Wait()
	close(refused)
	for r := range refused {
		t.Errorf("a refused open: %s", r)
	}
}
