package relay_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/conveyor/conveyor/internal/aws/awsclient"
	"github.com/conveyor/conveyor/internal/aws/bus"
	"github.com/conveyor/conveyor/internal/aws/queue"
	"github.com/conveyor/conveyor/internal/aws/store"
	"github.com/conveyor/conveyor/internal/ids"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/relay"
	"github.com/conveyor/conveyor/internal/resources"
)

// TestLargeJobsAndEventsNeverStallTheRelay: a job whose document is at
// the bound (job.MaxDocBytes, of characters HTML escaping would have
// made six bytes each) puts every event on the bus, each entry carrying
// the job's summary; an event whose own entry is larger than EventBridge
// takes (a detail of 300 KiB, more than any event of ours carries) is
// relayed without its entry and counted, never reported for retry, and
// its job's later events and the webhook of its outcome follow it. The bus
// is moto's behind the emulator clients' AWS limit: an entry over 256 KiB
// is refused as EventBridge refuses it.
func TestLargeJobsAndEventsNeverStallTheRelay(t *testing.T) {
	t.Parallel()
	b := prepare(t, relay.JobWebhooks{}, 10, 3, nil)
	ctx := context.Background()
	now := time.Now().UTC()
	doc, err := job.DocOf(map[string]string{"body": strings.Repeat("<", job.MaxDocBytes-20)})
	if err != nil {
		t.Fatal(err)
	}
	big := &job.Job{ID: ids.New("job"), Type: "http", Status: job.Queued, Tier: job.Low, Owner: "usr_big", Params: doc,
		Hash: ids.New("h"), MaxAttempts: 7, CreatedAt: now, UpdatedAt: now, WebhookURL: "https://hooks.example.com/big"}
	big.Emit(job.EventEnqueued, now, nil)
	if _, _, err := b.st.CreateJob(ctx, big); err != nil {
		t.Fatal(err)
	}
	b.emit(t, big.ID, job.EventStarted)
	if _, err := b.st.UpdateJob(ctx, big.ID, func(j *job.Job) error {
		j.Emit(job.EventPhaseCompleted, time.Now(), map[string]string{"phase": strings.Repeat("p", 300<<10)})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	b.emit(t, big.ID, job.EventSucceeded)
	other := b.newJob(t, "usr_other", false)
	b.emit(t, other, job.EventStarted)
	batch := b.streamBatch(t, 6)

	sends := awsclient.NewCounter()
	r, err := relay.New(relay.Config{Decode: store.DecodeEvents, Bus: bus.New(b.env.Config, b.def.EventBus), Source: resources.EventSource(b.def.Env),
		Sender: queue.NewSender(awsclient.New(sends.Attach(b.env.Config)).SQS, b.env.Res.QueueURLs, queue.Fairness{}), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	resp, res := r.Handle(ctx, batch)
	if len(resp.BatchItemFailures) != 0 || res.Relayed != 6 || res.Put != 5 || res.TooLarge != 1 || res.Webhooks != 1 {
		t.Errorf("relayed %d, put %d, too large %d, webhooks %d, reported %v; want 6 relayed, 5 put, 1 too large, 1 webhook, none reported",
			res.Relayed, res.Put, res.TooLarge, res.Webhooks, resp.BatchItemFailures)
	}
	got, _ := b.collect(t, allOf(map[string]int{big.ID: 3, other: 2}), 30*time.Second)
	if diff := cmp.Diff(map[string][]int64{big.ID: {1, 2, 4}, other: {1, 2}}, got); diff != "" {
		t.Errorf("on the bus (-want +got):\n%s", diff)
	}
}

// TestTheBusCarriesTheJobsSummary: an event's bus entry names the job and
// its state (the Job's own fields, its documents' sizes), not the job's
// documents.
func TestTheBusCarriesTheJobsSummary(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	j := &job.Job{ID: "job_a", Type: "http", Status: job.Failed, Tier: job.Low, Phase: "request", Attempts: 7, MaxAttempts: 7,
		Params: job.Doc(`{"body":"<secret-ish>"}`), Result: job.Doc(`{"status":500}`), CreatedAt: at, UpdatedAt: at, FinishedAt: &at,
		Error: &job.Error{Code: "http_status", Message: "the target answered 500 with a long story", Retryable: false}}
	view, err := job.Marshal(j)
	if err != nil {
		t.Fatal(err)
	}
	body, err := job.NewBusEventBody(j.ID, 9, job.EventFailed, at, nil, string(view))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"id":"job_a","type":"http","status":"failed","tier":"low","phase":"request","progress":0,"attempts":7,"maxAttempts":7,` +
		`"error":{"code":"http_status","retryable":false},"items":0,"sizes":{"params":23,"result":14},` +
		`"createdAt":"2026-05-01T12:00:00Z","updatedAt":"2026-05-01T12:00:00Z","scheduleAt":null,"startedAt":null,"finishedAt":"2026-05-01T12:00:00Z"}`
	if diff := cmp.Diff(want, string(body.Job)); diff != "" {
		t.Errorf("the bus's job (-want +got):\n%s", diff)
	}
	if body.ID != "job_a:9" || body.Type != job.EventFailed {
		t.Errorf("the bus body's header: %+v", body)
	}
}
