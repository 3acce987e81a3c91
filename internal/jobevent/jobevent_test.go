package jobevent

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/conveyor/conveyor/internal/store"
)

// TestBodyOf: the JSON every consumer sees (bus, webhook, SSE) — the id
// consumers dedupe by, the time in UTC with milliseconds, the job
// snapshot as raw JSON, and none of the record's private fields (owner,
// tier, webhook URL).
func TestBodyOf(t *testing.T) {
	t.Parallel()
	moscow := time.FixedZone("MSK", 3*3600)
	ev := store.EventRecord{JobID: "job_1", Owner: "u1", Seq: 7, Type: "job.succeeded",
		At: time.Date(2026, 11, 23, 21, 4, 5, 123456789, moscow), Detail: map[string]string{"phase": "publish"},
		Job: `{"id":"job_1","status":"PUBLISHED"}`, Tier: "low", WebhookURL: "https://hooks.example/x"}
	b, err := json.Marshal(BodyOf(ev))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"id":"job_1:7","type":"job.succeeded","at":"2026-11-23T18:04:05.123Z","jobId":"job_1","seq":7,` +
		`"detail":{"phase":"publish"},"job":{"id":"job_1","status":"PUBLISHED"}}`
	if diff := cmp.Diff(want, string(b)); diff != "" {
		t.Errorf("body (-want +got):\n%s", diff)
	}
	ev.Detail = nil
	b, _ = json.Marshal(BodyOf(ev))
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if _, ok := m["detail"]; ok {
		t.Errorf("an event without detail has a detail key: %s", b)
	}
}
