// Package pipeline wires the part of the graph that submits and runs jobs:
// the external API's client behind its breaker, the connected accounts,
// the publisher, the registry of kinds and the jobs service. The api,
// publisher and recovery functions build it, and so does internal/app for
// the local stack, so the four are wired one way.
package pipeline

import (
	"net/url"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/conveyor/conveyor/internal/accounts"
	"github.com/conveyor/conveyor/internal/admin"
	"github.com/conveyor/conveyor/internal/breaker"
	"github.com/conveyor/conveyor/internal/deviantart"
	"github.com/conveyor/conveyor/internal/handler"
	"github.com/conveyor/conveyor/internal/httpjob"
	"github.com/conveyor/conveyor/internal/ids"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/jobs"
	"github.com/conveyor/conveyor/internal/kind"
	"github.com/conveyor/conveyor/internal/metrics"
	"github.com/conveyor/conveyor/internal/publish"
	"github.com/conveyor/conveyor/internal/queue"
	"github.com/conveyor/conveyor/internal/retry"
	"github.com/conveyor/conveyor/internal/sealer"
	"github.com/conveyor/conveyor/internal/store"
)

// Config is what the pipeline is built from.
type Config struct {
	// Env is the function's environment (handler.Env).
	Env handler.Env
	// DB, SQS and S3 are the clients (one per cold start). S3 is nil in a
	// function that submits jobs but never runs one (api, schedules): only
	// the publisher's run loop streams media.
	DB  *dynamodb.Client
	SQS *sqs.Client
	S3  *s3.Client
	// Sealer opens and seals the accounts' tokens; nil in a function that
	// connects no account and refreshes no token (schedules).
	Sealer *sealer.Sealer
	// Store is the table.
	Store *store.Store
	// Metrics receives the breakers' transitions.
	Metrics *metrics.Emitter
	// Crash is the publisher's crash hook (tests; nil in production).
	Crash func(point string, j *job.Job) error
	// Kinds are kinds of job added to publish and http (tests, forks).
	Kinds []kind.Kind
}

// Pipeline is the wired graph.
type Pipeline struct {
	// Worker identifies this instance in leases and breaker probes.
	Worker    string
	API       *deviantart.Client
	Breaker   *breaker.Breaker
	Accounts  *accounts.Service
	Publisher *publish.Publisher
	Kinds     *kind.Registry
	Jobs      *jobs.Service
	Sender    *queue.Sender
}

// New wires the pipeline; it fails on a configuration a service refuses.
func New(c Config) (*Pipeline, error) {
	cfg, log, now := c.Env.Config, c.Env.Log(), c.Env.Now
	p := &Pipeline{Worker: ids.New("wrk"), Sender: queue.NewSender(c.SQS, cfg.QueueURLs), Kinds: &kind.Registry{}}
	var err error
	p.API, err = deviantart.New(deviantart.Config{
		BaseURL: cfg.DeviantArtURL, ClientID: cfg.DeviantArtClientID, ClientSecret: cfg.DeviantArtClientSecret,
		HTTPClient: c.Env.HTTPClient, Now: now, CallTimeout: cfg.CallTimeout, UploadRateMin: cfg.UploadRateMin,
	})
	if err != nil {
		return nil, err
	}
	p.Breaker, err = c.Env.Breaker(c.DB, p.Worker, c.Metrics)
	if err != nil {
		return nil, err
	}
	hostKey := breaker.Key("host", APIHost(cfg.DeviantArtURL))
	p.Accounts = accounts.New(accounts.Config{
		Store: c.Store, Sealer: c.Sealer,
		Refresher: breaker.GuardedRefresher{Refresher: p.API, Breaker: p.Breaker, HostKey: hostKey},
		Worker:    p.Worker, Now: now, Logger: log,
	})
	policy := retry.Policy{Base: cfg.RetryBase, Max: cfg.RetryMax, MaxAttempts: cfg.MaxAttempts, ParkAfter: cfg.ParkAfter}
	if err := policy.Validate(); err != nil {
		return nil, err
	}
	// The kinds of job: every tier queue carries all of them and the
	// publisher function's run loop runs each by its kind.
	p.Publisher = publish.New(publish.Config{
		Store: c.Store, S3: c.S3, Bucket: cfg.Bucket, Tokens: p.Accounts, Policy: policy,
		API:       breaker.GuardedAPI{API: p.API, Breaker: p.Breaker, HostKey: hostKey},
		Heartbeat: cfg.HeartbeatInterval, Worker: p.Worker, Now: now, Logger: log, Kinds: p.Kinds, Provider: accounts.Provider,
		Crash: c.Crash,
	})
	p.Kinds.MustRegister(p.Publisher.Kind())
	p.Kinds.MustRegister(httpjob.New(httpjob.Config{Local: cfg.Env == job.Local, Breaker: p.Breaker}))
	for _, k := range c.Kinds {
		p.Kinds.MustRegister(k)
	}
	p.Jobs = jobs.New(jobs.Config{
		Store: c.Store, Sender: p.Sender, Kinds: p.Kinds, Env: cfg.Env, MaxAttempts: cfg.MaxAttempts, Now: now, Logger: log,
	})
	return p, nil
}

// APIHost is the external API's host, the key of its breaker.
func APIHost(baseURL string) string {
	if u, err := url.Parse(baseURL); err == nil && u.Host != "" {
		return u.Host
	}
	return baseURL
}

// Admin is the operators' service over the pipeline (env.Admin). mover
// and sw are the environment's ways to redrive a DLQ and to switch a
// tier's consumer (nil: admin's receive/send/delete mover; no switch, the
// pollers read the tier flag).
func Admin(env handler.Env, p *Pipeline, st *store.Store, client *sqs.Client, mover admin.Mover, sw admin.Switch) (*admin.Service, error) {
	return env.Admin(handler.AdminParts{Store: st, Jobs: p.Jobs, Sender: p.Sender, Breakers: p.Breaker, SQS: client, Mover: mover, Switch: sw})
}
