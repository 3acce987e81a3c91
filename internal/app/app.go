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
	events2 "github.com/conveyor/conveyor/internal/events"
	"github.com/conveyor/conveyor/internal/handler"
	"github.com/conveyor/conveyor/internal/httpapi"
	"github.com/conveyor/conveyor/internal/ids"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/jobs"
	"github.com/conveyor/conveyor/internal/metrics"
	"github.com/conveyor/conveyor/internal/publish"
	"github.com/conveyor/conveyor/internal/queue"
	"github.com/conveyor/conveyor/internal/recovery"
	"github.com/conveyor/conveyor/internal/resources"
	"github.com/conveyor/conveyor/internal/retry"
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
	Relay     *events2.Relay
	Webhooks  *webhook.Deliverer
	Streams   *stream.Server
	Metrics   *metrics.Emitter
	Recoverer *recovery.Recoverer
	Admin     *admin.Service
	Router    *httpapi.Router
	QueueURLs handler.QueueURLs
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
	acc := accounts.New(accounts.Config{
		Store: st, Sealer: secrets.NewSealer(clients.KMS, cfg.KMSKeyID),
		Refresher: breaker.GuardedRefresher{Refresher: da, Breaker: brk, HostKey: hostKey},
		Worker:    worker, Now: opts.Now, Logger: log,
	})
	up := uploads.New(uploads.Config{
		Store: st, S3: clients.S3, Presign: s3.NewPresignClient(clients.S3), Bucket: cfg.Bucket,
		Prefix: "uploads/", MaxSize: cfg.MaxUploadSize, Expiry: cfg.UploadExpiry, Now: opts.Now, Logger: log,
	})
	js := jobs.New(jobs.Config{
		Store: st, Sender: sender, Provider: accounts.Provider, Env: cfg.Env, MaxAttempts: cfg.MaxAttempts, Now: opts.Now, Logger: log,
	})
	policy := retry.Policy{Base: cfg.RetryBase, Max: cfg.RetryMax, MaxAttempts: cfg.MaxAttempts, ParkAfter: cfg.ParkAfter}
	if err := policy.Validate(); err != nil {
		return nil, fmt.Errorf("retry policy: %w", err)
	}
	pcfg := publish.Config{
		Store: st, S3: clients.S3, Bucket: cfg.Bucket, Tokens: acc, API: breaker.GuardedAPI{API: da, Breaker: brk, HostKey: hostKey}, Policy: policy,
		Heartbeat: cfg.HeartbeatInterval, Worker: worker, Now: opts.Now, Logger: log,
	}
	pcfg.Crash = opts.Crash
	pub := publish.New(pcfg)
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
	relay := &events2.Relay{Store: st, Bus: clients.EventBridge, BusName: cfg.EventBus, Source: "conveyor." + string(cfg.Env), Sender: sender, Logger: log}
	hooks := webhook.New(webhook.Config{Store: st, DB: clients.DynamoDB, Table: cfg.Table, Secret: cfg.WebhookSecret,
		Local: cfg.Env == resources.Local, Now: opts.Now, Logger: log})
	verifier := auth.NewVerifier(cfg.JWTSecret, opts.Now)
	streams, err := stream.New(stream.Config{Store: st, Verifier: verifier, PingInterval: cfg.StreamPing, Logger: log})
	if err != nil {
		return nil, err
	}
	rt := httpapi.NewRouter(httpapi.Options{Verifier: verifier, Logger: log})
	api.Register(rt, api.Services{Jobs: js, Uploads: up, Accounts: acc})
	api.RegisterAdmin(rt, adm)
	var urls []string
	for _, u := range cfg.QueueURLs {
		urls = append(urls, u)
	}
	return &App{
		Config: cfg, Clients: clients, Logger: log, Store: st, Sender: sender, Uploads: up, Accounts: acc,
		Jobs: js, API: da, Publisher: pub, Breaker: brk, Metrics: emf, Relay: relay, Webhooks: hooks, Streams: streams, Recoverer: rec, Admin: adm, Router: rt, QueueURLs: handler.NewQueueURLs(urls...),
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
// names by ARN instead of carrying them: the JWT and webhook keys (the
// secret string is the key) and the OAuth client credentials (a JSON
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
	for _, s := range []struct {
		arn string
		dst *[]byte
	}{{cfg.JWTSecretARN, &cfg.JWTSecret}, {cfg.WebhookSecretARN, &cfg.WebhookSecret}} {
		if s.arn == "" || len(*s.dst) > 0 {
			continue
		}
		v, err := read(s.arn)
		if err != nil {
			return err
		}
		*s.dst = []byte(v)
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
	return handler.Recovery(a.Recoverer, a.Relay, a.Breaker, a.Metrics, a.Logger)
}

// SystemHandler is the system tier consumer's handler.
func (a *App) SystemHandler() func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) {
	return handler.System(a.Webhooks, a.Clients.SQS, a.QueueURLs, a.Logger)
}

// StreamHandler is the SSE function's handler (function URL, response streaming).
func (a *App) StreamHandler() func(context.Context, events.LambdaFunctionURLRequest) (*events.LambdaFunctionURLStreamingResponse, error) {
	v := auth.NewVerifier(a.Config.JWTSecret, nil)
	return handler.Stream(a.Streams, func(h string) (string, error) {
		c, err := v.Verify(h)
		return c.Subject, err
	}, a.Logger)
}
