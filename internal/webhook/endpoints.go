package webhook

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/conveyor/conveyor/internal/ids"
	"github.com/conveyor/conveyor/internal/invalid"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/netguard"
	"github.com/conveyor/conveyor/internal/resources"
	"github.com/conveyor/conveyor/internal/store"
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
var ErrNotFound = errors.New("webhook: no such endpoint")

// LimitError is a user who has as many endpoints as allowed: the request is
// well-formed, the state refuses it (422, like a schedule's limit).
type LimitError struct{ Max int }

func (e *LimitError) Error() string {
	return fmt.Sprintf("at most %d webhook endpoints per user: delete one first", e.Max)
}

// EndpointsConfig configures Endpoints.
type EndpointsConfig struct {
	// DB and Table hold the endpoints (required).
	DB    *dynamodb.Client
	Table string
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
	store *store.Store // batch reads of the summaries
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
	if cfg.DB == nil || cfg.Table == "" || cfg.Max < 0 || cfg.Cache < 0 {
		return nil, errors.New("webhook endpoints: DB and Table are required, Max and Cache not negative")
	}
	return &Endpoints{cfg: cfg, guard: netguard.Policy{AllowHTTP: cfg.Local, AllowPrivate: cfg.Local, Resolver: cfg.Resolver},
		store: store.New(cfg.DB, cfg.Table, cfg.Now)}, nil
}

// Endpoint is one of a user's webhook receivers.
type Endpoint struct {
	ID        string    `dynamodbav:"endpointId" json:"id"`
	URL       string    `dynamodbav:"url" json:"url"`
	Events    []string  `dynamodbav:"events" json:"events"`
	CreatedAt time.Time `dynamodbav:"createdAt" json:"createdAt"`
}

// Subscribes reports whether e wants events of type t.
func (e Endpoint) Subscribes(t string) bool { return slices.Contains(e.Events, t) }

// CreateRequest is the body of POST /v1/webhooks.
type CreateRequest struct {
	URL    string   `json:"url"`
	Events []string `json:"events"`
}

type endpointRecord struct {
	Endpoint
	Owner string `dynamodbav:"hooksOwner"`
}

func endpointSK(id string) string { return "EP#" + id }

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
	item, err := attributevalue.MarshalMap(endpointRecord{Endpoint: ep, Owner: owner})
	if err != nil {
		return Endpoint{}, err
	}
	for n, v := range key(hooksPK(owner), endpointSK(ep.ID)) {
		item[n] = v
	}
	e, _ := expression.NewBuilder().WithCondition(expression.AttributeNotExists(expression.Name(resources.AttrPK))).Build()
	put := types.TransactWriteItem{Put: &types.Put{TableName: aws.String(s.cfg.Table), Item: item,
		ConditionExpression: e.Condition(), ExpressionAttributeNames: e.Names()}}
	// The endpoint and the user's summary (which also bounds the count)
	// in one transaction.
	err = s.change(ctx, owner, func(list []Endpoint) ([]Endpoint, types.TransactWriteItem, error) {
		if len(list) >= s.cfg.Max {
			return nil, put, &LimitError{Max: s.cfg.Max}
		}
		return append(list, ep), put, nil
	}, fmt.Errorf("storing a webhook endpoint of %s: its id exists", owner))
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
	kc := expression.Key(resources.AttrPK).Equal(expression.Value(hooksPK(owner))).
		And(expression.Key(resources.AttrSK).BeginsWith("EP#"))
	e, err := expression.NewBuilder().WithKeyCondition(kc).Build()
	if err != nil {
		return nil, err
	}
	in := &dynamodb.QueryInput{TableName: aws.String(s.cfg.Table), KeyConditionExpression: e.KeyCondition(),
		ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(), ConsistentRead: aws.Bool(true)}
	out := []Endpoint{}
	for {
		res, err := s.cfg.DB.Query(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("listing the webhook endpoints of %s: %w", owner, err)
		}
		for _, item := range res.Items {
			var r endpointRecord
			if err := attributevalue.UnmarshalMap(item, &r); err != nil {
				return nil, fmt.Errorf("decoding a webhook endpoint: %w", err)
			}
			out = append(out, r.Endpoint)
		}
		if len(res.LastEvaluatedKey) == 0 {
			break
		}
		in.ExclusiveStartKey = res.LastEvaluatedKey
	}
	slices.SortFunc(out, func(a, b Endpoint) int { return a.CreatedAt.Compare(b.CreatedAt) })
	return out, nil
}

// Get returns one of owner's endpoints, or ErrNotFound.
func (s *Endpoints) Get(ctx context.Context, owner, id string) (Endpoint, error) {
	if !ids.Valid(EndpointKind, id) {
		return Endpoint{}, ErrNotFound
	}
	res, err := s.cfg.DB.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(s.cfg.Table), Key: key(hooksPK(owner), endpointSK(id))})
	if err != nil {
		return Endpoint{}, fmt.Errorf("reading webhook endpoint %s: %w", id, err)
	}
	if len(res.Item) == 0 {
		return Endpoint{}, ErrNotFound
	}
	return decodeEndpoint(id, res.Item)
}

// endpointKey is the item of owner's endpoint id.
func endpointKey(owner, id string) store.ItemKey {
	return store.ItemKey{PK: hooksPK(owner), SK: endpointSK(id)}
}

func decodeEndpoint(id string, item map[string]types.AttributeValue) (Endpoint, error) {
	var r endpointRecord
	if err := attributevalue.UnmarshalMap(item, &r); err != nil {
		return Endpoint{}, fmt.Errorf("decoding webhook endpoint %s: %w", id, err)
	}
	return r.Endpoint, nil
}

// Delete removes one of owner's endpoints; deliveries already queued for
// it are dropped when their turn comes.
func (s *Endpoints) Delete(ctx context.Context, owner, id string) error {
	if !ids.Valid(EndpointKind, id) {
		return ErrNotFound
	}
	e, _ := expression.NewBuilder().WithCondition(expression.AttributeExists(expression.Name(resources.AttrPK))).Build()
	del := types.TransactWriteItem{Delete: &types.Delete{TableName: aws.String(s.cfg.Table), Key: key(hooksPK(owner), endpointSK(id)),
		ConditionExpression: e.Condition(), ExpressionAttributeNames: e.Names()}}
	return s.change(ctx, owner, func(list []Endpoint) ([]Endpoint, types.TransactWriteItem, error) {
		return slices.DeleteFunc(list, func(ep Endpoint) bool { return ep.ID == id }), del, nil
	}, ErrNotFound)
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
