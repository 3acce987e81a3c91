package stack_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/conveyor/conveyor/internal/aws/store"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/localstack/awstest"
	"github.com/conveyor/conveyor/localstack/stack"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// flakyReceiver answers 500 while down, 204 otherwise, and counts the
// verified requests and the accepted ones per webhook-id.
type flakyReceiver struct {
	mu       sync.Mutex
	down     bool
	tries    map[string]int
	accepted map[string]int
	bad      int
}

func (f *flakyReceiver) handler(wh *standardwebhooks.Webhook) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		defer f.mu.Unlock()
		if wh.Verify(body, r.Header) != nil {
			f.bad++
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		id := r.Header.Get("webhook-id")
		f.tries[id]++
		if f.down {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		f.accepted[id]++
		w.WriteHeader(http.StatusNoContent)
	}
}

func (f *flakyReceiver) set(down bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.down = down
}

func (f *flakyReceiver) counts() (tries, accepted map[string]int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	tries, accepted = map[string]int{}, map[string]int{}
	for k, v := range f.tries {
		tries[k] = v
	}
	for k, v := range f.accepted {
		accepted[k] = v
	}
	return tries, accepted
}

// TestFailedDeliveriesAreRedeliveredOnRequest: an endpoint that answers
// 500 spends every attempt of an owner's three deliveries; once it is back,
// POST /v1/webhooks/{id}/redeliver {"since"} makes each again, once, with
// its webhook-id, and a second such request finds nothing left to make;
// {"delivery"} makes a delivered one again; another owner cannot redeliver
// the endpoint's deliveries, and bad requests get their 4xx. Before the
// route existed, a failed delivery was never made again.
func TestFailedDeliveriesAreRedeliveredOnRequest(t *testing.T) {
	t.Parallel()
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	defer target.Close()
	b := awstest.Setup(t, map[string]string{"CONVEYOR_WEBHOOK_MAX_ATTEMPTS": "2", "CONVEYOR_WEBHOOK_CIRCUIT_FAILURES": "50"}, stack.Options{})
	owner := b.Token("u-redeliver", "user", "pro")
	secret := b.Must(b.Call("GET", "/v1/webhooks/secret", owner, nil), 200).Body["secret"].(string)
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	rcv := &flakyReceiver{down: true, tries: map[string]int{}, accepted: map[string]int{}}
	srv := httptest.NewServer(rcv.handler(wh))
	defer srv.Close()
	ep := b.Must(b.Call("POST", "/v1/webhooks", owner, map[string]any{"url": srv.URL + "/hook", "events": []string{job.EventSucceeded}}), 201).Body["id"].(string)
	path := "/v1/webhooks/" + ep + "/redeliver"
	before := time.Now().Add(-time.Second).UTC().Format(time.RFC3339Nano)

	var jobs []string
	for i := range 3 {
		r := b.Must(b.Call("POST", "/v1/jobs", owner, map[string]any{"type": "http", "params": map[string]any{"method": "GET", "url": fmt.Sprintf("%s/r?i=%d", target.URL, i)}}), 201)
		jobs = append(jobs, r.Body["id"].(string))
	}
	waitAllSucceeded(b, jobs)
	// Every delivery spent its two attempts and was recorded failed.
	st := b.Stack.App.Store
	refs := make([]store.DeliveryRef, len(jobs))
	for i, id := range jobs {
		refs[i] = store.DeliveryRef{JobID: id, ID: deliveryOf(t, b, owner, id, ep)}
	}
	b.Eventually(func() bool {
		recs, err := st.GetWebhookDeliveries(t.Context(), refs)
		if err != nil || len(recs) != len(refs) {
			return false
		}
		for _, dl := range recs {
			if dl.Status != store.DeliveryFailed {
				return false
			}
		}
		return true
	}, "three deliveries failed")
	tries, accepted := rcv.counts()
	for _, r := range refs {
		if tries[r.ID] != 2 || accepted[r.ID] != 0 {
			t.Fatalf("before any redelivery, %s: %d tries, %d accepted; want 2 and 0", r.ID, tries[r.ID], accepted[r.ID])
		}
	}

	// Bad requests, and another owner's.
	other := b.Token("u-redeliver-other", "user", "pro")
	b.Must(b.Call("POST", path, other, map[string]any{"since": before}), 404)
	b.Must(b.Call("POST", path, owner, map[string]any{}), 400)
	b.Must(b.Call("POST", path, owner, map[string]any{"since": before, "delivery": refs[0].ID}), 400)
	if r := b.Must(b.Call("POST", path, owner, map[string]any{"since": time.Now().Add(time.Hour).UTC().Format(time.RFC3339)}), 202); r.Body["queued"] != float64(0) {
		t.Errorf("redeliver since a time ahead: %s, want nothing queued", r.Raw)
	}
	b.Must(b.Call("POST", path, owner, map[string]any{"delivery": "dlv_nope_1_" + ep}), 404)
	b.Must(b.Call("POST", path, owner, map[string]any{"since": before, "cursor": "garbage"}), 422)

	// Back up: everything since before is made again, once.
	rcv.set(false)
	r := b.Must(b.Call("POST", path, owner, map[string]any{"since": before}), 202)
	if r.Body["queued"] != float64(3) || r.Body["nextCursor"] != nil {
		t.Fatalf("redeliver since: %s, want 3 queued and no cursor", r.Raw)
	}
	if again := b.Must(b.Call("POST", path, owner, map[string]any{"since": before}), 202); again.Body["queued"] != float64(0) {
		t.Errorf("a second redeliver since: %s, want nothing queued (they are under way)", again.Raw)
	}
	b.Eventually(func() bool {
		_, accepted := rcv.counts()
		for _, r := range refs {
			if accepted[r.ID] != 1 {
				return false
			}
		}
		return true
	}, "each failed delivery made again")
	b.Eventually(func() bool {
		recs, err := st.GetWebhookDeliveries(t.Context(), refs)
		return err == nil && recs[refs[0].ID].Status == store.DeliveryDelivered && recs[refs[2].ID].Status == store.DeliveryDelivered
	}, "the redeliveries recorded delivered")
	if again := b.Must(b.Call("POST", path, owner, map[string]any{"since": before}), 202); again.Body["queued"] != float64(0) {
		t.Errorf("redeliver since after they were delivered: %s, want nothing queued", again.Raw)
	}

	// One delivered delivery, on request.
	b.Must(b.Call("POST", path, owner, map[string]any{"delivery": refs[1].ID}), 202)
	b.Eventually(func() bool { _, accepted := rcv.counts(); return accepted[refs[1].ID] == 2 }, "the delivery made once more")

	// A disabled endpoint refuses.
	b.Must(b.Call("PATCH", "/v1/webhooks/"+ep, owner, map[string]any{"enabled": false}), 200)
	if r := b.Call("POST", path, owner, map[string]any{"since": before}); r.Status != 422 || !errorCode(r, "endpoint_disabled") {
		t.Errorf("redeliver to a disabled endpoint: %d %s, want 422 endpoint_disabled", r.Status, r.Raw)
	}
	time.Sleep(500 * time.Millisecond)
	tries, accepted = rcv.counts()
	for _, r := range refs {
		want := 1
		if r.ID == refs[1].ID {
			want = 2
		}
		if accepted[r.ID] != want {
			t.Errorf("%s accepted %d times, want %d (tries %d)", r.ID, accepted[r.ID], want, tries[r.ID])
		}
	}
	if rcv.bad != 0 {
		t.Errorf("%d deliveries with a bad signature", rcv.bad)
	}
}

// deliveryOf is the webhook-id of job id's job.succeeded delivery to ep.
func deliveryOf(t *testing.T, b *awstest.Bundle, token, id, ep string) string {
	t.Helper()
	r := b.Must(b.Call("GET", "/v1/jobs/"+id, token, nil), 200)
	evs, err := b.Stack.App.Store.Events(t.Context(), id, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs {
		if ev.Type == job.EventSucceeded {
			return fmt.Sprintf("dlv_%s_%d_%s", id, ev.Seq, ep)
		}
	}
	t.Fatalf("job %s has no %s event: %s", id, job.EventSucceeded, r.Raw)
	return ""
}

func errorCode(r awstest.Response, code string) bool {
	e, _ := r.Body["error"].(map[string]any)
	return e != nil && e["code"] == code
}
