// Package events relays persisted job events from the outbox to the
// environment's EventBridge bus, in batches, and schedules the webhook
// deliveries they trigger. Events are written in the same transaction as
// the change they describe, marked as in the outbox; the relay clears the
// mark only after the bus accepted the event and its webhook (if any) was
// queued, so no event is ever lost (delivery is at least once: consumers
// dedupe by the event's id).
package events

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"

	"github.com/conveyor/conveyor/internal/queue"
	"github.com/conveyor/conveyor/internal/resources"
	"github.com/conveyor/conveyor/internal/store"
)

// BatchDefault bounds the events one relay run reads.
const BatchDefault = 500

// Sender queues work (the webhook deliveries go to the system tier).
type Sender interface {
	Send(ctx context.Context, tier resources.Tier, m queue.Message) error
}

// Relay moves events from the outbox to the bus.
type Relay struct {
	Store   *store.Store
	Bus     *eventbridge.Client
	BusName string
	// Source is the EventBridge source, e.g. "conveyor.staging".
	Source string
	Sender Sender
	// Deliveries says which webhook deliveries an event triggers (the job's
	// webhookUrl, the owner's subscribed endpoints: webhook.Planner).
	Deliveries Deliveries
	Logger     *slog.Logger
}

// Deliveries decides the webhook deliveries of an event.
type Deliveries interface {
	Deliveries(ctx context.Context, ev store.EventRecord) ([]queue.Message, error)
}

// Body is the JSON of an event on the bus and in a webhook.
type Body struct {
	ID     string            `json:"id"`
	Type   string            `json:"type"`
	At     string            `json:"at"`
	JobID  string            `json:"jobId"`
	Seq    int64             `json:"seq"`
	Detail map[string]string `json:"detail,omitempty"`
	Job    json.RawMessage   `json:"job"`
}

// BodyOf renders an event record.
func BodyOf(ev store.EventRecord) Body {
	return Body{ID: fmt.Sprintf("%s:%d", ev.JobID, ev.Seq), Type: ev.Type, At: ev.At.UTC().Format("2006-01-02T15:04:05.000Z07:00"),
		JobID: ev.JobID, Seq: ev.Seq, Detail: ev.Detail, Job: json.RawMessage(ev.Job)}
}

// Run relays one batch; it returns how many events left the outbox.
func (r *Relay) Run(ctx context.Context) (int, error) {
	log := r.Logger
	if log == nil {
		log = slog.Default()
	}
	evs, err := r.Store.Outbox(ctx, BatchDefault)
	if err != nil {
		return 0, err
	}
	done := 0
	for len(evs) > 0 {
		n := min(len(evs), 10) // PutEvents takes at most 10 entries
		batch := evs[:n]
		evs = evs[n:]
		entries := make([]ebtypes.PutEventsRequestEntry, 0, n)
		for _, ev := range batch {
			b, _ := json.Marshal(BodyOf(ev))
			entries = append(entries, ebtypes.PutEventsRequestEntry{
				EventBusName: aws.String(r.BusName), Source: aws.String(r.Source),
				DetailType: aws.String(ev.Type), Detail: aws.String(string(b)), Time: aws.Time(ev.At),
			})
		}
		out, err := r.Bus.PutEvents(ctx, &eventbridge.PutEventsInput{Entries: entries})
		if err != nil {
			return done, fmt.Errorf("publishing events: %w", err)
		}
		var relayed []store.EventRecord
		for i, ev := range batch {
			if i < len(out.Entries) && out.Entries[i].ErrorCode != nil {
				log.WarnContext(ctx, "the bus refused an event; it stays in the outbox", "job_id", ev.JobID, "seq", ev.Seq, "error", aws.ToString(out.Entries[i].ErrorMessage))
				continue
			}
			if !r.queueDeliveries(ctx, ev, log) {
				continue
			}
			relayed = append(relayed, ev)
		}
		if err := r.Store.Relayed(ctx, relayed); err != nil {
			return done, err
		}
		done += len(relayed)
	}
	return done, nil
}

// queueDeliveries queues the webhook deliveries ev triggers; false leaves
// the event in the outbox (a resend is deduplicated by the delivery id).
func (r *Relay) queueDeliveries(ctx context.Context, ev store.EventRecord, log *slog.Logger) bool {
	if r.Deliveries == nil {
		return true
	}
	msgs, err := r.Deliveries.Deliveries(ctx, ev)
	if err != nil {
		log.WarnContext(ctx, "finding the webhook deliveries failed; the event stays in the outbox", "job_id", ev.JobID, "error", err)
		return false
	}
	for _, m := range msgs {
		if err := r.Sender.Send(ctx, resources.System, m); err != nil {
			log.WarnContext(ctx, "queuing a webhook failed; the event stays in the outbox", "job_id", ev.JobID, "error", err)
			return false
		}
	}
	return true
}
