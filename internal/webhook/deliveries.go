package webhook

import (
	"context"
	"fmt"

	"github.com/conveyor/conveyor/internal/job"
)

// Planner decides which webhook deliveries an event triggers.
type Planner struct {
	// Endpoints are the users' endpoints (their lists are cached).
	Endpoints *Endpoints
}

// Prefetch reads the endpoints of owners in one request (relay.Prefetcher),
// so that planning a stream batch's deliveries costs one read, not one per
// user.
func (p Planner) Prefetch(ctx context.Context, owners []string) error {
	if p.Endpoints == nil {
		return nil
	}
	return p.Endpoints.Prefetch(ctx, owners)
}

// DeliveryID names the delivery of event seq of jobID to endpoint ("" for
// the job's webhookUrl). It is the webhook-id header: unique per delivery,
// the same on every retry of it.
func DeliveryID(jobID string, seq int64, endpoint string) string {
	if endpoint == "" {
		return fmt.Sprintf("dlv_%s_%d", jobID, seq)
	}
	return fmt.Sprintf("dlv_%s_%d_%s", jobID, seq, endpoint)
}

// Deliveries returns the system-tier messages of the deliveries ev
// triggers: one to the job's webhookUrl, and one to each of the owner's
// endpoints subscribed to the event's type. Events of other types trigger
// none.
func (p Planner) Deliveries(ctx context.Context, ev job.EventRecord) ([]job.Message, error) {
	if !job.WebhookEvents[ev.Type] {
		return nil, nil
	}
	var out []job.Message
	if ev.WebhookURL != "" {
		out = append(out, job.Message{Kind: job.MessageWebhook, JobID: ev.JobID, Owner: ev.Owner, Seq: ev.Seq, DeliveryID: DeliveryID(ev.JobID, ev.Seq, "")})
	}
	if p.Endpoints == nil || ev.Owner == "" {
		return out, nil
	}
	eps, err := p.Endpoints.Subscribed(ctx, ev.Owner)
	if err != nil {
		return nil, err
	}
	for _, e := range eps {
		if e.Subscribes(ev.Type) {
			out = append(out, job.Message{Kind: job.MessageWebhook, JobID: ev.JobID, Owner: ev.Owner, Seq: ev.Seq, DeliveryID: DeliveryID(ev.JobID, ev.Seq, e.ID), Endpoint: e.ID})
		}
	}
	return out, nil
}
