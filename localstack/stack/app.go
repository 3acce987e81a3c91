package stack

import (
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/conveyor/conveyor/internal/accounts"
	"github.com/conveyor/conveyor/internal/admin"
	"github.com/conveyor/conveyor/internal/aws/awsclient"
	"github.com/conveyor/conveyor/internal/aws/bucket"
	"github.com/conveyor/conveyor/internal/aws/bus"
	"github.com/conveyor/conveyor/internal/aws/queue"
	"github.com/conveyor/conveyor/internal/aws/scheduler"
	"github.com/conveyor/conveyor/internal/aws/sealer"
	"github.com/conveyor/conveyor/internal/aws/store"
	"github.com/conveyor/conveyor/internal/breaker"
	"github.com/conveyor/conveyor/internal/config"
	"github.com/conveyor/conveyor/internal/deviantart"
	"github.com/conveyor/conveyor/internal/handler"
	"github.com/conveyor/conveyor/internal/httpapi"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/ratelimit"
	"github.com/conveyor/conveyor/internal/recovery"
	"github.com/conveyor/conveyor/internal/relay"
	"github.com/conveyor/conveyor/internal/schedule"
	"github.com/conveyor/conveyor/internal/stream"
	"github.com/conveyor/conveyor/internal/submission"
	"github.com/conveyor/conveyor/internal/uploads"
	"github.com/conveyor/conveyor/internal/webhook"
	"github.com/conveyor/conveyor/internal/worker"
)

// AppOptions adjusts the graph.
type AppOptions struct {
	// Now replaces the clock everywhere (tests).
	Now func() time.Time
	// Logger defaults to JSON on stderr.
	Logger *slog.Logger
	// HTTPClient is used for the external API (default a fresh client).
	HTTPClient *http.Client
	// Metrics receives EMF metric lines (default stdout).
	Metrics io.Writer
	// Crash is the publisher's crash hook (tests).
	Crash func(point string, j *job.Job) error
	// OperationCrash is the bulk operations' worker's crash hook (tests;
	// admin.WorkerConfig.Crash).
	OperationCrash func(point string, op store.Operation) error
	// Kinds are kinds of job added to publish and http (tests, forks).
	Kinds []job.Kind
	// Mover redrives DLQs (nil: the receive/send/delete mover,
	// queue.SQSMover; the admin function uses SQS move tasks in AWS,
	// handler.AdminOnAWS).
	Mover admin.Mover
	// Switch turns a tier's consumer off and on (nil: none, the local
	// pollers read the tier flag; in AWS the event source mappings).
	Switch admin.Switch
	// Dashboard sets the dashboard's headers (LocalDashboard for the local
	// stack's plain HTTP).
	Dashboard httpapi.DashboardOptions
}

// App is Conveyor's whole object graph at once, every service wired, for
// the local stack and the tests that drive its services directly. Each
// function's binary builds only its own part (its Function's New) from the
// same builders (internal/handler: Env, Submission, Runner, the
// functions' own, the adapters' constructors), so the two are wired one
// way. App knows no environment:
// the caller injects what differs (the DLQ mover, the tier switch).
type App struct {
	Config  config.Config
	Clients awsclient.Clients
	// Bucket is the upload bucket (internal/aws/bucket).
	Bucket    *bucket.Bucket
	Logger    *slog.Logger
	Store     *store.Store
	Sender    *queue.Sender
	Uploads   *uploads.Service
	Accounts  *accounts.Service
	Jobs      *submission.Service
	API       *deviantart.Client
	Publisher *worker.Worker
	Breaker   *breaker.Breaker
	Relay     *relay.Relay
	Webhooks  *webhook.Deliverer
	// WebhookKeys / WebhookEndpoints are the users' signing secrets and
	// endpoints.
	WebhookKeys      *webhook.Keys
	WebhookEndpoints *webhook.Endpoints
	Streams          *stream.Server
	Metrics          *handler.Emitter
	Recoverer        *recovery.Recoverer
	Admin            *admin.Service
	// Operations works off the operators' bulk operations (the system
	// function's, resumed by recovery's).
	Operations *admin.Worker
	// Resumer resumes the operations whose worker went quiet (recovery's).
	Resumer   handler.QuietOperations
	Schedules *schedule.Service
	// Rates is the api function's per-owner request rate (its Router's
	// limiter).
	Rates *ratelimit.Limiter
	// Router is the api function's routes; AdminRouter, UploadsRouter and
	// SchedulesRouter are the admin, uploads and schedules functions'
	// (resources.HTTPRoutes).
	Router          *httpapi.Router
	AdminRouter     *httpapi.Router
	UploadsRouter   *httpapi.Router
	SchedulesRouter *httpapi.Router
	QueueURLs       handler.QueueURLs
}

// NewApp wires the graph: the configuration cfg, the clients made from
// awsCfg.
func NewApp(cfg config.Config, awsCfg aws.Config, opts AppOptions) (*App, error) {
	env := handler.Env{Config: cfg, AWS: awsCfg, Logger: opts.Logger, Now: opts.Now, HTTPClient: opts.HTTPClient, Metrics: opts.Metrics}.WithDefaults()
	clients := awsclient.New(awsCfg)
	a := &App{Config: cfg, Clients: clients, Bucket: bucket.New(awsCfg, cfg.Bucket), Logger: env.Log(),
		Store: env.Store(clients.DynamoDB), Metrics: env.Emitter(), QueueURLs: env.QueueURLs()}
	sealer := sealer.For(env.AWS, env.Config.KMSKeyID)
	// Both halves in one process: the runner's kinds whole, and a
	// submission that accepts exactly those kinds (their fronts).
	r, err := handler.NewRunner(handler.RunnerConfig{Env: env, Store: a.Store, Bucket: a.Bucket, Sealer: sealer, Crash: opts.Crash, Kinds: opts.Kinds,
		Breaker: func(owner string) (*breaker.Breaker, error) { return env.Breaker(clients.DynamoDB, owner, a.Metrics) }})
	if err != nil {
		return nil, err
	}
	sub := handler.NewSubmission(env, a.Store, clients.SQS, r.Kinds.Fronts())
	a.Sender, a.API, a.Breaker, a.Accounts, a.Publisher, a.Jobs = sub.Sender, r.API, r.Breaker, r.Accounts, r.Publisher, sub.Jobs
	a.Uploads = handler.UploadsService(env, a.Store, a.Bucket)
	if a.Admin, err = env.Admin(handler.AdminParts{Store: a.Store, Jobs: a.Jobs, Sender: a.Sender, Breakers: a.Breaker, SQS: clients.SQS,
		Mover: opts.Mover, Switch: opts.Switch}); err != nil {
		return nil, err
	}
	a.Recoverer = handler.Recoverer(env, a.Store, a.Sender, a.Bucket, a.Admin.Paused, a.Metrics)
	if a.Operations, err = env.Operations(a.Store, a.Jobs, a.Sender, opts.OperationCrash); err != nil {
		return nil, err
	}
	a.Resumer = handler.QuietOperations{Worker: a.Operations, After: cfg.OperationQuietAfter, Now: env.Now}
	if a.WebhookKeys, a.WebhookEndpoints, err = handler.Webhooks(env, a.Store); err != nil {
		return nil, err
	}
	if a.Relay, err = handler.EventRelay(env, bus.For(env.AWS, cfg), a.Sender, a.WebhookEndpoints); err != nil {
		return nil, err
	}
	a.Webhooks = handler.NewDeliverer(env, a.Store, a.WebhookKeys, a.WebhookEndpoints)
	if a.Streams, err = handler.StreamServer(env, a.Store); err != nil {
		return nil, err
	}
	a.Schedules = schedule.New(schedule.Config{Store: a.Store, Jobs: a.Jobs, Now: env.Now, Logger: env.Log(), Backend: scheduler.For(env.AWS, env.Config), Sealer: sealer})
	redeliveries, err := handler.Redeliveries(env, a.Store, a.Sender, a.WebhookEndpoints)
	if err != nil {
		return nil, err
	}
	if a.Rates, err = handler.RateLimiter(env, a.Store); err != nil {
		return nil, err
	}
	a.Router = handler.APIRouter(env, httpapi.UserServices{Jobs: a.Jobs, Accounts: a.Accounts,
		Keys: a.WebhookKeys, Endpoints: a.WebhookEndpoints, Redeliveries: redeliveries, Idempotency: handler.IdempotencyFor(env, a.Store)}, opts.Dashboard, a.Rates)
	a.AdminRouter = handler.AdminRouter(env, a.Admin)
	// Each function has a limiter of its own, as each has its instances in
	// AWS: they share the owners' buckets in the table.
	uploadsRates, err := handler.RateLimiter(env, a.Store)
	if err != nil {
		return nil, err
	}
	schedulesRates, err := handler.RateLimiter(env, a.Store)
	if err != nil {
		return nil, err
	}
	a.UploadsRouter = handler.UploadsRouter(env, a.Uploads, uploadsRates)
	a.SchedulesRouter = handler.SchedulesRouter(env, a.Schedules, a.Store, schedulesRates)
	return a, nil
}
