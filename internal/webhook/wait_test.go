package webhook_test

import (
	"context"
	"testing"
	"time"

	"github.com/conveyor/conveyor/internal/aws/queue"
	"github.com/conveyor/conveyor/internal/webhook"
)

// TestAWaitingDeliveryGoesBackToItsSlotWhenDue: a delivery moved out of
// its owner's slot to wait makes no attempt (and reads nothing) until it is
// due, then goes back to the slot; one in a slot with too little of the
// invocation left for an attempt goes to the slot's end, no attempt spent.
func TestAWaitingDeliveryGoesBackToItsSlotWhenDue(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	d := webhook.New(webhook.Config{Now: func() time.Time { return now }, Timeout: 10 * time.Second}) // no store: nothing may be read
	m := queue.Message{Kind: queue.KindWebhook, JobID: "job_1", Owner: "u1", Seq: 3, DeliveryID: "dlv_1", Endpoint: "whe_1", Attempts: 2, RetryAt: now.Add(90 * time.Second)}
	waiting := m.Moved()
	waiting.Slot = "o:u1:1"
	v, err := d.Deliver(context.Background(), waiting, 1)
	if err != nil || v.Done || v.Readmit || v.RetryIn != 90*time.Second {
		t.Errorf("not due: %+v %v, want to wait 90s", v, err)
	}
	now = now.Add(90 * time.Second)
	if v, err := d.Deliver(context.Background(), waiting, 2); err != nil || !v.Readmit {
		t.Errorf("due: %+v %v, want back to its slot", v, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	back := waiting.Readmitted()
	v, err = d.Deliver(ctx, back, 1)
	if err != nil || v.Done || v.Next == nil || v.Next.Attempts != 2 || v.Next.RetryAt.After(now) {
		t.Errorf("at the invocation's end: %+v %v, want to the slot's end with its 2 attempts", v, err)
	}
}
