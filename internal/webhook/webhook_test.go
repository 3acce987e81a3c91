package webhook_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/conveyor/conveyor/internal/netguard"

	"github.com/conveyor/conveyor/internal/aws/queue"
	"github.com/conveyor/conveyor/internal/aws/store"
	"github.com/conveyor/conveyor/internal/ids"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/webhook"
	"github.com/conveyor/conveyor/localstack/awstest"
	"github.com/conveyor/conveyor/localstack/stack"
)

func TestMain(m *testing.M) { awstest.Main(m) }

// receiver is a webhook endpoint on loopback that verifies every delivery
// with the Standard Webhooks library and the owner's secret.
type receiver struct {
	mu      sync.Mutex
	wh      *standardwebhooks.Webhook
	fail    int // answer 500 this many times first
	ids     []string
	got     []http.Header
	bodies  [][]byte
	badSigs int
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.wh.Verify(body, req.Header); err != nil {
		r.badSigs++
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	r.ids = append(r.ids, req.Header.Get(webhook.HeaderID))
	if r.fail > 0 {
		r.fail--
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	r.got = append(r.got, req.Header.Clone())
	r.bodies = append(r.bodies, body)
	w.WriteHeader(http.StatusNoContent)
}

func (r *receiver) delivered() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.got)
}

// ownerSecret reads the caller's signing secret through the API and
// returns the library's verifier for it.
func ownerSecret(t *testing.T, b *awstest.Bundle, tok string) *standardwebhooks.Webhook {
	t.Helper()
	r := b.Must(b.Call("GET", "/v1/webhooks/secret", tok, nil), 200)
	secret, _ := r.Body["secret"].(string)
	if !strings.HasPrefix(secret, "whsec_") {
		t.Fatalf("secret %q is not whsec_…", secret)
	}
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	return wh
}

// failedJob stores a job of owner that has just failed, with webhookURL
// (may be empty), as the publisher would: its job.failed event waits in
// the outbox for the relay.
func failedJob(t *testing.T, b *awstest.Bundle, owner, webhookURL string) string {
	t.Helper()
	now := time.Now()
	j := &job.Job{ID: ids.New(ids.Job), Owner: owner, Status: job.Queued, Tier: "low", WebhookURL: webhookURL,
		CreatedAt: now, UpdatedAt: now, Hash: ids.New("h")}
	j.Emit(job.EventFailed, now, nil)
	if _, _, err := b.Stack.App.Store.CreateJob(context.Background(), j); err != nil {
		t.Fatal(err)
	}
	return j.ID
}

// TestWebhookRetriedThenDelivered: a job with a webhook URL fails; the
// relay queues the delivery, the system tier POSTs it signed with the
// owner's secret, the receiver verifies it with the Standard Webhooks
// library, answers 500 twice, then accepts; every attempt carries the same
// webhook-id; the delivery and its webhook.delivered event are kept.
func TestWebhookRetriedThenDelivered(t *testing.T) {
	t.Parallel()
	b := awstest.Setup(t, map[string]string{"CONVEYOR_SCHEDULE_INTERVAL": "200ms", "CONVEYOR_RECOVERY_INTERVAL": "1h"}, stack.Options{})
	tok := b.Token("u-hook", "user", "pro")
	rec := &receiver{fail: 2, wh: ownerSecret(t, b, tok)}
	srv := httptest.NewServer(rec)
	defer srv.Close()
	id := failedJob(t, b, "u-hook", srv.URL+"/hook")
	b.Eventually(func() bool { return rec.delivered() > 0 }, "the webhook to arrive")
	rec.mu.Lock()
	h, body, bad, ids := rec.got[0], rec.bodies[0], rec.badSigs, slices.Clone(rec.ids)
	rec.mu.Unlock()
	if bad != 0 {
		t.Errorf("%d deliveries with a bad signature", bad)
	}
	if h.Get(webhook.HeaderEvent) != job.EventFailed {
		t.Errorf("headers %v", h)
	}
	if want := webhook.DeliveryID(id, 1, ""); len(ids) != 3 || ids[0] != want || ids[1] != want || ids[2] != want {
		t.Errorf("webhook-id of the three attempts %v: want %s on each", ids, want)
	}
	var ev struct {
		Type string `json:"type"`
		Job  struct {
			ID string `json:"id"`
		} `json:"job"`
	}
	if err := json.Unmarshal(body, &ev); err != nil || ev.Job.ID != id || ev.Type != job.EventFailed {
		t.Errorf("body %s (%v)", body, err)
	}
	// The outcome is an event of the job too.
	b.Eventually(func() bool {
		evs, _ := b.Stack.App.Store.Events(context.Background(), id, 0, 100)
		for _, e := range evs {
			if e.Type == job.EventWebhookDelivered {
				return true
			}
		}
		return false
	}, "the webhook.delivered event")
}

// TestTargetsThatAreNotPublicAreRefused: outside the local environment a
// loopback receiver is never called, whatever the URL's spelling.
func TestTargetsThatAreNotPublicAreRefused(t *testing.T) {
	t.Parallel()
	b := awstest.Setup(t, nil, stack.Options{DisablePollers: true})
	hit := make(chan struct{}, 10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hit <- struct{}{} }))
	defer srv.Close()
	app := b.Stack.App
	d := webhook.New(webhook.Config{Store: app.Store, Keys: app.WebhookKeys, Local: false})
	ctx := context.Background()
	port := srv.URL[len("http://127.0.0.1:"):]
	for i, target := range []string{srv.URL, "https://127.0.0.1:" + port, "https://0x7f000001:" + port, "https://2130706433:" + port,
		"https://[::1]:" + port, "https://10.0.0.1/", "https://169.254.169.254/latest/meta-data", "https://localhost:" + port} {
		j := &job.Job{ID: "job_" + string(rune('a'+i)) + "aaaaaaaaaaaaaaaaaaaaaaaaa", Owner: "u", Status: job.Queued, Tier: "low", WebhookURL: target,
			CreatedAt: time.Now(), UpdatedAt: time.Now(), Hash: target}
		j.Emit(job.EventFailed, time.Now(), nil)
		if _, _, err := app.Store.CreateJob(ctx, j); err != nil {
			t.Fatal(err)
		}
		v, err := d.Deliver(ctx, queue.Message{Kind: queue.KindWebhook, JobID: j.ID, Seq: 1, DeliveryID: "dlv"}, 1)
		if err != nil || !v.Done {
			t.Errorf("%s: verdict %+v %v, want done (refused)", target, v, err)
		}
		evs, _ := app.Store.Events(ctx, j.ID, 1, 10)
		if len(evs) != 1 || evs[0].Type != job.EventWebhookFailed {
			t.Errorf("%s: events %+v, want webhook.failed", target, evs)
		}
	}
	select {
	case <-hit:
		t.Error("a non-public target was called")
	default:
	}
	var _ store.EventRecord
}

type rebinding = netguard.Rebinding

// TestRebindingIsRefusedAtConnectTime: a receiver name that passes the URL
// check and then resolves to loopback is refused when the connection is
// made; the loopback receiver never sees a connection.
func TestRebindingIsRefusedAtConnectTime(t *testing.T) {
	t.Parallel()
	b := awstest.Setup(t, nil, stack.Options{DisablePollers: true})
	var conns atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.StartTLS()
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	app := b.Stack.App
	d := webhook.New(webhook.Config{Store: app.Store, Keys: app.WebhookKeys, Local: false, Resolver: &rebinding{}})
	ctx := context.Background()
	j := &job.Job{ID: "job_rebindaaaaaaaaaaaaaaaaaaa", Owner: "u", Status: job.Queued, Tier: "low", WebhookURL: "https://rebind.test:" + port + "/hook",
		CreatedAt: time.Now(), UpdatedAt: time.Now(), Hash: "rebind"}
	j.Emit(job.EventFailed, time.Now(), nil)
	if _, _, err := app.Store.CreateJob(ctx, j); err != nil {
		t.Fatal(err)
	}
	v, err := d.Deliver(ctx, queue.Message{Kind: queue.KindWebhook, JobID: j.ID, Seq: 1, DeliveryID: "dlv"}, 1)
	if err != nil || !v.Done {
		t.Errorf("verdict %+v %v, want done (refused)", v, err)
	}
	evs, _ := app.Store.Events(ctx, j.ID, 1, 10)
	if len(evs) != 1 || evs[0].Type != job.EventWebhookFailed {
		t.Errorf("events %+v, want webhook.failed", evs)
	}
	if n := conns.Load(); n != 0 {
		t.Errorf("%d connections reached the loopback receiver", n)
	}
}
