package handler

import (
	"context"
	"log/slog"

	"github.com/aws/aws-lambda-go/events"

	"github.com/conveyor/conveyor/internal/aws/queue"
	"github.com/conveyor/conveyor/internal/aws/sealer"
	"github.com/conveyor/conveyor/internal/aws/store"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/resources"
	"github.com/conveyor/conveyor/internal/webhook"
)

// The adapters are what webhooks declare they need: the store keeps the
// endpoints, secrets and deliveries, the queue sends the deliveries.
var (
	_ webhook.EndpointStore   = (*store.Store)(nil)
	_ webhook.SecretStore     = (*store.Store)(nil)
	_ webhook.RedeliveryStore = (*store.Store)(nil)
	_ webhook.DeliveryStore   = (*store.Store)(nil)
	_ webhook.DeliverySender  = (*queue.Sender)(nil)
)

// Deliverer makes one webhook delivery attempt.
type Deliverer interface {
	Deliver(ctx context.Context, m queue.Message, attempt int) (webhook.Verdict, error)
}

// OperationWorker works one chunk of an operator's bulk operation and
// sends its next message (admin.Worker).
type OperationWorker interface {
	Handle(ctx context.Context, m queue.Message) error
}

// SystemHandler is the system tier's consumer: webhook deliveries and the
// chunks of operators' bulk operations (ops; nil: none), e-mail and
// billing work later (unknown kinds are dropped loudly). A
// delivery to retry leaves its owner's slot to wait in a group of its own
// (or, in a group of its own already, gets its message delayed by the
// backoff), and goes back to the slot once due.
func SystemHandler(d Deliverer, ops OperationWorker, client VisibilityChanger, urls QueueURLs, log *slog.Logger) SQSHandler {
	return func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		accept := func(m queue.Message) bool {
			return m.Kind == queue.KindWebhook || (m.Kind == queue.KindOperation && ops != nil)
		}
		return ConsumeMessages(ctx, ev, client, urls, log, accept, func(ctx context.Context, msg queue.Message, receives int) (Outcome, error) {
			if msg.Kind == queue.KindOperation {
				// One chunk; the next message is sent before this one is
				// deleted (an error: this one comes back, and its chunk
				// runs again without acting on a job twice).
				return Outcome{Done: true}, ops.Handle(ctx, msg)
			}
			v, err := d.Deliver(ctx, msg, max(receives, 1))
			return Outcome{Done: v.Done, RetryIn: v.RetryIn, Readmit: v.Readmit, Next: v.Next}, err
		}), nil
	}
}

// System is the function consuming the system tier's FIFO queue: webhook
// deliveries (and, later, e-mail and billing work). It reads no secret at
// cold start: webhooks are signed with each user's own secret, sealed in
// the table.
var System = Function[SQSHandler]{Name: resources.FuncSystem, New: NewSystem}

// NewSystem wires the system function: the table, the users' webhook
// secrets (KMS) and endpoints, the queues (to delay a retry), and the bulk
// operations' worker (which re-queues and stops jobs through the state
// machine: no kind of job is registered, nothing here submits).
func NewSystem(_ context.Context, env Env) (SQSHandler, error) {
	st := env.Store(store.NewClient(env.AWS))
	keys, endpoints, err := Webhooks(env, st)
	if err != nil {
		return nil, err
	}
	sqsc := env.SQS()
	sub := NewSubmission(env, st, sqsc, &job.Fronts{})
	ops, err := env.Operations(st, sub.Jobs, sub.Sender, nil)
	if err != nil {
		return nil, err
	}
	return SystemHandler(NewDeliverer(env, st, keys, endpoints), ops, sqsc, env.QueueURLs(), env.Log()), nil
}

// NewDeliverer delivers the webhooks, signed with the users' keys, reading
// the events and keeping the deliveries in st.
func NewDeliverer(env Env, st *store.Store, keys *webhook.Keys, endpoints *webhook.Endpoints) *webhook.Deliverer {
	return webhook.New(webhook.Config{Store: st, Keys: keys, Endpoints: endpoints,
		Local: env.Config.Env == job.Local, Timeout: env.Config.WebhookTimeout, Circuit: webhook.Circuit{Failures: env.Config.WebhookCircuitFailures, Cooldown: env.Config.WebhookCircuitCooldown,
			Max: env.Config.WebhookCircuitMax, DisableAfter: env.Config.WebhookDisableAfter},
		Retries: webhook.Schedule{Base: env.Config.WebhookRetryBase, Max: env.Config.WebhookRetryMax, Attempts: env.Config.WebhookMaxAttempts}, Now: env.Now, Logger: env.Log()})
}

// Webhooks are the users' signing secrets and endpoints, kept in st (the
// api function manages them, the system function delivers with them).
func Webhooks(env Env, st *store.Store) (*webhook.Keys, *webhook.Endpoints, error) {
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

// Redeliveries makes deliveries to the users' endpoints again on request,
// sending them with sender (the api function's: it may send to every
// tier).
func Redeliveries(env Env, st *store.Store, sender webhook.DeliverySender, endpoints *webhook.Endpoints) (*webhook.Redeliveries, error) {
	return webhook.NewRedeliveries(webhook.RedeliveriesConfig{Store: st, Endpoints: endpoints, Sender: sender, Now: env.Now})
}
