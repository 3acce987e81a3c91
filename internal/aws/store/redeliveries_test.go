package store_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/conveyor/conveyor/internal/aws/store"
)

// TestTheFailuresLogPagesByTimeAndOnlyFailuresWriteIt: each failure to an
// endpoint is noted in the endpoint's log; a delivered, retrying or
// webhookUrl delivery is not; the log reads from a time on, oldest first,
// page after page by cursor, and refuses a cursor of another time; a
// redelivery is recorded once of two racing requests.
func TestTheFailuresLogPagesByTimeAndOnlyFailuresWriteIt(t *testing.T) {
	t.Parallel()
	b := setupStore(t)
	ctx := context.Background()
	start := b.clk.Now().Truncate(time.Millisecond)
	put := func(i int, status, endpoint string) store.WebhookDelivery {
		t.Helper()
		dl := store.WebhookDelivery{ID: fmt.Sprintf("dlv_job_%d_1_%s", i, endpoint), JobID: fmt.Sprintf("job_%d", i), Endpoint: endpoint,
			Owner: "u1", Seq: 1, Event: "job.succeeded", URL: "http://x", Status: status, Attempts: 3,
			UpdatedAt: start.Add(time.Duration(i) * time.Second)}
		if err := b.st.PutWebhookDelivery(ctx, dl); err != nil {
			t.Fatal(err)
		}
		return dl
	}
	var failed []store.WebhookDelivery
	for i := range 5 {
		failed = append(failed, put(i, store.DeliveryFailed, "whe_a"))
	}
	put(10, store.DeliveryDelivered, "whe_a")
	put(11, store.DeliveryRetrying, "whe_a")
	put(12, store.DeliveryFailed, "whe_b")
	put(13, store.DeliveryFailed, "") // a job's own webhookUrl

	var got []string
	cursor, pages := "", 0
	for {
		page, next, err := b.st.WebhookFailures(ctx, "u1", "whe_a", start.Add(time.Second), cursor, 2)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, f := range page {
			got = append(got, f.DeliveryID)
		}
		if next == "" {
			break
		}
		cursor = next
	}
	want := fmt.Sprint([]string{failed[1].ID, failed[2].ID, failed[3].ID, failed[4].ID})
	if fmt.Sprint(got) != want || pages < 2 {
		t.Errorf("failures of whe_a from the second on: %v in %d pages, want %s over several pages", got, pages, want)
	}
	if _, _, err := b.st.WebhookFailures(ctx, "u1", "whe_a", start, cursor, 2); !errors.Is(err, store.ErrBadCursor) && cursor != "" {
		t.Errorf("a cursor of another since: %v, want ErrBadCursor", err)
	}
	if other, _, err := b.st.WebhookFailures(ctx, "u2", "whe_a", start, "", 100); err != nil || len(other) != 0 {
		t.Errorf("another owner's log: %v %v, want none", other, err)
	}

	// Two requests redeliver one failure: one records it.
	recs, err := b.st.GetWebhookDeliveries(ctx, []store.DeliveryRef{{JobID: failed[0].JobID, ID: failed[0].ID}})
	if err != nil || recs[failed[0].ID].Status != store.DeliveryFailed {
		t.Fatalf("reading the failure: %v %v", recs, err)
	}
	read := recs[failed[0].ID]
	if err := b.st.RedeliverWebhook(ctx, read, b.clk.Now()); err != nil {
		t.Fatal(err)
	}
	if err := b.st.RedeliverWebhook(ctx, read, b.clk.Now()); !errors.Is(err, store.ErrConflict) {
		t.Errorf("the second redelivery of one failure: %v, want ErrConflict", err)
	}
	recs, _ = b.st.GetWebhookDeliveries(ctx, []store.DeliveryRef{{JobID: failed[0].JobID, ID: failed[0].ID}})
	if dl := recs[failed[0].ID]; dl.Status != store.DeliveryRetrying || dl.Attempts != 0 {
		t.Errorf("redelivered: %+v, want retrying with no attempts", dl)
	}
}
