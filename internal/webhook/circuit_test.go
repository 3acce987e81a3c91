package webhook_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/conveyor/conveyor/internal/aws/queue"
	"github.com/conveyor/conveyor/internal/aws/store"
	simclock "github.com/conveyor/conveyor/internal/clock"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/webhook"
)

// TestCircuitArithmetic: closed below the threshold, then the cooldown
// doubling with each failed probe, capped.
func TestCircuitArithmetic(t *testing.T) {
	t.Parallel()
	c := webhook.Circuit{Failures: 3, Cooldown: time.Minute, Max: 10 * time.Minute}
	for failures, want := range map[int]time.Duration{
		0: 0, 1: 0, 2: 0, 3: time.Minute, 4: 2 * time.Minute, 5: 4 * time.Minute, 6: 8 * time.Minute, 7: 10 * time.Minute, 60: 10 * time.Minute, 1 << 20: 10 * time.Minute,
	} {
		if got := c.OpenFor(failures); got != want {
			t.Errorf("after %d failures: open %s, want %s", failures, got, want)
		}
	}
	now := time.Date(2026, 5, 6, 7, 8, 9, 0, time.UTC)
	if _, open := webhook.OpenUntil(store.WebhookCircuit{Failures: 2}, now); open {
		t.Error("a circuit never opened is open")
	}
	until, open := webhook.OpenUntil(store.WebhookCircuit{Failures: 3, OpenUntilMs: now.Add(time.Minute).UnixMilli()}, now)
	if !open || !until.Equal(now.Add(time.Minute)) {
		t.Errorf("open until %s (%v), want %s", until, open, now.Add(time.Minute))
	}
	if _, open := webhook.OpenUntil(store.WebhookCircuit{Failures: 3, OpenUntilMs: now.UnixMilli()}, now); open {
		t.Error("a circuit whose time is over is still open")
	}
	day := webhook.Circuit{Failures: 3, Cooldown: time.Minute, Max: time.Hour, DisableAfter: 24 * time.Hour}
	for _, c := range []struct {
		since time.Duration // failing for this long; 0: not failing
		want  bool
	}{{0, false}, {time.Hour, false}, {24*time.Hour - time.Millisecond, false}, {24 * time.Hour, true}, {48 * time.Hour, true}} {
		st := store.WebhookCircuit{Failures: 10}
		if c.since > 0 {
			st.FailingSinceMs = now.Add(-c.since).UnixMilli()
		}
		if got := day.Disables(st, now); got != c.want {
			t.Errorf("failing for %s: disables %v, want %v", c.since, got, c.want)
		}
	}
	for _, bad := range []webhook.Circuit{{}, {Failures: 1}, {Failures: 1, Cooldown: time.Hour, Max: time.Minute}, {Failures: 1, Cooldown: time.Minute, Max: time.Hour}} {
		if bad.Validate() == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}

// TestAnEndpointsCircuitOpensAndCloses (against the emulator): two
// failures in a row open an endpoint's circuit; its deliveries then wait
// for it without a connection made or an attempt spent; the probe after
// the open period fails and opens it for twice as long; the next succeeds
// and closes it, forgetting the failures.
func TestAnEndpointsCircuitOpensAndCloses(t *testing.T) {
	t.Parallel()
	b := setupDelivery(t)
	ctx := context.Background()
	clk := simclock.NewSimulated(time.Now())
	d := webhook.New(webhook.Config{Store: b.st, Keys: b.keys, Endpoints: b.endpoints, Local: true, Now: clk.Now,
		Circuit: webhook.Circuit{Failures: 2, Cooldown: time.Minute, Max: 10 * time.Minute, DisableAfter: time.Hour},
		Retries: webhook.Schedule{Base: time.Second, Max: time.Second, Attempts: 20}})
	rec, ep := b.endpoint(t)
	rec.mu.Lock()
	rec.fail = 3
	rec.mu.Unlock()
	id := b.failed(t, "")
	ev, err := b.st.GetEvent(ctx, id, 1)
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := webhook.Planner{Endpoints: b.endpoints}.Deliveries(ctx, ev)
	if err != nil || len(msgs) != 1 {
		t.Fatalf("planned %+v (%v)", msgs, err)
	}
	m := msgs[0]
	calls := func() int { rec.mu.Lock(); defer rec.mu.Unlock(); return len(rec.ids) }
	circuit := func() store.WebhookCircuit {
		t.Helper()
		got, err := b.st.GetWebhookEndpoint(ctx, b.owner, ep.ID)
		if err != nil {
			t.Fatal(err)
		}
		return got.Circuit
	}
	// attempt delivers m as it comes back to its slot after v.
	attempt := func(v webhook.Verdict) webhook.Verdict {
		t.Helper()
		if v.Next != nil {
			m = *v.Next
		}
		v, err := d.Deliver(ctx, m, 1)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}

	v := attempt(webhook.Verdict{})
	if v.Done || v.Next == nil || calls() != 1 || circuit().Failures != 1 || circuit().OpenUntilMs != 0 {
		t.Fatalf("first failure: %+v, %d calls, circuit %+v: want a retry, the circuit closed", v, calls(), circuit())
	}
	v = attempt(v)
	opened := clk.Now().Add(time.Minute)
	if c := circuit(); calls() != 2 || c.Failures != 2 || c.OpenUntilMs != opened.UnixMilli() {
		t.Fatalf("second failure: circuit %+v, %d calls: want it open until %s", c, calls(), opened)
	}
	v = attempt(v)
	if v.Done || v.Next == nil || !v.Next.RetryAt.Equal(time.UnixMilli(opened.UnixMilli())) || v.Next.Attempts != 2 || calls() != 2 {
		t.Fatalf("while open: %+v, %d calls: want to wait for the circuit, no call, no attempt spent", v, calls())
	}
	clk.Advance(time.Minute + time.Second)
	v = attempt(v) // the probe fails: open twice as long
	if c := circuit(); calls() != 3 || c.Failures != 3 || c.OpenUntilMs != clk.Now().Add(2*time.Minute).UnixMilli() {
		t.Fatalf("a failed probe: circuit %+v, %d calls: want it open 2m", c, calls())
	}
	clk.Advance(2*time.Minute + time.Second)
	v = attempt(v)
	if !v.Done || calls() != 4 || rec.delivered() != 1 || circuit() != (store.WebhookCircuit{}) {
		t.Fatalf("the probe that succeeds: %+v, %d calls, circuit %+v: want delivered, the circuit closed and its failures forgotten", v, calls(), circuit())
	}
	if out := b.outcome(t, id); len(out) != 1 || out[0].Type != job.EventWebhookDelivered {
		t.Errorf("outcome events %+v: want one webhook.delivered", out)
	}
}

// TestAnEndpointFailingTooLongIsDisabledThenEnabled (against the
// emulator): an endpoint whose attempts have failed, with no success
// between, for longer than DisableAfter is disabled by the failure that
// finds it so: that delivery fails with a webhook.failed event saying so,
// later deliveries fail at once without a connection, and once its owner
// enables it again (its failures forgotten) deliveries reach it.
func TestAnEndpointFailingTooLongIsDisabledThenEnabled(t *testing.T) {
	t.Parallel()
	b := setupDelivery(t)
	ctx := context.Background()
	clk := simclock.NewSimulated(time.Now())
	d := webhook.New(webhook.Config{Store: b.st, Keys: b.keys, Endpoints: b.endpoints, Local: true, Now: clk.Now,
		Circuit: webhook.Circuit{Failures: 2, Cooldown: time.Minute, Max: time.Minute, DisableAfter: time.Hour},
		Retries: webhook.Schedule{Base: time.Second, Max: time.Second, Attempts: 100}})
	// A receiver that does not check the signature's timestamp: the
	// clock jumps hours ahead.
	var status, ncalls, delivered atomic.Int32
	status.Store(http.StatusInternalServerError)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		ncalls.Add(1)
		if status.Load() == http.StatusNoContent {
			delivered.Add(1)
		}
		w.WriteHeader(int(status.Load()))
	}))
	defer srv.Close()
	ep, err := b.endpoints.Create(ctx, b.owner, webhook.CreateRequest{URL: srv.URL, Events: []string{job.EventFailed}})
	if err != nil {
		t.Fatal(err)
	}
	calls := func() int { return int(ncalls.Load()) }
	plan := func() queue.Message {
		t.Helper()
		id := b.failed(t, "")
		ev, err := b.st.GetEvent(ctx, id, 1)
		if err != nil {
			t.Fatal(err)
		}
		msgs, err := webhook.Planner{Endpoints: b.endpoints}.Deliveries(ctx, ev)
		if err != nil || len(msgs) != 1 {
			t.Fatalf("planned %+v (%v)", msgs, err)
		}
		return msgs[0]
	}
	m := plan()
	for range 2 { // the circuit opens
		v, err := d.Deliver(ctx, m, 1)
		if err != nil || v.Done || v.Next == nil {
			t.Fatalf("a failure: %+v %v", v, err)
		}
		m = *v.Next
		clk.Advance(time.Second)
	}
	for range 3 { // probes fail for an hour
		clk.Advance(19 * time.Minute)
		v, err := d.Deliver(ctx, m, 1)
		if err != nil || v.Done || v.Next == nil {
			t.Fatalf("a failed probe: %+v %v", v, err)
		}
		m = *v.Next
	}
	clk.Advance(5 * time.Minute)
	v, err := d.Deliver(ctx, m, 1)
	if err != nil || !v.Done || calls() != 6 {
		t.Fatalf("the failure that finds it failing for over an hour: %+v %v, %d calls: want the delivery failed", v, err, calls())
	}
	if out := b.outcome(t, m.JobID); len(out) != 1 || out[0].Type != job.EventWebhookFailed || out[0].Detail["endpointDisabled"] != "true" {
		t.Errorf("outcome events %+v: want one webhook.failed saying the endpoint is disabled", out)
	}
	listed, err := b.endpoints.List(ctx, b.owner)
	if err != nil || len(listed) != 1 || listed[0].Enabled() {
		t.Fatalf("the endpoint after: %+v %v, want disabled", listed, err)
	}

	// Later deliveries fail at once, no connection made.
	later := plan()
	if v, err := d.Deliver(ctx, later, 1); err != nil || !v.Done || calls() != 6 {
		t.Fatalf("a delivery to the disabled endpoint: %+v %v, %d calls: want done, no call", v, err, calls())
	}

	// Enabled again by its owner: failures forgotten, deliveries go.
	status.Store(http.StatusNoContent)
	on := true
	got, err := b.endpoints.Update(ctx, b.owner, ep.ID, webhook.UpdateRequest{Enabled: &on})
	if err != nil || !got.Enabled() || got.Circuit != (store.WebhookCircuit{}) {
		t.Fatalf("enabled: %+v %v, want enabled, its circuit closed", got, err)
	}
	if v, err := d.Deliver(ctx, plan(), 1); err != nil || !v.Done || delivered.Load() != 1 {
		t.Fatalf("a delivery once enabled: %+v %v, %d delivered", v, err, delivered.Load())
	}
}
