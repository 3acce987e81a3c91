package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/conveyor/conveyor/internal/fault"
	"github.com/conveyor/conveyor/internal/ids"
	"github.com/conveyor/conveyor/internal/invalid"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/netguard"
)

// EndpointKind prefixes endpoint ids ("whe_…").
const EndpointKind = "whe"

// Defaults of EndpointsConfig.
const (
	// MaxEndpointsDefault bounds a user's endpoints.
	MaxEndpointsDefault = 20
	// EndpointCacheDefault is how long the relay reuses a user's endpoint
	// list before reading it again.
	EndpointCacheDefault = 30 * time.Second
	// MaxURLLength bounds an endpoint's URL.
	MaxURLLength = 2048
)

// ErrNotFound is returned for an endpoint the caller does not have.
var ErrNotFound error = &fault.NotFound{Msg: "webhook: no such endpoint"}

// LimitCode is the code of the answer to a user who has as many endpoints
// as allowed (a *fault.Limit, 422, like a schedule's limit).
const LimitCode = "webhook_limit"

// EndpointStore keeps each user's endpoints and the summary item that
// lists them (*store.Store: the user's "HOOKS#<user>" partition). Its
// writes are conditional on the summary's version read (0: none stored)
// and are fault.ErrConflict when it changed.
type EndpointStore interface {
	// WebhookEndpoints returns owner's endpoint items, in no order.
	WebhookEndpoints(ctx context.Context, owner string) ([]EndpointRecord, error)
	// GetWebhookEndpoint returns one, or fault.ErrNotFound.
	GetWebhookEndpoint(ctx context.Context, owner, id string) (EndpointRecord, error)
	// GetWebhookSummaries returns the stored summaries of owners, by
	// owner, in one request per 100.
	GetWebhookSummaries(ctx context.Context, owners []string) (map[string]Summary, error)
	// PutWebhookSummary stores next in place of version prev.
	PutWebhookSummary(ctx context.Context, next Summary, prev int64) error
	// AddWebhookEndpoint stores a new endpoint and the summary next in one
	// transaction; ErrExists when ep's id is taken.
	AddWebhookEndpoint(ctx context.Context, owner string, ep EndpointRecord, next Summary, prev int64) error
	// EnableWebhookEndpoint enables (its circuit closed, its failures
	// forgotten) or disables one at now and returns it; fault.ErrNotFound
	// when there is no such endpoint.
	EnableWebhookEndpoint(ctx context.Context, owner, id string, enabled bool, now time.Time) (EndpointRecord, error)
	// RemoveWebhookEndpoint deletes an endpoint and stores the summary
	// next in one transaction; fault.ErrNotFound when there is no such
	// endpoint.
	RemoveWebhookEndpoint(ctx context.Context, owner, id string, next Summary, prev int64) error
}

// EndpointsConfig configures Endpoints.
type EndpointsConfig struct {
	// Store holds the endpoints (required).
	Store EndpointStore
	// Local allows http and private targets (the local environment only).
	Local bool
	// Resolver looks up the targets' names (default net.DefaultResolver).
	Resolver netguard.Resolver
	// Max bounds a user's endpoints (default MaxEndpointsDefault, 20).
	Max int
	// Cache is how long Subscribed reuses a user's list (default
	// EndpointCacheDefault, 30s): a new or deleted endpoint takes effect
	// for events relayed at most that long after the change.
	Cache time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Endpoints keeps each user's webhook endpoints: a URL and the event types
// it subscribes to. It is safe for concurrent use.
type Endpoints struct {
	cfg   EndpointsConfig
	guard netguard.Policy
	cache userCache[[]Endpoint]
}

// NewEndpoints validates cfg and returns Endpoints.
func NewEndpoints(cfg EndpointsConfig) (*Endpoints, error) {
	if cfg.Max == 0 {
		cfg.Max = MaxEndpointsDefault
	}
	if cfg.Cache == 0 {
		cfg.Cache = EndpointCacheDefault
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Store == nil || cfg.Max < 0 || cfg.Cache < 0 {
		return nil, errors.New("webhook endpoints: Store is required, Max and Cache not negative")
	}
	return &Endpoints{cfg: cfg, guard: netguard.Policy{AllowHTTP: cfg.Local, AllowPrivate: cfg.Local, Resolver: cfg.Resolver}}, nil
}

// Endpoint is one of a user's webhook receivers.
type Endpoint struct {
	ID        string    `json:"id"`
	URL       string    `json:"url"`
	Events    []string  `json:"events"`
	CreatedAt time.Time `json:"createdAt"`
	// Circuit is the endpoint's record of failed deliveries (Circuit).
	Circuit CircuitRecord `json:"-"`
}

// Enabled reports whether e receives deliveries: not disabled, after
// failing too long (Circuit.DisableAfter) or by its owner.
func (e Endpoint) Enabled() bool { return e.Circuit.DisabledAtMs == 0 }

// MarshalJSON writes e as the API shows it: with enabled, and when it is
// disabled, disabledAt.
func (e Endpoint) MarshalJSON() ([]byte, error) {
	out := struct {
		ID         string     `json:"id"`
		URL        string     `json:"url"`
		Events     []string   `json:"events"`
		CreatedAt  time.Time  `json:"createdAt"`
		Enabled    bool       `json:"enabled"`
		DisabledAt *time.Time `json:"disabledAt,omitempty"`
	}{ID: e.ID, URL: e.URL, Events: e.Events, CreatedAt: e.CreatedAt, Enabled: e.Enabled()}
	if !out.Enabled {
		at := time.UnixMilli(e.Circuit.DisabledAtMs).UTC()
		out.DisabledAt = &at
	}
	return json.Marshal(out)
}

// endpoints are the endpoints of stored records.
func endpoints(recs []EndpointRecord) []Endpoint {
	out := make([]Endpoint, len(recs))
	for i, r := range recs {
		out[i] = Endpoint(r)
	}
	return out
}

// records are the stored records of endpoints.
func records(eps []Endpoint) []EndpointRecord {
	out := make([]EndpointRecord, len(eps))
	for i, e := range eps {
		out[i] = EndpointRecord(e)
	}
	return out
}

// Subscribes reports whether e wants events of type t.
func (e Endpoint) Subscribes(t string) bool { return slices.Contains(e.Events, t) }

// CreateRequest is the body of POST /v1/webhooks.
type CreateRequest struct {
	URL    string   `json:"url"`
	Events []string `json:"events"`
}

// Create validates req and stores a new endpoint of owner. The URL follows
// the rules of a job's webhookUrl; events are the types that trigger a
// delivery (job.WebhookEvents), at least one.
func (s *Endpoints) Create(ctx context.Context, owner string, req CreateRequest) (Endpoint, error) {
	u := strings.TrimSpace(req.URL)
	switch {
	case u == "":
		return Endpoint{}, invalid.Field("url", "is required")
	case len(u) > MaxURLLength:
		return Endpoint{}, invalid.Field("url", fmt.Sprintf("must be at most %d characters", MaxURLLength))
	}
	if _, err := s.guard.CheckURL(ctx, u); err != nil {
		return Endpoint{}, invalid.Field("url", err.Error())
	}
	if len(req.Events) == 0 {
		return Endpoint{}, invalid.Field("events", "must name at least one event type: "+strings.Join(EventTypes(), ", "))
	}
	var evs []string
	for i, t := range req.Events {
		if !job.WebhookEvents[t] {
			return Endpoint{}, invalid.Field(fmt.Sprintf("events[%d]", i), fmt.Sprintf("%q is not an event type webhooks carry (%s)", t, strings.Join(EventTypes(), ", ")))
		}
		if !slices.Contains(evs, t) {
			evs = append(evs, t)
		}
	}
	slices.Sort(evs)
	ep := Endpoint{ID: ids.New(EndpointKind), URL: u, Events: evs, CreatedAt: s.cfg.Now().UTC()}
	// The endpoint and the user's summary (which also bounds the count)
	// in one transaction.
	err := s.change(ctx, owner, func(list []Endpoint) ([]Endpoint, error) {
		if len(list) >= s.cfg.Max {
			return nil, &fault.Limit{Code: LimitCode, Max: s.cfg.Max, Msg: fmt.Sprintf("at most %d webhook endpoints per user: delete one first", s.cfg.Max)}
		}
		return append(list, ep), nil
	}, func(next Summary, prev int64) error {
		err := s.cfg.Store.AddWebhookEndpoint(ctx, owner, EndpointRecord(ep), next, prev)
		if errors.Is(err, ErrExists) {
			return fmt.Errorf("storing a webhook endpoint of %s: its id exists", owner)
		}
		return err
	})
	if err != nil {
		return Endpoint{}, err
	}
	return ep, nil
}

// EventTypes lists the event types a webhook can carry, sorted.
func EventTypes() []string {
	var out []string
	for t := range job.WebhookEvents {
		out = append(out, t)
	}
	slices.Sort(out)
	return out
}

// List returns owner's endpoints, oldest first (read consistently).
func (s *Endpoints) List(ctx context.Context, owner string) ([]Endpoint, error) {
	recs, err := s.cfg.Store.WebhookEndpoints(ctx, owner)
	if err != nil {
		return nil, err
	}
	out := endpoints(recs)
	slices.SortFunc(out, func(a, b Endpoint) int { return a.CreatedAt.Compare(b.CreatedAt) })
	return out, nil
}

// Get returns one of owner's endpoints, or ErrNotFound.
func (s *Endpoints) Get(ctx context.Context, owner, id string) (Endpoint, error) {
	if !ids.Valid(EndpointKind, id) {
		return Endpoint{}, ErrNotFound
	}
	rec, err := s.cfg.Store.GetWebhookEndpoint(ctx, owner, id)
	if errors.Is(err, fault.ErrNotFound) {
		return Endpoint{}, ErrNotFound
	}
	if err != nil {
		return Endpoint{}, err
	}
	return Endpoint(rec), nil
}

// Delete removes one of owner's endpoints; deliveries already queued for
// it are dropped when their turn comes.
func (s *Endpoints) Delete(ctx context.Context, owner, id string) error {
	if !ids.Valid(EndpointKind, id) {
		return ErrNotFound
	}
	return s.change(ctx, owner, func(list []Endpoint) ([]Endpoint, error) {
		return slices.DeleteFunc(list, func(ep Endpoint) bool { return ep.ID == id }), nil
	}, func(next Summary, prev int64) error {
		err := s.cfg.Store.RemoveWebhookEndpoint(ctx, owner, id, next, prev)
		if errors.Is(err, fault.ErrNotFound) {
			return ErrNotFound
		}
		return err
	})
}

// UpdateRequest is the body of PATCH /v1/webhooks/{id}.
type UpdateRequest struct {
	// Enabled enables the endpoint (its failures forgotten, its circuit
	// closed) or disables it.
	Enabled *bool `json:"enabled"`
}

// Update applies req to one of owner's endpoints and returns it; ErrNotFound
// when there is no such endpoint. Deliveries already failed while it was
// disabled are not made again.
func (s *Endpoints) Update(ctx context.Context, owner, id string, req UpdateRequest) (Endpoint, error) {
	if req.Enabled == nil {
		return Endpoint{}, invalid.Field("enabled", "is required (true or false)")
	}
	if !ids.Valid(EndpointKind, id) {
		return Endpoint{}, ErrNotFound
	}
	rec, err := s.cfg.Store.EnableWebhookEndpoint(ctx, owner, id, *req.Enabled, s.cfg.Now())
	if errors.Is(err, fault.ErrNotFound) {
		return Endpoint{}, ErrNotFound
	}
	if err != nil {
		return Endpoint{}, err
	}
	return Endpoint(rec), nil
}

// Subscribed returns owner's endpoints, from a cache at most Cache old, so
// the relay does not read the list for every event.
func (s *Endpoints) Subscribed(ctx context.Context, owner string) ([]Endpoint, error) {
	now := s.cfg.Now()
	if list, ok := s.cache.get(owner, now); ok {
		return list, nil
	}
	if err := s.Prefetch(ctx, []string{owner}); err != nil {
		return nil, err
	}
	if list, ok := s.cache.get(owner, now); ok {
		return list, nil
	}
	return nil, fmt.Errorf("webhook endpoints of %s: not read", owner)
}

func (s *Endpoints) forget(owner string) { s.cache.forget(owner) }
