// Package systemfn is the system tier's consumer (webhook deliveries):
// its handler and its wiring.
package systemfn

import (
	"context"
	"log/slog"

	"github.com/aws/aws-lambda-go/events"

	"github.com/conveyor/conveyor/internal/handler"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/queue"
	"github.com/conveyor/conveyor/internal/resources"
	"github.com/conveyor/conveyor/internal/sealer"
	"github.com/conveyor/conveyor/internal/store"
	"github.com/conveyor/conveyor/internal/webhook"
)

// Deliverer makes one webhook delivery attempt.
type Deliverer interface {
	Deliver(ctx context.Context, m queue.Message, attempt int) (webhook.Verdict, error)
}

// Handler is the system tier's consumer: webhook deliveries now, e-mail and
// billing work later (unknown kinds are dropped loudly). A delivery to
// retry gets its message delayed by the backoff and is reported failed.
func Handler(d Deliverer, client handler.VisibilityChanger, urls handler.QueueURLs, log *slog.Logger) func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) {
	return func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		accept := func(m queue.Message) bool { return m.Kind == queue.KindWebhook }
		return handler.ConsumeMessages(ctx, ev, client, urls, log, accept, func(ctx context.Context, msg queue.Message, receives int) (handler.Outcome, error) {
			v, err := d.Deliver(ctx, msg, max(receives, 1))
			return handler.Outcome{Done: v.Done, RetryIn: v.RetryIn}, err
		}), nil
	}
}

// Name is the function's name in the resource definition.
const Name = resources.FuncSystem

// Resolve completes the configuration at cold start: nil, webhooks are
// signed with each user's own secret, sealed in the table.
var Resolve handler.Resolver

// New wires the system function: the table, the users' webhook secrets
// (KMS) and endpoints, and the queues (to delay a retry).
func New(_ context.Context, env handler.Env) (func(context.Context, events.SQSEvent) (events.SQSEventResponse, error), error) {
	st := env.Store(store.NewClient(env.AWS))
	keys, endpoints, err := Webhooks(env, st)
	if err != nil {
		return nil, err
	}
	return Handler(NewDeliverer(env, st, keys, endpoints), env.SQS(), env.QueueURLs(), env.Log()), nil
}

// NewDeliverer delivers the webhooks, signed with the users' keys, reading
// the events and keeping the deliveries in st.
func NewDeliverer(env handler.Env, st *store.Store, keys *webhook.Keys, endpoints *webhook.Endpoints) *webhook.Deliverer {
	return webhook.New(webhook.Config{Store: st, Keys: keys, Endpoints: endpoints,
		Local: env.Config.Env == job.Local, Now: env.Now, Logger: env.Log()})
}

// Webhooks are the users' signing secrets and endpoints, kept in st (the
// api function manages them, the system function delivers with them).
func Webhooks(env handler.Env, st *store.Store) (*webhook.Keys, *webhook.Endpoints, error) {
	cfg := env.Config
	keys, err := webhook.NewKeys(webhook.KeysConfig{Store: st, Sealer: sealer.For(env.AWS, env.Config.KMSKeyID), Overlap: cfg.WebhookSecretOverlap, Now: env.Now})
	if err != nil {
		return nil, nil, err
	}
	endpoints, err := webhook.NewEndpoints(webhook.EndpointsConfig{Store: st, Local: cfg.Env == job.Local, Now: env.Now})
	if err != nil {
		return nil, nil, err
	}
	return keys, endpoints, nil
}
