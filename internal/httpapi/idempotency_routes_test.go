package httpapi_test

import (
	"strings"
	"testing"
	"time"

	"github.com/conveyor/conveyor/localstack/awstest"
	"github.com/conveyor/conveyor/localstack/stack"
)

// TestIdempotencyKeyOnCreatingPosts: POST /v1/jobs, /v1/schedules and
// /v1/webhooks with an Idempotency-Key: a repeat with the same body gets
// the first response (status, body, Location) whatever the job became
// since; another body with the key is 422; no key keeps the body-hash
// dedup of active jobs.
func TestIdempotencyKeyOnCreatingPosts(t *testing.T) {
	t.Parallel()
	b := awstest.Setup(t, nil, stack.Options{DisablePollers: true})
	tok := b.Token("u-idem", "user", "pro")
	b.Connect(tok)
	up := b.Upload(tok, awstest.PNG(t, 8))
	in := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	body := map[string]any{"items": []any{map[string]any{"uploadId": up}}, "params": map[string]any{"title": "once"}, "scheduleAt": in}

	first := b.Must(b.Call("POST", "/v1/jobs", tok, body, "Idempotency-Key", `"k-123"`), 201)
	id := first.Body["id"].(string)
	if w, _ := first.Body["wait"].(map[string]any); w["reason"] != "scheduled" || w["until"] == nil {
		t.Errorf("a scheduled job's wait: %v; want scheduled until its scheduleAt", first.Body["wait"])
	}
	b.Must(b.Call("POST", "/v1/jobs/"+id+"/cancel", tok, nil), 200)

	again := b.Must(b.Call("POST", "/v1/jobs", tok, body, "Idempotency-Key", `"k-123"`), 201)
	if string(again.Raw) != string(first.Raw) || again.Header.Get("Location") != "/v1/jobs/"+id || again.Header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("the repeat after a cancel: %d %s Location %q; want the first response replayed (201, status scheduled, job %s)",
			again.Status, again.Raw, again.Header.Get("Location"), id)
	}
	other := map[string]any{"items": []any{map[string]any{"uploadId": up}}, "params": map[string]any{"title": "another"}}
	if r := b.Call("POST", "/v1/jobs", tok, other, "Idempotency-Key", `"k-123"`); r.Status != 422 || r.ErrorCode() != "idempotency_key_reused" {
		t.Errorf("the key with another body: %d %s; want 422 idempotency_key_reused", r.Status, r.Raw)
	}
	// Another user's k-123 is theirs.
	tok2 := b.Token("u-idem-2", "user", "pro")
	b.Connect(tok2)
	up2 := b.Upload(tok2, awstest.PNG(t, 9))
	b.Must(b.Call("POST", "/v1/jobs", tok2, map[string]any{"items": []any{map[string]any{"uploadId": up2}}, "params": map[string]any{"title": "once"}}, "Idempotency-Key", `"k-123"`), 201)

	// Without a key: the body-hash dedup of active jobs stays.
	plain := map[string]any{"items": []any{map[string]any{"uploadId": up}}, "params": map[string]any{"title": "plain"}}
	p1 := b.Must(b.Call("POST", "/v1/jobs", tok, plain), 201)
	if p2 := b.Must(b.Call("POST", "/v1/jobs", tok, plain), 200); p2.Body["id"] != p1.Body["id"] {
		t.Errorf("an identical active submission without a key: %v, want the active job %v", p2.Body["id"], p1.Body["id"])
	}

	sched := map[string]any{"name": "hourly", "rate": "1h", "timezone": "UTC", "job": map[string]any{"items": []any{map[string]any{"uploadId": up}}, "params": map[string]any{"title": "tick"}}}
	s1 := b.Must(b.Call("POST", "/v1/schedules", tok, sched, "Idempotency-Key", "s-1"), 201)
	s2 := b.Must(b.Call("POST", "/v1/schedules", tok, sched, "Idempotency-Key", "s-1"), 201)
	if s1.Body["id"] != s2.Body["id"] {
		t.Errorf("a repeated schedule creation made %v and %v; want one", s1.Body["id"], s2.Body["id"])
	}
	hook := map[string]any{"url": "http://127.0.0.1:9/hook", "events": []string{"job.succeeded"}}
	h1 := b.Must(b.Call("POST", "/v1/webhooks", tok, hook, "Idempotency-Key", "h-1"), 201)
	h2 := b.Must(b.Call("POST", "/v1/webhooks", tok, hook, "Idempotency-Key", "h-1"), 201)
	if h1.Body["id"] != h2.Body["id"] {
		t.Errorf("a repeated webhook creation made %v and %v; want one", h1.Body["id"], h2.Body["id"])
	}
	if l := b.Must(b.Call("GET", "/v1/webhooks", tok, nil), 200); len(l.Body["webhooks"].([]any)) != 1 {
		t.Errorf("webhook endpoints: %s; want one", l.Raw)
	}
	if r := b.Call("POST", "/v1/webhooks", tok, hook, "Idempotency-Key", strings.Repeat("k", 256)); r.Status != 400 {
		t.Errorf("a key over 255 characters: %d %s; want 400", r.Status, r.Raw)
	}
}
