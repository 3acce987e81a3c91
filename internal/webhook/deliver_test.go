package webhook_test

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kms"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/conveyor/conveyor/internal/aws/awsclient"
	"github.com/conveyor/conveyor/internal/aws/queue"
	"github.com/conveyor/conveyor/internal/aws/sealer"
	"github.com/conveyor/conveyor/internal/aws/store"
	"github.com/conveyor/conveyor/internal/ids"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/webhook"
	"github.com/conveyor/conveyor/localstack/awstest"
)

// deliveryBundle is a Deliverer on a private table whose DynamoDB requests
// are counted, with one owner's job that has just failed (its job.failed
// event is seq 1).
type deliveryBundle struct {
	st        *store.Store
	counter   *awsclient.Counter
	keys      *webhook.Keys
	endpoints *webhook.Endpoints
	d         *webhook.Deliverer
	owner     string
}

func setupDelivery(t *testing.T) *deliveryBundle {
	t.Helper()
	env := awstest.Provision(t)
	b := &deliveryBundle{counter: awsclient.NewCounter(), owner: "u-" + ids.New("t")}
	table := env.Res.Definition.Table.Name
	db := awsclient.New(b.counter.Attach(env.Config)).DynamoDB
	b.st = store.New(db, table, time.Now)
	var err error
	b.keys, err = webhook.NewKeys(webhook.KeysConfig{Store: b.st, Sealer: sealer.New(kms.NewFromConfig(env.Config), env.Res.KMSKeyID)})
	if err != nil {
		t.Fatal(err)
	}
	b.endpoints, err = webhook.NewEndpoints(webhook.EndpointsConfig{Store: b.st, Local: true})
	if err != nil {
		t.Fatal(err)
	}
	b.d = webhook.New(webhook.Config{Store: b.st, Keys: b.keys, Endpoints: b.endpoints, Local: true})
	return b
}

// failed stores a job of the bundle's owner that has just failed.
func (b *deliveryBundle) failed(t *testing.T, webhookURL string) string {
	t.Helper()
	now := time.Now()
	j := &job.Job{ID: ids.New(ids.Job), Owner: b.owner, Status: job.Queued, Tier: "low", WebhookURL: webhookURL,
		CreatedAt: now, UpdatedAt: now, Hash: ids.New("h")}
	j.Emit(job.EventFailed, now, nil)
	if _, _, err := b.st.CreateJob(context.Background(), j); err != nil {
		t.Fatal(err)
	}
	return j.ID
}

// endpoint starts a receiver that verifies signatures with the owner's
// secret and registers it as the owner's endpoint for job.failed.
func (b *deliveryBundle) endpoint(t *testing.T) (*receiver, webhook.Endpoint) {
	t.Helper()
	rec := &receiver{wh: keysVerifier(t, b.keys, b.owner)}
	srv := httptest.NewServer(rec)
	t.Cleanup(srv.Close)
	ep, err := b.endpoints.Create(context.Background(), b.owner, webhook.CreateRequest{URL: srv.URL, Events: []string{job.EventFailed}})
	if err != nil {
		t.Fatal(err)
	}
	return rec, ep
}

// outcome returns the webhook outcome events recorded on job id.
func (b *deliveryBundle) outcome(t *testing.T, id string) []store.EventRecord {
	t.Helper()
	evs, err := b.st.Events(context.Background(), id, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	var out []store.EventRecord
	for _, e := range evs {
		if e.Type == job.EventWebhookDelivered || e.Type == job.EventWebhookFailed {
			out = append(out, e)
		}
	}
	return out
}

// TestDeliveryReadsOnceAndWritesOnce: a delivery whose message names the
// owner (as the planner writes them) reads the event, the job and the
// endpoint in one BatchGetItem and writes its record with the job's
// outcome event in one transaction; a message without the owner (queued
// before the planner named it) still arrives, through the reads apart.
func TestDeliveryReadsOnceAndWritesOnce(t *testing.T) {
	t.Parallel()
	b := setupDelivery(t)
	ctx := context.Background()
	rec, ep := b.endpoint(t)
	id := b.failed(t, "")
	ev, err := b.st.GetEvent(ctx, id, 1)
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := webhook.Planner{Endpoints: b.endpoints}.Deliveries(ctx, ev)
	if err != nil || len(msgs) != 1 || msgs[0].Owner != b.owner || msgs[0].Endpoint != ep.ID {
		t.Fatalf("planned %+v (%v): want one delivery to %s naming its owner", msgs, err, ep.ID)
	}

	b.counter.Reset()
	v, err := b.d.Deliver(ctx, msgs[0], 1)
	if err != nil || !v.Done || rec.delivered() != 1 {
		t.Fatalf("verdict %+v, %v, %d delivered", v, err, rec.delivered())
	}
	if got := b.counter.Snapshot(); got["DynamoDB.BatchGetItem"] != 1 || got["DynamoDB.TransactWriteItems"] != 1 || b.counter.Total() != 2 {
		t.Errorf("a delivery made %v: want one BatchGetItem and one TransactWriteItems", got)
	}
	if out := b.outcome(t, id); len(out) != 1 || out[0].Type != job.EventWebhookDelivered || out[0].Detail["endpoint"] != ep.ID {
		t.Errorf("outcome events %+v: want one webhook.delivered naming %s", out, ep.ID)
	}

	// The same delivery from a message without its owner.
	old := msgs[0]
	old.Owner = ""
	b.counter.Reset()
	if v, err := b.d.Deliver(ctx, old, 1); err != nil || !v.Done || rec.delivered() != 2 {
		t.Fatalf("an owner-less message: verdict %+v, %v, %d delivered", v, err, rec.delivered())
	}
	if got := b.counter.Snapshot(); got["DynamoDB.GetItem"] != 3 || got["DynamoDB.TransactWriteItems"] != 1 {
		t.Errorf("an owner-less message made %v: want the event, the endpoint and the job read apart", got)
	}
	if out := b.outcome(t, id); len(out) != 2 {
		t.Errorf("outcome events %+v: want two", out)
	}
}

// TestDeliveryToADeletedEndpointIsDropped: the endpoint went after the
// event was planned: nothing is sent, nothing written, the message done.
func TestDeliveryToADeletedEndpointIsDropped(t *testing.T) {
	t.Parallel()
	b := setupDelivery(t)
	ctx := context.Background()
	rec, ep := b.endpoint(t)
	id := b.failed(t, "")
	if err := b.endpoints.Delete(ctx, b.owner, ep.ID); err != nil {
		t.Fatal(err)
	}
	for _, owner := range []string{b.owner, ""} {
		m := queue.Message{Kind: queue.KindWebhook, JobID: id, Owner: owner, Seq: 1, DeliveryID: webhook.DeliveryID(id, 1, ep.ID), Endpoint: ep.ID}
		b.counter.Reset()
		v, err := b.d.Deliver(ctx, m, 1)
		if err != nil || !v.Done {
			t.Fatalf("owner %q: verdict %+v, %v: want done", owner, v, err)
		}
		for op, n := range b.counter.Snapshot() {
			if op != "DynamoDB.BatchGetItem" && op != "DynamoDB.GetItem" {
				t.Errorf("owner %q: %d %s for a dropped delivery", owner, n, op)
			}
		}
	}
	if rec.delivered() != 0 || len(b.outcome(t, id)) != 0 {
		t.Errorf("%d delivered, outcome %+v: want nothing", rec.delivered(), b.outcome(t, id))
	}
}

// TestDeliveryOfAJobRetentionRemoved: the event is gone: the delivery is
// done without a request to the receiver.
func TestDeliveryOfAJobRetentionRemoved(t *testing.T) {
	t.Parallel()
	b := setupDelivery(t)
	rec := &receiver{wh: keysVerifier(t, b.keys, b.owner)}
	srv := httptest.NewServer(rec)
	defer srv.Close()
	m := queue.Message{Kind: queue.KindWebhook, JobID: ids.New(ids.Job), Owner: b.owner, Seq: 1}
	m.DeliveryID = webhook.DeliveryID(m.JobID, 1, "")
	if v, err := b.d.Deliver(context.Background(), m, 1); err != nil || !v.Done || rec.delivered() != 0 {
		t.Errorf("verdict %+v, %v, %d delivered: want done, nothing sent", v, err, rec.delivered())
	}
}

// keysVerifier returns the Standard Webhooks verifier of owner's secret,
// and leaves owner's signing keys in keys' cache (a delivery then reads no
// secret).
func keysVerifier(t *testing.T, keys *webhook.Keys, owner string) *standardwebhooks.Webhook {
	t.Helper()
	s, err := keys.Get(context.Background(), owner)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := keys.SigningKeys(context.Background(), owner); err != nil {
		t.Fatal(err)
	}
	wh, err := standardwebhooks.NewWebhook(s.Secret)
	if err != nil {
		t.Fatal(err)
	}
	return wh
}
