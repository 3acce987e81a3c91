package handler

import (
	"context"
	"log/slog"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/conveyor/conveyor/internal/aws/queue"
	"github.com/conveyor/conveyor/internal/aws/store"
	"github.com/conveyor/conveyor/internal/config"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/relay"
	"github.com/conveyor/conveyor/internal/resources"
	"github.com/conveyor/conveyor/internal/webhook"
)

// The adapters are what the relay declares it needs: the store reads the
// table's event items and feed, the queue sends the webhook deliveries.
var (
	_ relay.Decoder = store.DecodeEvents
	_ relay.Feed    = (*store.Store)(nil)
	_ relay.Sender  = (*queue.Sender)(nil)
)

// Relayer relays a stream batch of event items to the bus.
type Relayer interface {
	Handle(ctx context.Context, batch events.DynamoDBEvent) (events.DynamoDBEventResponse, relay.Result)
}

// RelayHandler is the relay function's handler, fed by the DynamoDB
// Streams event source mapping on the table (filtered to new event items,
// with ReportBatchItemFailures): it answers the records to retry, so the
// mapping resumes at the first of them. It never returns an error for a
// record; an error would make the mapping retry (and bisect) the batch.
func RelayHandler(r Relayer, emf *Emitter, log *slog.Logger) func(context.Context, events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
	return func(ctx context.Context, batch events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
		resp, res := r.Handle(ctx, batch)
		// The metric line is the batch's record (its counts are queryable
		// in the log group too); a batch with failures, or with events
		// relayed without their bus entry (too large for EventBridge),
		// gets a warning with every count, ignored records included.
		emf.Emit(map[string]float64{"EventsRelayed": float64(res.Relayed), "EventsFailed": float64(res.Failed),
			"WebhooksQueued": float64(res.Webhooks), "EventLagMaxMs": float64(res.MaxLag.Milliseconds()),
			"EventsTooLargeForBus": float64(res.TooLarge)}, nil)
		if res.Failed > 0 || res.TooLarge > 0 {
			msg := "relayed a stream batch with failures"
			if res.Failed == 0 {
				msg = "relayed a stream batch with events too large for the bus"
			}
			log.WarnContext(ctx, msg, "records", len(batch.Records), "relayed", res.Relayed,
				"failed", res.Failed, "too_large_for_bus", res.TooLarge, "ignored", res.Ignored, "webhooks", res.Webhooks, "max_lag_ms", res.MaxLag.Milliseconds())
		}
		return resp, nil
	}
}

// RelayFunc is the relay function's handler.
type RelayFunc = func(context.Context, events.DynamoDBEvent) (events.DynamoDBEventResponse, error)

// Relay is the function the DynamoDB Streams event source mapping on the
// table feeds: it puts the new event items on the bus newBus makes from the
// function's AWS settings and configuration (bus.For, the environment's
// EventBridge bus, chosen by its main) and queues the webhook deliveries
// they trigger (internal/relay). It reads no secret at cold start.
func Relay(newBus func(aws.Config, config.Config) relay.Bus) Function[RelayFunc] {
	return Function[RelayFunc]{Name: resources.FuncRelay, New: NewRelay(newBus)}
}

// NewRelay wires the relay function: the bus newBus makes, the users'
// webhook endpoints (the deliveries an event triggers) and the system
// queue.
func NewRelay(newBus func(aws.Config, config.Config) relay.Bus) func(context.Context, Env) (RelayFunc, error) {
	return func(_ context.Context, env Env) (RelayFunc, error) {
		cfg := env.Config
		endpoints, err := webhook.NewEndpoints(webhook.EndpointsConfig{Store: env.Store(store.NewClient(env.AWS)), Local: cfg.Env == job.Local, Now: env.Now})
		if err != nil {
			return nil, err
		}
		rel, err := EventRelay(env, newBus(env.AWS, cfg), queue.NewSender(env.SQS(), cfg.QueueURLs, queue.Fairness(cfg.Fairness)), endpoints)
		if err != nil {
			return nil, err
		}
		return RelayHandler(rel, env.Emitter(), env.Log()), nil
	}
}

// EventRelay puts the events on b, env's bus, and queues the webhook
// deliveries they trigger through sender.
func EventRelay(env Env, b relay.Bus, sender *queue.Sender, endpoints *webhook.Endpoints) (*relay.Relay, error) {
	cfg := env.Config
	return relay.New(relay.Config{Decode: store.DecodeEvents, Bus: b, Source: resources.EventSource(cfg.Env), BusEvents: cfg.BusEvents,
		Sender: sender, Webhooks: webhook.Planner{Endpoints: endpoints}, Now: env.Now, Logger: env.Log()})
}
