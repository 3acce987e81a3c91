package handler

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/conveyor/conveyor/internal/admin"
	"github.com/conveyor/conveyor/internal/aws/awsenv"
	"github.com/conveyor/conveyor/internal/aws/queue"
	"github.com/conveyor/conveyor/internal/aws/store"
	"github.com/conveyor/conveyor/internal/breaker"
	"github.com/conveyor/conveyor/internal/config"
	"github.com/conveyor/conveyor/internal/httpapi"
	"github.com/conveyor/conveyor/internal/telemetry"
)

// Env is what a function is built from at cold start: its configuration,
// its AWS settings and the process-wide options. Each function's New
// creates from it only the clients and services that function calls.
type Env struct {
	// Config is the validated configuration (config.FromEnv).
	Config config.Config
	// AWS is the SDK configuration the clients are made from.
	AWS aws.Config
	// Logger defaults to NewLogger.
	Logger *slog.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
	// HTTPClient is used for the external API (default a fresh client).
	HTTPClient *http.Client
	// Metrics receives EMF metric lines (default stdout).
	Metrics io.Writer
}

// Resolver completes a configuration from outside the environment before
// it is checked (secretref.FromAWS reads the secrets named by ARN).
type Resolver func(ctx context.Context, cfg *config.Config, awsCfg aws.Config) error

// Load is what every function's main does at cold start: the AWS settings
// Lambda gives the process (awsclient.Lambda), recorded when awsenv.VarLog
// names a file, then FromConfig.
func Load(ctx context.Context, fn string, resolve Resolver) (Env, error) {
	awsCfg, err := awsenv.LambdaEnv()
	if err != nil {
		return Env{}, err
	}
	// Under the local stack's conformance run, every request the function
	// makes is recorded for the IAM check (docs/iam.md).
	if awsCfg, err = awsenv.FromEnv(awsCfg, fn); err != nil {
		return Env{}, err
	}
	return FromConfig(ctx, fn, awsCfg, resolve)
}

// FromConfig reads the configuration of the function fn (resources.Func…)
// from the environment, lets resolve complete it (nil: nothing to read),
// and refuses, naming what is wrong, a configuration that is invalid or
// lacks what fn needs. `make invoke -in-process` calls it with the SDK's
// usual configuration.
func FromConfig(ctx context.Context, fn string, awsCfg aws.Config, resolve Resolver) (Env, error) {
	cfg, err := config.FromEnv(fn)
	if err != nil {
		return Env{}, err
	}
	if resolve != nil {
		if err := resolve(ctx, &cfg, awsCfg); err != nil {
			return Env{}, err
		}
	}
	if err := cfg.Complete(fn); err != nil {
		return Env{}, err
	}
	return Env{Config: cfg, AWS: awsCfg}.WithDefaults(), nil
}

// WithDefaults fills the options left empty.
func (e Env) WithDefaults() Env {
	if e.Now == nil {
		e.Now = time.Now
	}
	if e.Logger == nil {
		e.Logger = NewLogger()
	}
	return e
}

// NewLogger returns the JSON logger every function uses.
func NewLogger() *slog.Logger {
	// trace_id, span_id and job_id from the context on every line.
	return slog.New(telemetry.NewLogHandler(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})))
}

// Log is the logger with the environment's name on every line.
func (e Env) Log() *slog.Logger { return e.Logger.With("env", e.Config.Env) }

// DynamoDB is a DynamoDB client (store.Client); it honours the DynamoDB
// endpoint the AWS settings name (DynamoDB Local) even when
// AWS_ENDPOINT_URL is set.
func (e Env) DynamoDB() *store.Client { return store.NewClient(e.AWS) }

// Verifier checks the bearer tokens of a function that serves HTTP: HS256
// with key, and, when the configuration names an OIDC issuer, that
// issuer's RS256/ES256 tokens. Nothing is fetched from the issuer before
// its first token arrives (its key set is then cached), so a cold start
// pays nothing for it. config.From validated the issuer's settings; a
// Verifier that cannot be built from them is a bug, and panics.
func (e Env) Verifier(key httpapi.KeyFunc) *httpapi.Verifier {
	o := httpapi.VerifierOptions{Key: key, Now: e.Now}
	if c := e.Config.OIDC; c.Issuer != "" {
		o.OIDC = &httpapi.OIDCConfig{Issuer: c.Issuer, Audiences: c.Audiences, RoleClaim: c.RoleClaim, PlanClaim: c.PlanClaim,
			JWKSURL: c.JWKSURL, CacheTTL: c.JWKSTTL, MinRefresh: c.JWKSMinRefresh}
	}
	v, err := httpapi.NewVerifierWith(o)
	if err != nil {
		panic("handler: the token verifier: " + err.Error())
	}
	return v
}

// SQS is an SQS client (queue.Client).
func (e Env) SQS() *queue.Client { return queue.NewClient(e.AWS) }

// Store is the table, read through the indexes CONVEYOR_TABLE_INDEXES
// names, its jobs written as CONVEYOR_JOB_ITEMS says.
func (e Env) Store(db *store.Client) *store.Store {
	st := store.New(db, e.Config.Table, e.Now)
	if depth := e.Config.OwnerQueueDepth; depth > 0 {
		st.SetQueueBound(func(string, string) int { return depth })
	}
	if q := e.Config.Quotas; len(q.ActiveJobs) > 0 {
		st.SetActiveQuota(q.ActiveJobsOf)
	}
	if e.Config.TableIndexes == config.TableIndexesRetired {
		st.ReadRetiredIndexes()
	}
	if e.Config.JobItems == config.JobItemsAttributes {
		st.WriteJobAttributes()
	}
	return st
}

// Breaker is the shared circuit breaker over the table, as owner (this
// instance, in probe leases), reporting its transitions to m.
func (e Env) Breaker(db *store.Client, owner string, m *Emitter) (*breaker.Breaker, error) {
	cfg := e.Config
	return breaker.New(breaker.Options{
		Config: breaker.Config{Window: cfg.BreakerWindow, Threshold: cfg.BreakerThreshold, Cooldown: cfg.BreakerCooldown,
			ProbeLease: cfg.BreakerProbeLease, CacheTTL: cfg.BreakerCache, HostOwners: cfg.BreakerHostOwners},
		Store: e.Store(db), Owner: owner, Now: e.Now, Logger: e.Log(),
		OnTransition: func(t breaker.Transition) { breaker.ReportTransition(m, t) },
	})
}

// AdminParts are what the operators' service works with.
type AdminParts struct {
	Store *store.Store
	// Jobs re-queues jobs; Sender sends a restarted item's job.
	Jobs   admin.Requeuer
	Sender admin.Sender
	// Breakers are listed and reset.
	Breakers admin.Breakers
	// SQS reads depths and DLQs.
	SQS *queue.Client
	// Mover and Switch are the environment's ways to redrive a DLQ and to
	// switch a tier's consumer (nil: the receive/send/delete mover,
	// queue.SQSMover; no switch, the pollers read the tier flag).
	Mover  admin.Mover
	Switch admin.Switch
}

// Admin is the operators' service over p: the admin function serves it,
// recovery reads its tier flags.
func (e Env) Admin(p AdminParts) (*admin.Service, error) {
	cfg, log := e.Config, e.Log()
	mover := p.Mover
	if mover == nil {
		mover = queue.SQSMover{SQS: p.SQS, Logger: log}
	}
	return admin.New(admin.Config{
		Env: cfg.Env, Store: p.Store, Jobs: p.Jobs, Sender: p.Sender, Queues: queue.Inspector{SQS: p.SQS, Logger: log},
		QueueURLs: cfg.QueueURLs, DLQURLs: cfg.DLQURLs, Breakers: p.Breakers, StuckAfter: cfg.StuckAfter,
		BulkSyncMax: cfg.BulkSyncMax, Mover: mover, Switch: p.Switch, Now: e.Now, Logger: log,
	})
}

// Operations is the worker of the operators' bulk operations over st: it
// restarts and stops jobs through jobs and sends each operation's next
// message with sender (to the system tier). The system function runs it;
// recovery resumes, through it, an operation whose worker went quiet.
// crash is the worker's crash hook (admin.WorkerConfig.Crash; nil outside
// tests).
func (e Env) Operations(st *store.Store, jobs admin.BulkJobs, sender admin.Sender, crash func(point string, op store.Operation) error) (*admin.Worker, error) {
	return admin.NewWorker(admin.WorkerConfig{Store: st, Jobs: jobs, Sender: sender, Chunk: e.Config.BulkChunk, Crash: crash, Now: e.Now, Logger: e.Log()})
}

// Emitter writes the function's EMF metrics.
func (e Env) Emitter() *Emitter {
	return NewEmitter(e.Metrics, string(e.Config.Env), e.Now)
}

// QueueURLs indexes the tier queues' URLs by name, as the consumers need
// them to delay a message.
func (e Env) QueueURLs() QueueURLs {
	urls := make([]string, 0, len(e.Config.QueueURLs))
	for _, u := range e.Config.QueueURLs {
		urls = append(urls, u)
	}
	return NewQueueURLs(urls...)
}
