// Package webhook delivers job events to the receivers their owner named —
// a job's webhookUrl and the owner's endpoints subscribed to the event's
// type — signed per the Standard Webhooks spec (standardwebhooks.com) with
// the owner's own secret: webhook-id (one per delivery, stable across its
// retries), webhook-timestamp, webhook-signature "v1,<base64 HMAC-SHA256 of
// id.timestamp.body>" (two during a secret rotation). A 10 s timeout, no
// redirects followed, retries on 5xx, 429 and transport errors over about a
// day (Schedule), a circuit per endpoint (Circuit), the delivery's state
// kept, and webhook.delivered / webhook.failed events. Deliveries run in
// their owner's slots of the system tier (queue.Fairness.Webhooks), one
// per endpoint at a time; a delivery that waits leaves the slot and comes
// back to it (Verdict). Outside the local environment, targets that
// resolve to private, loopback, link-local or metadata addresses are
// refused, checked on the address actually dialled.
package webhook

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/conveyor/conveyor/internal/fault"
	"github.com/conveyor/conveyor/internal/ids"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/netguard"
	"github.com/conveyor/conveyor/internal/telemetry"
)

// TimeoutDefault is how long an attempt waits for its receiver.
const TimeoutDefault = 10 * time.Second

// DeliveryStore reads what a delivery sends and keeps the deliveries'
// state (*store.Store: beside the job's events, "JOB#<id>" / "WH#<delivery>").
type DeliveryStore interface {
	// GetWebhookDelivery reads the event, its job (nil when gone) and
	// owner's endpoint (nil when gone, or endpoint is empty) in one
	// request; fault.ErrNotFound when the event is gone.
	GetWebhookDelivery(ctx context.Context, jobID string, seq int64, owner, endpoint string) (job.EventRecord, *job.Job, *EndpointRecord, error)
	// GetEvent reads one event of a job; fault.ErrNotFound when it is gone.
	GetEvent(ctx context.Context, jobID string, seq int64) (job.EventRecord, error)
	// PutWebhookDelivery records a delivery's state.
	PutWebhookDelivery(ctx context.Context, dl DeliveryRecord) error
	// FailWebhookEndpoint counts a failed attempt at owner's endpoint id,
	// opening its circuit until openUntil when that is not zero and
	// disabling it when disable is set;
	// ClearWebhookEndpoint forgets its failures. Both are fault.ErrNotFound
	// when the endpoint is gone.
	FailWebhookEndpoint(ctx context.Context, owner, id string, now, openUntil time.Time, disable bool) error
	ClearWebhookEndpoint(ctx context.Context, owner, id string) error
	// FinishWebhookDelivery records it with fn's change of its job, in one
	// transaction (from read, when not nil); fault.ErrNotFound when the job
	// is gone.
	FinishWebhookDelivery(ctx context.Context, dl DeliveryRecord, read *job.Job, fn func(*job.Job) error) error
}

// Config configures a Deliverer.
type Config struct {
	// Store reads the events and keeps the deliveries (required).
	Store DeliveryStore
	// Keys sign each delivery with its owner's secret (required).
	Keys *Keys
	// Endpoints resolve the owner's endpoint a delivery names.
	Endpoints *Endpoints
	// Local allows http and private targets (the local environment only).
	Local bool
	// Timeout per delivery (default 10s).
	Timeout time.Duration
	// Retries spaces the attempts and bounds them (zero fields: the
	// defaults of Schedule, 15 attempts over about a day).
	Retries Schedule
	// Circuit opens an endpoint's circuit after consecutive failures
	// (zero fields: the defaults of Circuit).
	Circuit Circuit
	Now     func() time.Time
	Logger  *slog.Logger
	// Transport overrides the HTTP transport (tests); the SSRF guard is
	// added to the default one only.
	Transport http.RoundTripper
	// Resolver looks up receivers' names, both when the URL is checked and
	// when the connection is made (default net.DefaultResolver).
	Resolver netguard.Resolver
}

// Deliverer delivers webhooks.
type Deliverer struct {
	cfg    Config
	client *http.Client
	guard  netguard.Policy
}

// New returns a Deliverer.
func New(cfg Config) *Deliverer {
	if cfg.Timeout == 0 {
		cfg.Timeout = TimeoutDefault
	}
	cfg.Retries = cfg.Retries.withDefaults()
	cfg.Circuit = cfg.Circuit.withDefaults()
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	guard := netguard.Policy{AllowHTTP: cfg.Local, AllowPrivate: cfg.Local, Resolver: cfg.Resolver}
	tr := cfg.Transport
	if tr == nil {
		// The guard again at connect time, on the address actually dialled:
		// no DNS rebinding between CheckURL and the connection. No proxy.
		tr = &http.Transport{DialContext: guard.DialContext, TLSHandshakeTimeout: 5 * time.Second, MaxIdleConnsPerHost: 4}
	}
	client := &http.Client{
		// A delivery is a client span, its traceparent sent to the receiver.
		Transport:     telemetry.Transport(tr, func(r *http.Request) string { return "webhook " + r.Method + " " + r.URL.Host }),
		Timeout:       cfg.Timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return &Deliverer{cfg: cfg, client: client, guard: guard}
}

// Verdict tells the consumer what to do with the message: Done deletes
// it; Readmit sends it back to the owner's slot it waited out of; else it
// comes back after RetryIn, as Next when that is set (a message in an
// owner's slot leaves it to wait, carrying its attempts and due time).
type Verdict struct {
	Done    bool
	RetryIn time.Duration
	Readmit bool
	Next    *job.Message
}

// Deliver makes one attempt at the delivery m names; receives is the
// message's receive count (1-based), added to the attempts the message
// says were made before it. A delivery waiting out of its owner's slot
// makes no attempt: it waits until it is due, then goes back to the slot.
func (d *Deliverer) Deliver(ctx context.Context, m job.Message, receives int) (Verdict, error) {
	now := d.cfg.Now()
	if m.Waits() {
		if wait := m.RetryAt.Sub(now); wait > 0 {
			return Verdict{RetryIn: wait}, nil
		}
		return Verdict{Readmit: true}, nil
	}
	attempt := m.Attempts + max(receives, 1)
	if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) < d.cfg.Timeout+time.Second {
		// Not enough of the invocation left for a whole attempt: back to
		// the slot's end, no attempt spent.
		next := m
		next.RetryAt = now
		return Verdict{RetryIn: time.Second, Next: &next}, nil
	}
	return d.attempt(ctx, m, attempt)
}

// attempt makes the attempt-th attempt at m's delivery.
func (d *Deliverer) attempt(ctx context.Context, m job.Message, attempt int) (Verdict, error) {
	r, err := d.read(ctx, m)
	if errors.Is(err, fault.ErrNotFound) {
		return Verdict{Done: true}, nil // retention removed the job meanwhile
	}
	if err != nil {
		return Verdict{}, err
	}
	ev := r.event
	log := d.cfg.Logger.With("job_id", m.JobID, "delivery", m.DeliveryID, "event", ev.Type, "attempt", attempt)
	target := ev.WebhookURL
	if m.Endpoint != "" {
		if r.endpoint == nil {
			log.InfoContext(ctx, "webhook endpoint deleted; delivery dropped", "endpoint", m.Endpoint)
			return Verdict{Done: true}, nil
		}
		target = r.endpoint.URL
		if r.endpoint.Circuit.DisabledAtMs != 0 {
			// Disabled (failing too long, or by its owner): the delivery
			// fails at once, no connection made.
			log.InfoContext(ctx, "webhook endpoint disabled; delivery failed", "endpoint", m.Endpoint)
			dl := DeliveryRecord{ID: m.DeliveryID, JobID: m.JobID, Endpoint: m.Endpoint, Owner: ev.Owner, Seq: m.Seq, Event: ev.Type, URL: target,
				Attempts: attempt - 1, Status: DeliveryFailed, LastError: "the endpoint is disabled"}
			return Verdict{Done: true}, d.save(ctx, dl)
		}
		if until, open := OpenUntil(r.endpoint.Circuit, d.cfg.Now()); open {
			// The endpoint's circuit is open: wait for it, no attempt
			// spent, no connection made.
			next := m
			next.Attempts, next.RetryAt = attempt-1, until
			log.InfoContext(ctx, "webhook deferred: the endpoint's circuit is open", "endpoint", m.Endpoint, "until", until.UTC().Format(time.RFC3339))
			return Verdict{RetryIn: until.Sub(d.cfg.Now()), Next: &next}, nil
		}
	}
	keys, err := d.cfg.Keys.SigningKeys(ctx, ev.Owner)
	if err != nil {
		return Verdict{}, err
	}
	dl := DeliveryRecord{ID: m.DeliveryID, JobID: m.JobID, Endpoint: m.Endpoint, Owner: ev.Owner, Seq: m.Seq, Event: ev.Type, URL: target, Attempts: attempt}
	body, _ := job.Marshal(ev.Body())
	status, sendErr := d.send(ctx, target, ev.Type, m.DeliveryID, body, keys)
	dl.LastStatus = status
	switch {
	case sendErr == nil && status >= 200 && status < 300:
		dl.Status = DeliveryDelivered
		log.InfoContext(ctx, "webhook delivered", "status", status)
		if err := d.closeCircuit(ctx, ev.Owner, r.endpoint); err != nil {
			return Verdict{}, err
		}
		return Verdict{Done: true}, d.finish(ctx, dl, job.EventWebhookDelivered, r.job)
	case sendErr != nil && errors.Is(sendErr, netguard.ErrForbidden):
		dl.Status, dl.LastError = DeliveryFailed, sendErr.Error()
		log.WarnContext(ctx, "webhook target refused", "error", sendErr)
		return Verdict{Done: true}, d.finish(ctx, dl, job.EventWebhookFailed, r.job)
	case sendErr == nil && status < 500 && status != http.StatusTooManyRequests:
		dl.Status, dl.LastError = DeliveryFailed, fmt.Sprintf("the receiver answered %d", status)
		log.WarnContext(ctx, "webhook refused by the receiver", "status", status)
		return Verdict{Done: true}, d.finish(ctx, dl, job.EventWebhookFailed, r.job)
	}
	if sendErr != nil {
		dl.LastError = sendErr.Error()
	} else {
		dl.LastError = fmt.Sprintf("the receiver answered %d", status)
	}
	disabled, err := d.failCircuit(ctx, ev.Owner, r.endpoint, log)
	if err != nil {
		return Verdict{}, err
	}
	if disabled {
		dl.Status, dl.Disabled = DeliveryFailed, true
		dl.LastError += "; the endpoint is disabled: it has failed for longer than " + d.cfg.Circuit.DisableAfter.String()
		return Verdict{Done: true}, d.finish(ctx, dl, job.EventWebhookFailed, r.job)
	}
	if attempt >= d.cfg.Retries.Attempts {
		dl.Status = DeliveryFailed
		log.WarnContext(ctx, "webhook failed: attempts spent", "error", dl.LastError)
		return Verdict{Done: true}, d.finish(ctx, dl, job.EventWebhookFailed, r.job)
	}
	dl.Status = DeliveryRetrying
	wait := d.cfg.Retries.Wait(attempt)
	log.InfoContext(ctx, "webhook will retry", "error", dl.LastError, "retry_in", wait.String())
	next := m
	next.Attempts, next.RetryAt = attempt, d.cfg.Now().Add(wait)
	return Verdict{RetryIn: wait, Next: &next}, d.save(ctx, dl)
}

func (d *Deliverer) send(ctx context.Context, target, eventType, delivery string, body []byte, keys [][]byte) (int, error) {
	if _, err := d.guard.CheckURL(ctx, target); err != nil {
		return 0, fmt.Errorf("%w: %v", netguard.ErrForbidden, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return 0, fmt.Errorf("%w: %v", netguard.ErrForbidden, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "Conveyor-Webhook/1")
	// Each attempt is signed at its own time, so a receiver's tolerance
	// window (5 minutes in the spec's libraries) applies per attempt.
	now := d.cfg.Now()
	req.Header.Set(HeaderID, delivery)
	req.Header.Set(HeaderTimestamp, strconv.FormatInt(now.Unix(), 10))
	req.Header.Set(HeaderSignature, Signature(delivery, now, body, keys...))
	req.Header.Set(HeaderEvent, eventType)
	resp, err := d.client.Do(req)
	if err != nil {
		if errors.Is(err, netguard.ErrForbidden) {
			return 0, err
		}
		return 0, fmt.Errorf("delivering: %w", err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	_ = resp.Body.Close()
	return resp.StatusCode, nil
}

// delivery is what one attempt reads before it sends: the event, the
// endpoint it goes to (nil when deleted, or for the job's webhookUrl) and,
// when read with them, the job its outcome is appended to (nil: read it
// when needed).
type delivery struct {
	event    job.EventRecord
	endpoint *Endpoint
	job      *job.Job
}

// read reads what m's delivery needs. A message that names its owner (all
// since the planner put it there) costs one BatchGetItem: the event, the
// job and the endpoint together. Older messages read the event, then the
// endpoint of its owner.
func (d *Deliverer) read(ctx context.Context, m job.Message) (delivery, error) {
	if m.Endpoint != "" && d.cfg.Endpoints == nil {
		return delivery{}, errors.New("webhook: a delivery to an endpoint, but no endpoints configured")
	}
	if m.Owner != "" {
		endpoint := ""
		if m.Endpoint != "" && ids.Valid(EndpointKind, m.Endpoint) {
			endpoint = m.Endpoint
		}
		ev, j, ep, err := d.cfg.Store.GetWebhookDelivery(ctx, m.JobID, m.Seq, m.Owner, endpoint)
		if err != nil {
			return delivery{}, err
		}
		r := delivery{event: ev, job: j}
		if ev.Owner != m.Owner { // never the case; never trust it either
			r.job = nil
			return r, d.readEndpoint(ctx, m, &r)
		}
		if ep != nil {
			e := Endpoint(*ep)
			r.endpoint = &e
		}
		return r, nil
	}
	ev, err := d.cfg.Store.GetEvent(ctx, m.JobID, m.Seq)
	if err != nil {
		return delivery{}, err
	}
	r := delivery{event: ev}
	return r, d.readEndpoint(ctx, m, &r)
}

// readEndpoint reads the endpoint m names, of the event's owner.
func (d *Deliverer) readEndpoint(ctx context.Context, m job.Message, r *delivery) error {
	if m.Endpoint == "" {
		return nil
	}
	ep, err := d.cfg.Endpoints.Get(ctx, r.event.Owner, m.Endpoint)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	r.endpoint = &ep
	return nil
}

// failCircuit counts a failed attempt at ep (nil: a job's webhookUrl,
// which has no circuit), opening its circuit when the failures reach the
// threshold, and disabling the endpoint when it has failed for longer than
// DisableAfter (disabled).
func (d *Deliverer) failCircuit(ctx context.Context, owner string, ep *Endpoint, log *slog.Logger) (disabled bool, err error) {
	if ep == nil {
		return false, nil
	}
	now := d.cfg.Now()
	failures := ep.Circuit.Failures + 1
	var until time.Time
	if open := d.cfg.Circuit.OpenFor(failures); open > 0 {
		until = now.Add(open)
		log.WarnContext(ctx, "webhook endpoint's circuit opened", "endpoint", ep.ID, "failures", failures, "until", until.UTC().Format(time.RFC3339))
	}
	disabled = d.cfg.Circuit.Disables(ep.Circuit, now)
	if disabled {
		log.WarnContext(ctx, "webhook endpoint disabled: failing too long", "endpoint", ep.ID, "failures", failures,
			"failing_since", time.UnixMilli(ep.Circuit.FailingSinceMs).UTC().Format(time.RFC3339))
	}
	err = d.cfg.Store.FailWebhookEndpoint(ctx, owner, ep.ID, now, until, disabled)
	if err != nil && !errors.Is(err, fault.ErrNotFound) {
		return false, err
	}
	return disabled, nil
}

// closeCircuit forgets ep's failures after a success (no write when it
// had none).
func (d *Deliverer) closeCircuit(ctx context.Context, owner string, ep *Endpoint) error {
	if ep == nil || ep.Circuit == (CircuitRecord{}) {
		return nil
	}
	err := d.cfg.Store.ClearWebhookEndpoint(ctx, owner, ep.ID)
	if err != nil && !errors.Is(err, fault.ErrNotFound) {
		return err
	}
	return nil
}

// save records the delivery's state (a retry to come).
func (d *Deliverer) save(ctx context.Context, dl DeliveryRecord) error {
	dl.UpdatedAt = d.cfg.Now().UTC()
	return d.cfg.Store.PutWebhookDelivery(ctx, dl)
}

// finish records the delivery's outcome and appends it to the job's events,
// in one transaction, from j when the delivery read the job (nil: the job
// is read first). When the job is gone, the record alone is kept.
func (d *Deliverer) finish(ctx context.Context, dl DeliveryRecord, event string, j *job.Job) error {
	dl.UpdatedAt = d.cfg.Now().UTC()
	err := d.cfg.Store.FinishWebhookDelivery(ctx, dl, j, func(j *job.Job) error {
		j.Emit(event, d.cfg.Now(), webhookDetail(dl))
		return nil
	})
	if errors.Is(err, fault.ErrNotFound) {
		return d.save(ctx, dl)
	}
	if err != nil {
		return fmt.Errorf("recording delivery %s: %w", dl.ID, err)
	}
	return nil
}

func webhookDetail(dl DeliveryRecord) map[string]string {
	d := map[string]string{"delivery": dl.ID, "event": dl.Event, "status": fmt.Sprint(dl.LastStatus)}
	if dl.Endpoint != "" {
		d["endpoint"] = dl.Endpoint
	}
	if dl.Disabled {
		d["endpointDisabled"] = "true"
	}
	return d
}
