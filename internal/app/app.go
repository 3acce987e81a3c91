// Package app builds Conveyor's object graph from the configuration and the
// AWS clients, once per cold start, the same way for every function, the
// local runtime and the tests.
package app

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/conveyor/conveyor/internal/accounts"
	"github.com/conveyor/conveyor/internal/admin"
	"github.com/conveyor/conveyor/internal/api"
	"github.com/conveyor/conveyor/internal/auth"
	"github.com/conveyor/conveyor/internal/awsclient"
	"github.com/conveyor/conveyor/internal/breaker"
	"github.com/conveyor/conveyor/internal/config"
	"github.com/conveyor/conveyor/internal/deviantart"
	"github.com/conveyor/conveyor/internal/handler"
	"github.com/conveyor/conveyor/internal/httpapi"
	"github.com/conveyor/conveyor/internal/httpjob"
	"github.com/conveyor/conveyor/internal/ids"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/jobs"
	"github.com/conveyor/conveyor/internal/kind"
	"github.com/conveyor/conveyor/internal/metrics"
	"github.com/conveyor/conveyor/internal/publish"
	"github.com/conveyor/conveyor/internal/queue"
	"github.com/conveyor/conveyor/internal/recovery"
	"github.com/conveyor/conveyor/internal/relay"
	"github.com/conveyor/conveyor/internal/resources"
	"github.com/conveyor/conveyor/internal/retry"
	"github.com/conveyor/conveyor/internal/schedule"
	"github.com/conveyor/conveyor/internal/secrets"
	"github.com/conveyor/conveyor/internal/store"
	"github.com/conveyor/conveyor/internal/stream"
	"github.com/conveyor/conveyor/internal/uploads"
	"github.com/conveyor/conveyor/internal/webhook"
)

// Options adjusts the graph; the zero value is production.
type Options struct {
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
	// Kinds are kinds of job added to publish and http (tests, forks).
	Kinds []kind.Kind
}

// App is every service, wired.
type App struct {
	Config    config.Config
	Clients   awsclient.Clients
	Logger    *slog.Logger
	Store     *store.Store
	Sender    *queue.Sender
	Uploads   *uploads.Service
	Accounts  *accounts.Service
	Jobs      *jobs.Service
	API       *deviantart.Client
	Publisher *publish.Publisher
	Breaker   *breaker.Breaker
	Relay     *relay.Relay
	Webhooks  *webhook.Deliverer
	// WebhookKeys / WebhookEndpoints are the users' signing secrets and
	// endpoints.
	WebhookKeys      *webhook.Keys
	WebhookEndpoints *webhook.Endpoints
	Streams          *stream.Server
	Metrics          *metrics.Emitter
	Recoverer        *recovery.Recoverer
	Admin            *admin.Service
	Schedules        *schedule.Service
	Router           *httpapi.Router
	QueueURLs        handler.QueueURLs
}

// NewLogger returns the JSON logger every function uses.
func NewLogger() *slog.Logger {
	return slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

// New wires the graph.
func New(cfg config.Config, clients awsclient.Clients, opts Options) (*App, error) {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = NewLogger()
	}
	log := opts.Logger.With("env", cfg.Env)
	st := store.New(clients.DynamoDB, cfg.Table, opts.Now)
	sender := queue.NewSender(clients.SQS, cfg.QueueURLs)
	da, err := deviantart.New(deviantart.Config{
		BaseURL: cfg.DeviantArtURL, ClientID: cfg.DeviantArtClientID, ClientSecret: cfg.DeviantArtClientSecret,
		HTTPClient: opts.HTTPClient, Now: opts.Now, CallTimeout: cfg.CallTimeout, UploadRateMin: cfg.UploadRateMin,
	})
	if err != nil {
		return nil, err
	}
	worker := ids.New("wrk")
	emf := metrics.New(opts.Metrics, string(cfg.Env), opts.Now)
	bcfg := breaker.Config{Window: cfg.BreakerWindow, Threshold: cfg.BreakerThreshold, Cooldown: cfg.BreakerCooldown,
		ProbeLease: cfg.BreakerProbeLease, CacheTTL: cfg.BreakerCache}
	brk, err := breaker.New(breaker.Options{Config: bcfg, DB: clients.DynamoDB, Table: cfg.Table, Owner: worker, Now: opts.Now, Logger: log,
		OnTransition: func(t breaker.Transition) { breaker.ReportTransition(emf, t) }})
	if err != nil {
		return nil, err
	}
	host := cfg.DeviantArtURL
	if u, err := url.Parse(cfg.DeviantArtURL); err == nil && u.Host != "" {
		host = u.Host
	}
	hostKey := breaker.Key("host", host)
	sealer := secrets.NewSealer(clients.KMS, cfg.KMSKeyID)
	acc := accounts.New(accounts.Config{
		Store: st, Sealer: sealer,
		Refresher: breaker.GuardedRefresher{Refresher: da, Breaker: brk, HostKey: hostKey},
		Worker:    worker, Now: opts.Now, Logger: log,
	})
	up := uploads.New(uploads.Config{
		Store: st, S3: clients.S3, Presign: s3.NewPresignClient(clients.S3), Bucket: cfg.Bucket,
		Prefix: "uploads/", MaxSize: cfg.MaxUploadSize, Expiry: cfg.UploadExpiry, Now: opts.Now, Logger: log,
	})
	policy := retry.Policy{Base: cfg.RetryBase, Max: cfg.RetryMax, MaxAttempts: cfg.MaxAttempts, ParkAfter: cfg.ParkAfter}
	if err := policy.Validate(); err != nil {
		return nil, fmt.Errorf("retry policy: %w", err)
	}
	// The kinds of job: every tier queue carries all of them and the
	// publisher function's run loop runs each by its kind.
	kinds := &kind.Registry{}
	pcfg := publish.Config{
		Store: st, S3: clients.S3, Bucket: cfg.Bucket, Tokens: acc, API: breaker.GuardedAPI{API: da, Breaker: brk, HostKey: hostKey}, Policy: policy,
		Heartbeat: cfg.HeartbeatInterval, Worker: worker, Now: opts.Now, Logger: log, Kinds: kinds, Provider: accounts.Provider,
	}
	pcfg.Crash = opts.Crash
	pub := publish.New(pcfg)
	kinds.MustRegister(pub.Kind())
	kinds.MustRegister(httpjob.New(httpjob.Config{Local: cfg.Env == resources.Local, Breaker: brk}))
	for _, k := range opts.Kinds {
		kinds.MustRegister(k)
	}
	js := jobs.New(jobs.Config{
		Store: st, Sender: sender, Kinds: kinds, Env: cfg.Env, MaxAttempts: cfg.MaxAttempts, Now: opts.Now, Logger: log,
	})
	acfg := admin.Config{
		Env: cfg.Env, Store: st, Jobs: js, Sender: sender, SQS: clients.SQS, QueueURLs: cfg.QueueURLs, DLQURLs: cfg.DLQURLs,
		Breakers: brk, StuckAfter: cfg.StuckAfter, Now: opts.Now, Logger: log,
	}
	if cfg.Env != resources.Local {
		// AWS: SQS move tasks for whole-DLQ redrives, and pausing a tier
		// disables its event source mapping. Locally the emulator lacks
		// both: receive/send/delete, and the pollers read the flag.
		acfg.Mover = admin.TaskMover{SQS: clients.SQS, Fallback: admin.SQSMover{SQS: clients.SQS, Logger: log}, Logger: log}
		acfg.Switch = admin.ESMSwitch{Lambda: clients.Lambda, UUIDs: cfg.ESMUUIDs}
	}
	adm, err := admin.New(acfg)
	if err != nil {
		return nil, err
	}
	rec := recovery.New(recovery.Config{
		Store: st, Sender: sender, S3: clients.S3, Bucket: cfg.Bucket, StuckAfter: cfg.StuckAfter,
		StaleAfter: cfg.StaleAfter, DeleteAfter: cfg.DeleteAfter, Paused: adm.Paused, Now: opts.Now, Logger: log,
	})
	keys, err := webhook.NewKeys(webhook.KeysConfig{DB: clients.DynamoDB, Table: cfg.Table, Sealer: sealer,
		Overlap: cfg.WebhookSecretOverlap, Now: opts.Now})
	if err != nil {
		return nil, err
	}
	endpoints, err := webhook.NewEndpoints(webhook.EndpointsConfig{DB: clients.DynamoDB, Table: cfg.Table,
		Local: cfg.Env == resources.Local, Now: opts.Now})
	if err != nil {
		return nil, err
	}
	rel, err := relay.New(relay.Config{Bus: clients.EventBridge, BusName: cfg.EventBus, Source: resources.EventSource(cfg.Env),
		Sender: sender, Webhooks: webhook.Planner{Endpoints: endpoints}, Now: opts.Now, Logger: log})
	if err != nil {
		return nil, err
	}
	hooks := webhook.New(webhook.Config{Store: st, DB: clients.DynamoDB, Table: cfg.Table, Keys: keys, Endpoints: endpoints,
		Local: cfg.Env == resources.Local, Now: opts.Now, Logger: log})
	verifier := auth.NewVerifier(cfg.JWTSecret, opts.Now)
	streams, err := stream.New(stream.Config{Store: st, DB: clients.DynamoDB, Table: cfg.Table, PingInterval: cfg.StreamPing,
		PollInterval: cfg.StreamPoll, MaxPerUser: cfg.StreamMaxPerUser, Logger: log})
	if err != nil {
		return nil, err
	}
	rt := httpapi.NewRouter(httpapi.Options{Verifier: verifier, Logger: log})
	scfg := schedule.Config{DB: clients.DynamoDB, Table: cfg.Table, Jobs: js, Now: opts.Now, Logger: log}
	if cfg.ScheduleGroup != "" {
		scfg.Backend = schedule.SchedulerBackend{Client: clients.Scheduler, Group: cfg.ScheduleGroup,
			TargetARN: cfg.ScheduleTargetARN, RoleARN: cfg.ScheduleRoleARN}
	}
	scheds := schedule.New(scfg)
	api.Register(rt, api.Services{Jobs: js, Uploads: up, Accounts: acc, Schedules: scheds, Keys: keys, Endpoints: endpoints})
	api.RegisterAdmin(rt, adm)
	// The operations dashboard: served by the api function, in AWS as here.
	api.RegisterDashboard(rt, api.DashboardOptions{Local: cfg.Env == resources.Local})
	var urls []string
	for _, u := range cfg.QueueURLs {
		urls = append(urls, u)
	}
	return &App{
		Config: cfg, Clients: clients, Logger: log, Store: st, Sender: sender, Uploads: up, Accounts: acc,
		Jobs: js, API: da, Publisher: pub, Breaker: brk, Metrics: emf, Relay: rel, Webhooks: hooks, WebhookKeys: keys, WebhookEndpoints: endpoints, Streams: streams, Recoverer: rec, Admin: adm, Schedules: scheds, Router: rt, QueueURLs: handler.NewQueueURLs(urls...),
	}, nil
}

// FromEnv reads the configuration and AWS settings from the environment and
// wires the graph for the function fn (resources.Func…): what every
// function's main does at cold start. It refuses to start, naming what is
// wrong, when the configuration is invalid or lacks what fn needs, secrets
// read by ARN included.
func FromEnv(ctx context.Context, fn string) (*App, error) {
	awsCfg, err := awsclient.LambdaEnv()
	if err != nil {
		return nil, err
	}
	return FromConfig(ctx, fn, awsCfg)
}

// FromConfig is FromEnv with the AWS configuration given (awsclient.Load
// outside Lambda, as `make invoke` in process).
func FromConfig(ctx context.Context, fn string, awsCfg aws.Config) (*App, error) {
	cfg, err := config.FromEnv(fn)
	if err != nil {
		return nil, err
	}
	if err := resolveSecrets(ctx, &cfg, secretsmanager.NewFromConfig(awsCfg)); err != nil {
		return nil, err
	}
	if err := cfg.Complete(fn); err != nil {
		return nil, err
	}
	return New(cfg, awsclient.New(awsCfg), Options{})
}

// oauthClient is the value of the OAuth client secret.
type oauthClient struct {
	ClientID     string `json:"clientId"`
	ClientSecret string `json:"clientSecret"`
}

// resolveSecrets reads from Secrets Manager the secrets the configuration
// names by ARN instead of carrying them: the JWT key (the secret string
// is the key) and the OAuth client credentials (a JSON
// object {"clientId","clientSecret"}). A value already set wins over its
// ARN. Errors name the secret, never its value.
func resolveSecrets(ctx context.Context, cfg *config.Config, sm *secretsmanager.Client) error {
	read := func(arn string) (string, error) {
		out, err := sm.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String(arn)})
		if err != nil {
			return "", fmt.Errorf("reading secret %s: %w", arn, err)
		}
		return aws.ToString(out.SecretString), nil
	}
	if cfg.JWTSecretARN != "" && len(cfg.JWTSecret) == 0 {
		v, err := read(cfg.JWTSecretARN)
		if err != nil {
			return err
		}
		cfg.JWTSecret = []byte(v)
	}
	if arn := cfg.DeviantArtClientSecretARN; arn != "" && (cfg.DeviantArtClientID == "" || cfg.DeviantArtClientSecret == "") {
		v, err := read(arn)
		if err != nil {
			return err
		}
		var c oauthClient
		if err := json.Unmarshal([]byte(v), &c); err != nil {
			// The decoder's message may quote the value: leave it out.
			return fmt.Errorf(`secret %s is not a JSON object {"clientId":"…","clientSecret":"…"}`, arn)
		}
		cfg.DeviantArtClientID, cfg.DeviantArtClientSecret = c.ClientID, c.ClientSecret
	}
	return nil
}

// APIHandler is the API function's handler.
func (a *App) APIHandler() func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	return a.Router.Serve
}

// ConfirmHandler is the confirm function's handler.
func (a *App) ConfirmHandler() func(context.Context, events.S3Event) error {
	return handler.Confirm(a.Uploads)
}

// PublisherHandler is the publisher function's handler.
func (a *App) PublisherHandler() func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) {
	return handler.Publisher(a.Publisher, a.Clients.SQS, a.QueueURLs, a.Logger)
}

// RecoveryHandler is the recovery function's handler.
func (a *App) RecoveryHandler() func(context.Context, events.EventBridgeEvent) error {
	return handler.Recovery(a.Recoverer, a.Breaker, a.Schedules, a.Metrics, a.Logger)
}

// RelayHandler is the relay function's handler (the table's stream).
func (a *App) RelayHandler() func(context.Context, events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
	return handler.Relay(a.Relay, a.Metrics, a.Logger)
}

// SystemHandler is the system tier consumer's handler.
func (a *App) SystemHandler() func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) {
	return handler.System(a.Webhooks, a.Clients.SQS, a.QueueURLs, a.Logger)
}

// StreamHandler is the SSE function's handler (function URL, response streaming).
func (a *App) StreamHandler() func(context.Context, events.LambdaFunctionURLRequest) (*events.LambdaFunctionURLStreamingResponse, error) {
	v := auth.NewVerifier(a.Config.JWTSecret, nil)
	return handler.Stream(handler.OpenStreams(a.Streams), v.Verify, a.Logger)
}
