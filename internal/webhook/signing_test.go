package webhook_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/conveyor/conveyor/internal/aws/sealer"
	"github.com/conveyor/conveyor/internal/aws/store"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/webhook"
	"github.com/conveyor/conveyor/localstack/awstest"
	"github.com/conveyor/conveyor/localstack/stack"
)

// headers are a delivery's signing headers, as the deliverer sets them.
func headers(id string, at time.Time, body []byte, keys ...[]byte) http.Header {
	h := http.Header{}
	h.Set(webhook.HeaderID, id)
	h.Set(webhook.HeaderTimestamp, strconv.FormatInt(at.Unix(), 10))
	h.Set(webhook.HeaderSignature, webhook.Signature(id, at, body, keys...))
	return h
}

func verifier(t *testing.T, key []byte) *standardwebhooks.Webhook {
	t.Helper()
	wh, err := standardwebhooks.NewWebhook(webhook.FormatSecret(key))
	if err != nil {
		t.Fatal(err)
	}
	return wh
}

// TestSignatureMatchesTheSpec: the spec's published test vector, and our
// signatures verified by the spec's Go library; a changed body, another
// id or a replay with an old timestamp are refused by it.
func TestSignatureMatchesTheSpec(t *testing.T) {
	t.Parallel()
	// The vector of standard-webhooks/libraries/go/webhook_test.go.
	key, err := webhook.ParseSecret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	if err != nil {
		t.Fatal(err)
	}
	got := webhook.Signature("msg_p5jXN8AQM9LWM0D4loKWxJek", time.Unix(1614265330, 0), []byte(`{"test": 2432232314}`), key)
	if want := "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="; got != want {
		t.Errorf("signature %q, want the spec's %q", got, want)
	}

	k := webhook.NewSecretKey()
	wh := verifier(t, k)
	body := []byte(`{"type":"job.succeeded","jobId":"job_x"}`)
	now := time.Now()
	if err := wh.Verify(body, headers("dlv_1", now, body, k)); err != nil {
		t.Errorf("the library refused our signature: %v", err)
	}
	for name, tc := range map[string]struct {
		body []byte
		h    http.Header
		want error
	}{
		"changed body":          {append([]byte(" "), body...), headers("dlv_1", now, body, k), standardwebhooks.ErrNoMatchingSignature},
		"another id":            {body, func() http.Header { h := headers("dlv_1", now, body, k); h.Set(webhook.HeaderID, "dlv_2"); return h }(), standardwebhooks.ErrNoMatchingSignature},
		"replayed 10 min later": {body, headers("dlv_1", now.Add(-10*time.Minute), body, k), standardwebhooks.ErrMessageTooOld},
		"another key":           {body, headers("dlv_1", now, body, webhook.NewSecretKey()), standardwebhooks.ErrNoMatchingSignature},
	} {
		if err := wh.Verify(tc.body, tc.h); !errors.Is(err, tc.want) {
			t.Errorf("%s: library says %v, want %v", name, err, tc.want)
		}
	}
	// The replay's signature itself is right: only its age refuses it.
	if err := wh.VerifyIgnoringTimestamp(body, headers("dlv_1", now.Add(-10*time.Minute), body, k)); err != nil {
		t.Errorf("old but genuine: %v", err)
	}
}

func TestParseSecret(t *testing.T) {
	t.Parallel()
	k := webhook.NewSecretKey()
	if got, err := webhook.ParseSecret(webhook.FormatSecret(k)); err != nil || string(got) != string(k) {
		t.Errorf("round trip: %v", err)
	}
	for _, bad := range []string{"", "whsec_", "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "whsec_!!!"} {
		if _, err := webhook.ParseSecret(bad); !errors.Is(err, webhook.ErrBadSecret) {
			t.Errorf("ParseSecret(%q) = %v, want ErrBadSecret", bad, err)
		}
	}
}

// clock is a settable clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newKeys(t *testing.T, env awstest.Env, c *clock, overlap time.Duration) *webhook.Keys {
	t.Helper()
	k, err := webhook.NewKeys(webhook.KeysConfig{Store: store.New(env.Clients.DynamoDB, env.Res.Definition.Table.Name, c.Now),
		Sealer: sealer.New(env.Clients.KMS, env.Res.KMSKeyID), Overlap: overlap, Cache: time.Second, Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestOneUsersSecretNeverSignsForAnother: each user gets their own secret;
// what user A's keys sign, user B's endpoint (verifying with B's secret)
// refuses; the secret is stable across reads and sealed at rest.
func TestOneUsersSecretNeverSignsForAnother(t *testing.T) {
	t.Parallel()
	env := awstest.Provision(t)
	c := &clock{t: time.Now()}
	keys := newKeys(t, env, c, time.Hour)
	ctx := context.Background()
	a, err := keys.Get(ctx, "user-a")
	if err != nil {
		t.Fatal(err)
	}
	b, err := keys.Get(ctx, "user-b")
	if err != nil {
		t.Fatal(err)
	}
	if a.Secret == b.Secret {
		t.Fatal("two users share a secret")
	}
	if again, _ := keys.Get(ctx, "user-a"); again.Secret != a.Secret {
		t.Errorf("the secret changed between reads")
	}
	whB, _ := standardwebhooks.NewWebhook(b.Secret)
	whA, _ := standardwebhooks.NewWebhook(a.Secret)
	signA, err := keys.SigningKeys(ctx, "user-a")
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"type":"job.failed"}`)
	h := headers("dlv_forged", c.Now(), body, signA...)
	if err := whB.Verify(body, h); !errors.Is(err, standardwebhooks.ErrNoMatchingSignature) {
		t.Errorf("B's endpoint on A's signature: %v, want no matching signature", err)
	}
	if err := whA.Verify(body, h); err != nil {
		t.Errorf("A's endpoint refused A's signature: %v", err)
	}
	// At rest: the item holds a KMS envelope, never the key.
	out, err := env.Clients.DynamoDB.GetItem(ctx, getSecretItem(env, "user-a"))
	if err != nil || len(out.Item) == 0 {
		t.Fatalf("secret item: %v", err)
	}
	raw := fmt.Sprint(out.Item)
	if strings.Contains(raw, strings.TrimPrefix(a.Secret, "whsec_")) {
		t.Error("the secret is stored in clear")
	}
}

// TestRotationOverlap: after a rotation both secrets sign (a receiver with
// either verifies) until the overlap ends, then only the new one.
func TestRotationOverlap(t *testing.T) {
	t.Parallel()
	env := awstest.Provision(t)
	c := &clock{t: time.Now()}
	keys := newKeys(t, env, c, time.Hour)
	ctx := context.Background()
	old, err := keys.Get(ctx, "user-r")
	if err != nil {
		t.Fatal(err)
	}
	rotated, err := keys.Rotate(ctx, "user-r")
	if err != nil {
		t.Fatal(err)
	}
	if rotated.Secret == old.Secret || rotated.PreviousExpiresAt == nil || !rotated.PreviousExpiresAt.Equal(c.Now().Add(time.Hour).Truncate(time.Millisecond)) {
		t.Fatalf("rotated %+v: want a new secret and the old one's end an hour from now", rotated)
	}
	whOld, _ := standardwebhooks.NewWebhook(old.Secret)
	whNew, _ := standardwebhooks.NewWebhook(rotated.Secret)
	body := []byte(`{"type":"job.succeeded"}`)
	sign := func() http.Header {
		ks, err := keys.SigningKeys(ctx, "user-r")
		if err != nil {
			t.Fatal(err)
		}
		// The library checks the timestamp against the real clock.
		return headers("dlv_rot", time.Now(), body, ks...)
	}
	during := sign()
	if n := len(strings.Fields(during.Get(webhook.HeaderSignature))); n != 2 {
		t.Errorf("during the overlap: %d signatures, want 2", n)
	}
	if err := whOld.Verify(body, during); err != nil {
		t.Errorf("during the overlap a receiver with the old secret refused: %v", err)
	}
	if err := whNew.Verify(body, during); err != nil {
		t.Errorf("during the overlap a receiver with the new secret refused: %v", err)
	}
	c.Add(time.Hour + time.Millisecond)
	after := sign()
	if n := len(strings.Fields(after.Get(webhook.HeaderSignature))); n != 1 {
		t.Errorf("after the overlap: %d signatures, want 1", n)
	}
	if err := whOld.Verify(body, after); !errors.Is(err, standardwebhooks.ErrNoMatchingSignature) {
		t.Errorf("after the overlap the old secret still verifies: %v", err)
	}
	if err := whNew.Verify(body, after); err != nil {
		t.Errorf("after the overlap the new secret refused: %v", err)
	}
	if s, _ := keys.Get(ctx, "user-r"); s.Secret != rotated.Secret || s.PreviousExpiresAt != nil {
		t.Errorf("after the overlap GET says %+v", s)
	}
}

// TestEndpointsCRUDAndRoles: a user creates, lists and deletes endpoints;
// a service token reads but cannot write; another user sees none of them;
// bad URLs and event types are 400s.
func TestEndpointsCRUDAndRoles(t *testing.T) {
	t.Parallel()
	b := awstest.Setup(t, nil, stack.Options{DisablePollers: true})
	user := b.Token("u-ep", "user", "pro")
	other := b.Token("u-other", "user", "pro")
	svc := b.Token("u-ep", "service", "pro")
	body := map[string]any{"url": "https://hooks.example.com/in", "events": []string{job.EventSucceeded, job.EventFailed, job.EventSucceeded}}
	created := b.Must(b.Call("POST", "/v1/webhooks", user, body), 201)
	id, _ := created.Body["id"].(string)
	if !strings.HasPrefix(id, "whe_") || created.Body["url"] != "https://hooks.example.com/in" {
		t.Fatalf("created %s", created.Raw)
	}
	if evs := fmt.Sprint(created.Body["events"]); evs != "[job.failed job.succeeded]" {
		t.Errorf("events %s, want the set, sorted", evs)
	}
	if r := b.Call("POST", "/v1/webhooks", svc, body); r.Status != 403 {
		t.Errorf("service POST: %d, want 403", r.Status)
	}
	if r := b.Call("DELETE", "/v1/webhooks/"+id, svc, nil); r.Status != 403 {
		t.Errorf("service DELETE: %d, want 403", r.Status)
	}
	if r := b.Call("POST", "/v1/webhooks/secret/rotate", svc, nil); r.Status != 403 {
		t.Errorf("service rotate: %d, want 403", r.Status)
	}
	list := b.Must(b.Call("GET", "/v1/webhooks", svc, nil), 200)
	if eps, _ := list.Body["webhooks"].([]any); len(eps) != 1 {
		t.Errorf("service list: %s", list.Raw)
	}
	if eps, _ := b.Must(b.Call("GET", "/v1/webhooks", other, nil), 200).Body["webhooks"].([]any); len(eps) != 0 {
		t.Errorf("another user sees %v", eps)
	}
	if r := b.Call("DELETE", "/v1/webhooks/"+id, other, nil); r.Status != 404 {
		t.Errorf("another user's DELETE: %d, want 404", r.Status)
	}
	for name, bad := range map[string]map[string]any{
		"no url":        {"events": []string{job.EventFailed}},
		"ftp":           {"url": "ftp://hooks.example.com/", "events": []string{job.EventFailed}},
		"no events":     {"url": "https://hooks.example.com/"},
		"unknown event": {"url": "https://hooks.example.com/", "events": []string{"job.exploded"}},
		"progress":      {"url": "https://hooks.example.com/", "events": []string{job.EventProgress}},
		"unknown field": {"url": "https://hooks.example.com/", "events": []string{job.EventFailed}, "secret": "x"},
	} {
		if r := b.Call("POST", "/v1/webhooks", user, bad); r.Status != 400 {
			t.Errorf("%s: %d %s, want 400", name, r.Status, r.Raw)
		}
	}
	// Disabled and enabled again by its owner (PATCH).
	if created.Body["enabled"] != true {
		t.Errorf("a new endpoint: %s, want enabled", created.Raw)
	}
	off := b.Must(b.Call("PATCH", "/v1/webhooks/"+id, user, map[string]any{"enabled": false}), 200)
	if off.Body["enabled"] != false || off.Body["disabledAt"] == nil || off.Body["url"] != "https://hooks.example.com/in" {
		t.Errorf("disabled: %s, want enabled false with disabledAt", off.Raw)
	}
	if eps, _ := b.Must(b.Call("GET", "/v1/webhooks", user, nil), 200).Body["webhooks"].([]any); len(eps) != 1 || eps[0].(map[string]any)["enabled"] != false {
		t.Errorf("the list after disabling: %v", eps)
	}
	on := b.Must(b.Call("PATCH", "/v1/webhooks/"+id, user, map[string]any{"enabled": true}), 200)
	if _, at := on.Body["disabledAt"]; on.Body["enabled"] != true || at {
		t.Errorf("enabled again: %s", on.Raw)
	}
	for name, c := range map[string]struct {
		tok, id string
		body    any
		want    int
	}{
		"a service token":    {svc, id, map[string]any{"enabled": true}, 403},
		"another user's":     {other, id, map[string]any{"enabled": true}, 404},
		"a junk id":          {user, "whe_nonsense", map[string]any{"enabled": true}, 404},
		"no enabled":         {user, id, map[string]any{}, 400},
		"enabled not a bool": {user, id, map[string]any{"enabled": "yes"}, 400},
		"an unknown field":   {user, id, map[string]any{"enabled": true, "url": "https://x.example.com/"}, 400},
	} {
		if r := b.Call("PATCH", "/v1/webhooks/"+c.id, c.tok, c.body); r.Status != c.want {
			t.Errorf("PATCH by %s: %d %s, want %d", name, r.Status, r.Raw, c.want)
		}
	}
	if r := b.Call("DELETE", "/v1/webhooks/whe_nonsense", user, nil); r.Status != 404 {
		t.Errorf("DELETE of a junk id: %d, want 404", r.Status)
	}
	b.Must(b.Call("DELETE", "/v1/webhooks/"+id, user, nil), 204)
	if r := b.Call("DELETE", "/v1/webhooks/"+id, user, nil); r.Status != 404 {
		t.Errorf("second DELETE: %d, want 404", r.Status)
	}
	if eps, _ := b.Must(b.Call("GET", "/v1/webhooks", user, nil), 200).Body["webhooks"].([]any); len(eps) != 0 {
		t.Errorf("after delete: %v", eps)
	}
	// The per-user limit is state, not bad input: 422 webhook_limit.
	full := b.Token("u-ep-full", "user", "pro")
	for i := range webhook.MaxEndpointsDefault {
		b.Must(b.Call("POST", "/v1/webhooks", full, map[string]any{"url": fmt.Sprintf("https://hooks.example.com/%d", i), "events": []string{job.EventFailed}}), 201)
	}
	over := b.Call("POST", "/v1/webhooks", full, map[string]any{"url": "https://hooks.example.com/over", "events": []string{job.EventFailed}})
	e, _ := over.Body["error"].(map[string]any)
	if code, _ := e["code"].(string); over.Status != 422 || code != "webhook_limit" {
		t.Errorf("endpoint %d: %d %s, want 422 webhook_limit", webhook.MaxEndpointsDefault+1, over.Status, over.Raw)
	}
	// The owner reads their secret; a service token of the same subject too.
	s1 := b.Must(b.Call("GET", "/v1/webhooks/secret", user, nil), 200).Body["secret"]
	if s2 := b.Must(b.Call("GET", "/v1/webhooks/secret", svc, nil), 200).Body["secret"]; s1 != s2 {
		t.Errorf("two reads, two secrets")
	}
	if s3 := b.Must(b.Call("POST", "/v1/webhooks/secret/rotate", user, nil), 200).Body["secret"]; s3 == s1 {
		t.Errorf("rotation kept the secret")
	}
}

// TestEndpointReceivesSubscribedEvents: a user's endpoint subscribed to
// job.failed receives it for a job that names no webhookUrl, signed with
// the owner's secret; an endpoint subscribed to job.succeeded only, and
// another user's endpoint, receive nothing.
func TestEndpointReceivesSubscribedEvents(t *testing.T) {
	t.Parallel()
	b := awstest.Setup(t, map[string]string{"CONVEYOR_SCHEDULE_INTERVAL": "200ms", "CONVEYOR_RECOVERY_INTERVAL": "1h"}, stack.Options{})
	tok := b.Token("u-endpoint", "user", "pro")
	otherTok := b.Token("u-endpoint-other", "user", "pro")
	wh := ownerSecret(t, b, tok)
	yes, no, other := &receiver{wh: wh}, &receiver{wh: wh}, &receiver{wh: ownerSecret(t, b, otherTok)}
	srvYes, srvNo, srvOther := httptest.NewServer(yes), httptest.NewServer(no), httptest.NewServer(other)
	defer srvYes.Close()
	defer srvNo.Close()
	defer srvOther.Close()
	epYes := b.Must(b.Call("POST", "/v1/webhooks", tok, map[string]any{"url": srvYes.URL, "events": []string{job.EventFailed}}), 201).Body["id"].(string)
	b.Must(b.Call("POST", "/v1/webhooks", tok, map[string]any{"url": srvNo.URL, "events": []string{job.EventSucceeded}}), 201)
	b.Must(b.Call("POST", "/v1/webhooks", otherTok, map[string]any{"url": srvOther.URL, "events": []string{job.EventFailed}}), 201)
	id := failedJob(t, b, "u-endpoint", "")
	b.Eventually(func() bool { return yes.delivered() > 0 }, "the endpoint's delivery")
	yes.mu.Lock()
	h, bad := yes.got[0], yes.badSigs
	yes.mu.Unlock()
	if bad != 0 || h.Get(webhook.HeaderEvent) != job.EventFailed || h.Get(webhook.HeaderID) != webhook.DeliveryID(id, 1, epYes) {
		t.Errorf("delivery headers %v, %d bad signatures", h, bad)
	}
	// The outcome event names the endpoint; the relay queued every
	// delivery of the event in the same run, so the others had their turn.
	b.Eventually(func() bool {
		evs, _ := b.Stack.App.Store.Events(context.Background(), id, 0, 100)
		for _, e := range evs {
			if e.Type == job.EventWebhookDelivered && e.Detail["endpoint"] == epYes {
				return true
			}
		}
		return false
	}, "the webhook.delivered event of the endpoint")
	for name, r := range map[string]*receiver{"subscribed to job.succeeded only": no, "another user's": other} {
		r.mu.Lock()
		if len(r.ids) != 0 || r.badSigs != 0 {
			t.Errorf("the endpoint %s got %d deliveries", name, len(r.ids)+r.badSigs)
		}
		r.mu.Unlock()
	}
}

func getSecretItem(env awstest.Env, owner string) *dynamodb.GetItemInput {
	return &dynamodb.GetItemInput{TableName: aws.String(env.Res.Definition.Table.Name), Key: map[string]types.AttributeValue{
		"pk": &types.AttributeValueMemberS{Value: "HOOKS#" + owner}, "sk": &types.AttributeValueMemberS{Value: "SECRET"}}}
}
