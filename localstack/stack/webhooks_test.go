package stack_test

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/localstack/awstest"
	"github.com/conveyor/conveyor/localstack/stack"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// tarpit accepts connections and never answers: each one is held until the
// client gives up. It records how many it held at once.
type tarpit struct {
	ln       net.Listener
	mu       sync.Mutex
	open     int
	peak     int
	accepted int
}

func newTarpit(t *testing.T) *tarpit {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tp := &tarpit{ln: ln}
	var conns sync.WaitGroup
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			tp.mu.Lock()
			tp.open++
			tp.accepted++
			tp.peak = max(tp.peak, tp.open)
			tp.mu.Unlock()
			conns.Go(func() {
				_, _ = io.Copy(io.Discard, c) // until the client closes it
				_ = c.Close()
				tp.mu.Lock()
				tp.open--
				tp.mu.Unlock()
			})
		}
	}()
	t.Cleanup(func() { _ = ln.Close() })
	return tp
}

func (tp *tarpit) URL() string { return "http://" + tp.ln.Addr().String() }

func (tp *tarpit) stats() (accepted, peak int) {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return tp.accepted, tp.peak
}

// timedHooks is a webhook receiver that records when each job's
// job.succeeded webhook arrived.
type timedHooks struct {
	mu  sync.Mutex
	at  map[string]time.Time
	bad int
}

func (h *timedHooks) handler(wh *standardwebhooks.Webhook) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		h.mu.Lock()
		defer h.mu.Unlock()
		if wh.Verify(body, r.Header) != nil {
			h.bad++
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		id := r.URL.Query().Get("job")
		if _, ok := h.at[id]; !ok {
			h.at[id] = time.Now()
		}
		w.WriteHeader(http.StatusNoContent)
	}
}

func (h *timedHooks) arrived(id string) (time.Time, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	at, ok := h.at[id]
	return at, ok
}

// TestTarpitEndpointsLeaveAnotherOwnersWebhookOnTime: one owner's 20
// endpoints accept connections and never answer (each delivery to them
// waits for the whole webhook timeout, 10 s, and is retried), and that
// owner's jobs give them hundreds of deliveries. Another owner's webhook,
// measured alone and then beside that load, still arrives in a few
// seconds: the tarpit owner's deliveries run in its own few slots of the
// system tier (at most one per endpoint), never in everyone's. With a
// message group per delivery, the tier's pollers all sat in the tarpit
// and the other owner's webhook waited behind hundreds of 10 s timeouts.
func TestTarpitEndpointsLeaveAnotherOwnersWebhookOnTime(t *testing.T) {
	t.Parallel()
	const slots = 4
	pit := newTarpit(t)
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	defer target.Close()
	b := awstest.Setup(t, map[string]string{"CONVEYOR_WEBHOOK_SLOTS": "4"}, stack.Options{})

	// The quiet owner's receiver, and its first webhook alone.
	quiet := b.Token("u-wh-quiet", "user", "pro")
	secret := b.Must(b.Call("GET", "/v1/webhooks/secret", quiet, nil), 200).Body["secret"].(string)
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	receiver := &timedHooks{at: map[string]time.Time{}}
	srv := httptest.NewServer(receiver.handler(wh))
	defer srv.Close()
	measure := func(limit time.Duration) (time.Duration, bool) {
		t.Helper()
		// The job's id is known after the submission only: the
		// receiver keys by a tag of our own in the webhook URL.
		tag := time.Now().Format("150405.000000000")
		start := time.Now()
		b.Must(b.Call("POST", "/v1/jobs", quiet, map[string]any{"type": "http", "webhookUrl": srv.URL + "/hook?job=" + tag,
			"params": map[string]any{"method": "GET", "url": target.URL + "/quiet"}}), 201)
		for time.Since(start) < limit {
			if at, ok := receiver.arrived(tag); ok {
				return at.Sub(start), true
			}
			time.Sleep(50 * time.Millisecond)
		}
		return time.Since(start), false
	}
	alone, ok := measure(60 * time.Second)
	if !ok {
		t.Fatalf("the quiet owner's webhook did not arrive alone within %s", alone)
	}

	// The noisy owner: 20 tarpit endpoints, and jobs whose outcomes fan
	// out to them.
	noisy := b.Token("u-wh-tarpit", "user", "pro")
	for i := range 20 {
		b.Must(b.Call("POST", "/v1/webhooks", noisy, map[string]any{"url": pit.URL() + "/pit/" + string(rune('a'+i)), "events": []string{job.EventSucceeded}}), 201)
	}
	ids := make([]string, 0, 30)
	for i := range 30 {
		r := b.Must(b.Call("POST", "/v1/jobs", noisy, map[string]any{"type": "http", "params": map[string]any{"method": "GET", "url": fmt.Sprintf("%s/noisy?i=%d", target.URL, i)}}), 201)
		ids = append(ids, r.Body["id"].(string))
	}
	waitAllSucceeded(b, ids)
	b.Eventually(func() bool { n, _ := pit.stats(); return n >= slots }, "the tarpit holds deliveries")

	// Generous: the load is 600 deliveries of 10 s each; the quiet
	// owner's webhook alone takes about a second. Measured three times,
	// a few seconds apart, while the tarpit holds the noisy owner's slots.
	const bound = 30 * time.Second
	var beside []time.Duration
	worst := time.Duration(0)
	arrived := true
	for i := range 3 {
		if i > 0 {
			time.Sleep(4 * time.Second)
		}
		took, ok := measure(2 * bound)
		beside = append(beside, took.Round(time.Millisecond))
		worst = max(worst, took)
		arrived = arrived && ok
	}
	accepted, peak := pit.stats()
	t.Logf("the quiet owner's webhook: %s alone, %v beside 20 tarpit endpoints of another owner (all arrived: %v); the tarpit accepted %d deliveries, at most %d at once",
		alone.Round(time.Millisecond), beside, arrived, accepted, peak)
	if !arrived || worst > bound {
		t.Errorf("the quiet owner's webhook took %v beside the tarpit (all arrived: %v), want each under %s (alone: %s)", beside, arrived, bound, alone.Round(time.Millisecond))
	}
	if peak > slots+1 {
		t.Errorf("the tarpit owner had %d deliveries in flight at once, want at most its %d slots", peak, slots)
	}
	receiver.mu.Lock()
	defer receiver.mu.Unlock()
	if receiver.bad != 0 {
		t.Errorf("%d webhooks with a bad signature", receiver.bad)
	}
}
