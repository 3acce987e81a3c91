package handler

import (
	"context"
	"log/slog"
	"sync"

	"github.com/aws/aws-lambda-go/events"

	"github.com/conveyor/conveyor/internal/aws/bucket"
	"github.com/conveyor/conveyor/internal/aws/queue"
	"github.com/conveyor/conveyor/internal/aws/sealer"
	"github.com/conveyor/conveyor/internal/aws/secretref"
	"github.com/conveyor/conveyor/internal/breaker"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/resources"
	"github.com/conveyor/conveyor/internal/worker"
)

// PublisherHandler is the publisher function's handler, consuming the
// publish tiers' FIFO queues with ReportBatchItemFailures. Each job is its
// own message group, so the jobs of a batch run in parallel; a job that
// must wait (backoff, circuit open) gets its message's visibility set to
// the wait and is reported failed, so SQS hands it back when it is due.
func PublisherHandler(pub *worker.Worker, client VisibilityChanger, urls QueueURLs, log *slog.Logger) SQSHandler {
	return func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		accept := func(queue.Message) bool { return true } // a tier queue carries jobs only
		pre := preloadFirsts(ctx, pub, ev)
		return ConsumeMessages(ctx, ev, client, urls, log, accept, func(ctx context.Context, msg queue.Message, receives int) (Outcome, error) {
			d := worker.Delivery{JobID: msg.JobID, Owner: msg.Owner, Uploads: msg.Uploads, Receives: receives, Waits: msg.Waits()}
			d.Preload = pre.take(msg.JobID)
			v, err := pub.Run(ctx, d)
			return Outcome{Done: v.Done, RetryIn: v.RetryIn, Readmit: v.Readmit}, err
		}), nil
	}
}

// preloads are the jobs a batch read before its runs, by job id; each is
// taken once.
type preloads struct {
	mu   sync.Mutex
	byID map[string]*job.Preload
}

// take returns the preload of job id and forgets it (nil when there is
// none, or it was taken).
func (p *preloads) take(id string) *job.Preload {
	p.mu.Lock()
	defer p.mu.Unlock()
	pl := p.byID[id]
	delete(p.byID, id)
	return pl
}

// preloadFirsts reads in one request (worker.Preload) the jobs of the
// first message of each group of the batch: ConsumeFIFO starts those runs
// at once (a batch holds at most ten messages, GroupConcurrency groups run
// side by side), so each read is as fresh as the run's own. A later
// message of a group runs only after the one before it, perhaps long
// after: it reads its job itself, as does any run whose job's preload
// another message took.
func preloadFirsts(ctx context.Context, pub *worker.Worker, ev events.SQSEvent) *preloads {
	var ds []worker.Delivery
	order, groups := fifoGroups(ev)
	for _, g := range order[:min(len(order), GroupConcurrency)] {
		msg, err := queue.Decode(groups[g][0].Body)
		if err != nil { // dropped loudly by ConsumeMessages
			continue
		}
		ds = append(ds, worker.Delivery{JobID: msg.JobID, Owner: msg.Owner, Uploads: msg.Uploads})
	}
	p := &preloads{byID: map[string]*job.Preload{}}
	for _, d := range pub.Preload(ctx, ds) {
		if d.Preload != nil {
			p.byID[d.JobID] = d.Preload
		}
	}
	return p
}

// Publisher is the publisher function, consuming the publish tiers' FIFO
// queues (event source mappings with ReportBatchItemFailures): its handler
// runs each job through the half of the pipeline that runs jobs (Runner,
// runner.go): the external API's client behind its breaker, the connected
// accounts and their token refresh, the run loop (internal/worker) and
// every kind of job (Kinds) with what its Work needs; it submits nothing.
// It reads no secret at cold start: the OAuth client named by ARN is read
// when a token first needs refreshing (secretref.OAuthClientFor), so the
// publisher starts even before an operator filled the secret in; jobs that
// need it wait meanwhile.
var Publisher = Function[SQSHandler]{Name: resources.FuncPublisher, New: NewPublisher}

// NewPublisher wires the publisher function: the runner (table, bucket,
// KMS, the external API behind its breaker, every kind whole).
func NewPublisher(_ context.Context, env Env) (SQSHandler, error) {
	db, sqsc := env.DynamoDB(), env.SQS()
	st, emf := env.Store(db), env.Emitter()
	r, err := NewRunner(RunnerConfig{Env: env, Store: st, Bucket: bucket.New(env.AWS, env.Config.Bucket),
		Breaker:     func(owner string) (*breaker.Breaker, error) { return env.Breaker(db, owner, emf) },
		Sealer:      sealer.For(env.AWS, env.Config.KMSKeyID),
		OAuthClient: secretref.OAuthClientFor(env.Config, env.AWS, env.Now)})
	if err != nil {
		return nil, err
	}
	return PublisherHandler(r.Publisher, sqsc, env.QueueURLs(), env.Log()), nil
}
