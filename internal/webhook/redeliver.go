package webhook

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/conveyor/conveyor/internal/fault"
	"github.com/conveyor/conveyor/internal/invalid"
	"github.com/conveyor/conveyor/internal/job"
)

// RedeliverMax is the most deliveries one redelivery request queues: a
// request over more failures answers a cursor to go on from, so that each
// stays well inside the time a client waits.
const RedeliverMax = 100

// RedeliveryStore reads the deliveries a redelivery makes again and
// records that it makes them (*store.Store).
type RedeliveryStore interface {
	// GetEvent reads one event of a job; fault.ErrNotFound when it is gone.
	GetEvent(ctx context.Context, jobID string, seq int64) (job.EventRecord, error)
	// GetWebhookDeliveries reads deliveries' records by id (a delivery
	// with none left out).
	GetWebhookDeliveries(ctx context.Context, refs []DeliveryRef) (map[string]DeliveryRecord, error)
	// WebhookFailures reads an endpoint's failures' log from since on,
	// oldest first, after cursor; next is "" at its end.
	WebhookFailures(ctx context.Context, owner, endpoint string, since time.Time, cursor string, limit int) ([]FailureRecord, string, error)
	// RedeliverWebhook records dl, as read, as delivered again from its
	// first attempt; fault.ErrConflict when it changed since it was read.
	RedeliverWebhook(ctx context.Context, dl DeliveryRecord, now time.Time) error
}

// DeliverySender queues deliveries on the system tier (*queue.Sender).
type DeliverySender interface {
	SendBatch(ctx context.Context, tier job.Tier, msgs []job.Message) []error
}

// RedeliveriesConfig configures Redeliveries.
type RedeliveriesConfig struct {
	Store     RedeliveryStore
	Endpoints *Endpoints
	Sender    DeliverySender
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Redeliveries makes deliveries to an owner's endpoint again on the
// owner's request (Svix's resend and recover): one delivery whatever its
// outcome, or every delivery that failed since a time. A delivery made
// again keeps its webhook-id (receivers deduplicate by it), starts again
// from its first attempt with the whole retry schedule ahead, and goes to
// its endpoint's slot of its owner's, behind what is queued there.
type Redeliveries struct{ cfg RedeliveriesConfig }

// NewRedeliveries returns Redeliveries; Store, Endpoints and Sender are
// required.
func NewRedeliveries(cfg RedeliveriesConfig) (*Redeliveries, error) {
	if cfg.Store == nil || cfg.Endpoints == nil || cfg.Sender == nil {
		return nil, errors.New("webhook redeliveries: Store, Endpoints and Sender are required")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Redeliveries{cfg: cfg}, nil
}

// RedeliverRequest is the body of POST /v1/webhooks/{id}/redeliver: one
// delivery (Delivery, a webhook-id the endpoint was sent), or every
// delivery to the endpoint that failed at or after Since (Cursor goes on
// from a previous answer's NextCursor).
type RedeliverRequest struct {
	Delivery string     `json:"delivery,omitempty"`
	Since    *time.Time `json:"since,omitempty"`
	Cursor   string     `json:"cursor,omitempty"`
}

// RedeliverResult is what a redelivery queued: how many deliveries, and,
// when failures since the time remain to be looked at, the cursor to send
// with the same since to go on.
type RedeliverResult struct {
	Queued     int     `json:"queued"`
	NextCursor *string `json:"nextCursor"`
}

// ErrNoDelivery is a delivery id that names no delivery made to the
// endpoint.
var ErrNoDelivery error = &fault.NotFound{Msg: "webhook: no such delivery to this endpoint",
	Detail: "no delivery of this id was made to this endpoint (its webhook-id header names it)"}

// Redeliver makes again what req names, for owner's endpoint id:
// ErrNotFound for an endpoint owner does not have, ErrNoDelivery for a
// delivery it was never sent, an *invalid.UnusableError while the endpoint
// is disabled (endpoint_disabled) or the delivery is being retried
// (delivery_retrying), an *invalid.FieldError for a request
// that names neither or both (a since ahead finds nothing).
func (r *Redeliveries) Redeliver(ctx context.Context, owner, id string, req RedeliverRequest) (RedeliverResult, error) {
	switch {
	case (req.Delivery == "") == (req.Since == nil):
		return RedeliverResult{}, invalid.Field("", "name either a delivery or since (not both)")
	case req.Cursor != "" && req.Since == nil:
		return RedeliverResult{}, invalid.Field("cursor", "goes with the since it continues")
	}
	ep, err := r.cfg.Endpoints.Get(ctx, owner, id)
	if err != nil {
		return RedeliverResult{}, err
	}
	if !ep.Enabled() {
		return RedeliverResult{}, invalid.Unusable("", "endpoint_disabled",
			"the endpoint is disabled: enable it (PATCH /v1/webhooks/"+id+` {"enabled":true}`+") before redelivering to it")
	}
	if req.Delivery != "" {
		return r.one(ctx, owner, id, req.Delivery)
	}
	return r.since(ctx, owner, id, *req.Since, req.Cursor)
}

// one makes delivery again, whatever became of it.
func (r *Redeliveries) one(ctx context.Context, owner, endpoint, delivery string) (RedeliverResult, error) {
	jobID, seq, ok := ParseDeliveryID(delivery, endpoint)
	if !ok {
		return RedeliverResult{}, ErrNoDelivery
	}
	ev, err := r.cfg.Store.GetEvent(ctx, jobID, seq)
	if errors.Is(err, fault.ErrNotFound) || (err == nil && ev.Owner != owner) {
		return RedeliverResult{}, ErrNoDelivery
	}
	if err != nil {
		return RedeliverResult{}, err
	}
	recs, err := r.cfg.Store.GetWebhookDeliveries(ctx, []DeliveryRef{{JobID: jobID, ID: delivery}})
	if err != nil {
		return RedeliverResult{}, err
	}
	dl, ok := recs[delivery]
	if !ok {
		return RedeliverResult{}, ErrNoDelivery
	}
	if dl.Status == DeliveryRetrying {
		// Its retries are under way, a message queued for the next: a
		// second would race it.
		return RedeliverResult{}, invalid.Unusable("delivery", "delivery_retrying",
			fmt.Sprintf("the delivery is being retried (%d attempts so far); its outcome comes first", dl.Attempts))
	}
	dl.Owner, dl.Seq = owner, seq
	n, err := r.queue(ctx, []DeliveryRecord{dl})
	return RedeliverResult{Queued: n}, err
}

// since makes again every delivery to endpoint that failed at or after t
// and has not been made again since: at most RedeliverMax of them, from
// cursor on.
func (r *Redeliveries) since(ctx context.Context, owner, endpoint string, t time.Time, cursor string) (RedeliverResult, error) {
	failures, next, err := r.cfg.Store.WebhookFailures(ctx, owner, endpoint, t, cursor, RedeliverMax)
	if err != nil {
		return RedeliverResult{}, err
	}
	refs := make([]DeliveryRef, len(failures))
	for i, f := range failures {
		refs[i] = DeliveryRef{JobID: f.JobID, ID: f.DeliveryID}
	}
	recs, err := r.cfg.Store.GetWebhookDeliveries(ctx, refs)
	if err != nil {
		return RedeliverResult{}, err
	}
	var due []DeliveryRecord
	for _, f := range failures {
		dl, ok := recs[f.DeliveryID]
		// Still failed as the log says: not delivered or being retried
		// since (an earlier redelivery), and listed once.
		if !ok || dl.Status != DeliveryFailed || dl.Endpoint != endpoint {
			continue
		}
		delete(recs, f.DeliveryID)
		dl.Owner, dl.Seq = owner, f.Seq
		due = append(due, dl)
	}
	n, err := r.queue(ctx, due)
	res := RedeliverResult{Queued: n}
	if next != "" {
		res.NextCursor = &next
	}
	return res, err
}

// queue sends the messages that make dls again, then records each as
// being made again. Sent first: a crash between the two makes a delivery
// that a later request may make once more (same webhook-id), never one
// that is recorded and lost.
func (r *Redeliveries) queue(ctx context.Context, dls []DeliveryRecord) (int, error) {
	if len(dls) == 0 {
		return 0, nil
	}
	now := r.cfg.Now()
	msgs := make([]job.Message, len(dls))
	for i, dl := range dls {
		msgs[i] = job.Message{Kind: job.MessageWebhook, JobID: dl.JobID, Owner: dl.Owner, Seq: dl.Seq,
			DeliveryID: dl.ID, Endpoint: dl.Endpoint, Redelivery: now.UnixMilli()}
	}
	queued := 0
	var failed error
	for i, err := range r.cfg.Sender.SendBatch(ctx, job.System, msgs) {
		if err != nil {
			failed = errors.Join(failed, err)
			continue
		}
		queued++
		if err := r.cfg.Store.RedeliverWebhook(ctx, dls[i], now); err != nil && !errors.Is(err, fault.ErrConflict) {
			failed = errors.Join(failed, err)
		}
	}
	if failed != nil {
		return queued, fmt.Errorf("redelivering %d of %d deliveries: %w", len(dls)-queued, len(dls), failed)
	}
	return queued, nil
}

// ParseDeliveryID returns the job and event a delivery id to endpoint
// names (DeliveryID's inverse); ok is false for an id of another endpoint
// or of none.
func ParseDeliveryID(id, endpoint string) (jobID string, seq int64, ok bool) {
	rest, ok := strings.CutPrefix(id, "dlv_")
	if !ok || endpoint == "" {
		return "", 0, false
	}
	if rest, ok = strings.CutSuffix(rest, "_"+endpoint); !ok {
		return "", 0, false
	}
	i := strings.LastIndexByte(rest, '_')
	if i <= 0 {
		return "", 0, false
	}
	seq, err := strconv.ParseInt(rest[i+1:], 10, 64)
	if err != nil || seq <= 0 || DeliveryID(rest[:i], seq, endpoint) != id {
		return "", 0, false
	}
	return rest[:i], seq, true
}
