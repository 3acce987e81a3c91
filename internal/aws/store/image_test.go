package store_test

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/google/go-cmp/cmp"

	"github.com/conveyor/conveyor/internal/aws/store"
)

// TestDecodeEvents: an event item from before writes shared one holds its
// event alone; a write's item holds its earlier events too, in order, each
// with the item's job and owner.
func TestDecodeEvents(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	image := map[string]events.DynamoDBAttributeValue{
		"pk": events.NewStringAttribute("JOB#job_a"), "sk": events.NewStringAttribute("EVT#000000000002"),
		"jobId": events.NewStringAttribute("job_a"), "eventOwner": events.NewStringAttribute("usr_a"),
		"seq": events.NewNumberAttribute("2"), "type": events.NewStringAttribute("job.succeeded"),
		"at": events.NewStringAttribute(at.Format(time.RFC3339Nano)), "job": events.NewStringAttribute(`{"id":"job_a"}`),
		"tier": events.NewStringAttribute("low"), "webhookUrl": events.NewStringAttribute("https://x.example/h"),
		"detail": events.NewMapAttribute(map[string]events.DynamoDBAttributeValue{"phase": events.NewStringAttribute("upload")}),
	}
	got, err := store.DecodeEvents(image)
	if err != nil {
		t.Fatal(err)
	}
	want := store.EventRecord{JobID: "job_a", Owner: "usr_a", Seq: 2, Type: "job.succeeded", At: at, Detail: map[string]string{"phase": "upload"},
		Job: `{"id":"job_a"}`, Tier: "low", WebhookURL: "https://x.example/h"}
	if diff := cmp.Diff([]store.EventRecord{want}, got); diff != "" {
		t.Errorf("decoded (-want +got):\n%s", diff)
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	fmt.Fprintf(zw, `[{"seq":1,"type":"job.progress","at":%q}]`, at.Add(-time.Second).Format(time.RFC3339Nano))
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	image["earlierGz"] = events.NewBinaryAttribute(gz.Bytes())
	if got, err = store.DecodeEvents(image); err != nil {
		t.Fatal(err)
	}
	first := want
	first.Seq, first.Type, first.At, first.Detail = 1, "job.progress", at.Add(-time.Second), nil
	if diff := cmp.Diff([]store.EventRecord{first, want}, got); diff != "" {
		t.Errorf("a write's item decoded (-want +got):\n%s", diff)
	}
	for name, img := range map[string]map[string]events.DynamoDBAttributeValue{
		"no image (KEYS_ONLY stream)": nil,
		"seq not a number":            {"jobId": events.NewStringAttribute("job_a"), "seq": events.NewStringAttribute("x"), "type": events.NewStringAttribute("t"), "at": image["at"]},
		"no type":                     {"jobId": events.NewStringAttribute("job_a"), "seq": events.NewNumberAttribute("1"), "at": image["at"]},
	} {
		if _, err := store.DecodeEvents(img); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
}

// TestEventBody: the JSON every consumer sees (bus, webhook, SSE) — the id
// consumers dedupe by, the time in UTC with milliseconds, the job
// snapshot as raw JSON, and none of the record's private fields (owner,
// tier, webhook URL).
func TestEventBody(t *testing.T) {
	t.Parallel()
	moscow := time.FixedZone("MSK", 3*3600)
	ev := store.EventRecord{JobID: "job_1", Owner: "u1", Seq: 7, Type: "job.succeeded",
		At: time.Date(2026, 11, 23, 21, 4, 5, 123456789, moscow), Detail: map[string]string{"phase": "publish"},
		Job: `{"id":"job_1","status":"PUBLISHED"}`, Tier: "low", WebhookURL: "https://hooks.example/x"}
	b, err := json.Marshal(ev.Body())
	if err != nil {
		t.Fatal(err)
	}
	want := `{"id":"job_1:7","type":"job.succeeded","at":"2026-11-23T18:04:05.123Z","jobId":"job_1","seq":7,` +
		`"detail":{"phase":"publish"},"job":{"id":"job_1","status":"PUBLISHED"}}`
	if diff := cmp.Diff(want, string(b)); diff != "" {
		t.Errorf("body (-want +got):\n%s", diff)
	}
	ev.Detail = nil
	b, _ = json.Marshal(ev.Body())
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if _, ok := m["detail"]; ok {
		t.Errorf("an event without detail has a detail key: %s", b)
	}
}
