// Package runner wires the half of the pipeline that runs jobs: the
// external API's client behind its breaker, the connected accounts and
// their token refresh, the publisher's run loop and every kind of job whole
// (front and Work). The publisher function builds it, and internal/app for
// the local stack; the functions that only submit jobs build
// internal/handler/pipeline's Submission instead and link none of this.
package runner

import (
	"net/url"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/conveyor/conveyor/internal/accounts"
	"github.com/conveyor/conveyor/internal/breaker"
	"github.com/conveyor/conveyor/internal/deviantart"
	"github.com/conveyor/conveyor/internal/handler"
	"github.com/conveyor/conveyor/internal/httpcall"
	"github.com/conveyor/conveyor/internal/ids"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/kind"
	"github.com/conveyor/conveyor/internal/metrics"
	"github.com/conveyor/conveyor/internal/publish"
	"github.com/conveyor/conveyor/internal/retry"
	"github.com/conveyor/conveyor/internal/sealer"
	"github.com/conveyor/conveyor/internal/store"
)

// Config is what a Runner is built from.
type Config struct {
	// Env is the function's environment (handler.Env).
	Env handler.Env
	// DB and S3 are the clients (one per cold start).
	DB *dynamodb.Client
	S3 *s3.Client
	// Sealer opens the accounts' refresh tokens.
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

// Runner is the half of the pipeline that runs jobs: the publisher's run
// loop and every kind whole (front and Work).
type Runner struct {
	// Worker identifies this instance in leases and breaker probes.
	Worker    string
	API       *deviantart.Client
	Breaker   *breaker.Breaker
	Accounts  *accounts.Service
	Publisher *publish.Publisher
	// Kinds are the kinds the run loop runs: publish, http and Config.Kinds.
	Kinds *kind.Registry
}

// New wires the runner; it fails on a configuration a service refuses.
func New(c Config) (*Runner, error) {
	cfg, log, now := c.Env.Config, c.Env.Log(), c.Env.Now
	r := &Runner{Worker: ids.New("wrk"), Kinds: &kind.Registry{}}
	var err error
	r.API, err = deviantart.New(deviantart.Config{
		BaseURL: cfg.DeviantArtURL, ClientID: cfg.DeviantArtClientID, ClientSecret: cfg.DeviantArtClientSecret,
		HTTPClient: c.Env.HTTPClient, Now: now, CallTimeout: cfg.CallTimeout, UploadRateMin: cfg.UploadRateMin,
	})
	if err != nil {
		return nil, err
	}
	r.Breaker, err = c.Env.Breaker(c.DB, r.Worker, c.Metrics)
	if err != nil {
		return nil, err
	}
	hostKey := breaker.Key("host", APIHost(cfg.DeviantArtURL))
	r.Accounts = accounts.New(accounts.Config{
		Store: c.Store, Sealer: c.Sealer,
		Refresher: breaker.GuardedRefresher{Refresher: r.API, Breaker: r.Breaker, HostKey: hostKey},
		Worker:    r.Worker, Now: now, Logger: log,
	})
	policy := retry.Policy{Base: cfg.RetryBase, Max: cfg.RetryMax, MaxAttempts: cfg.MaxAttempts, ParkAfter: cfg.ParkAfter}
	if err := policy.Validate(); err != nil {
		return nil, err
	}
	// The kinds of job: every tier queue carries all of them and the
	// publisher function's run loop runs each by its kind.
	r.Publisher = publish.New(publish.Config{
		Store: c.Store, S3: c.S3, Bucket: cfg.Bucket, Tokens: r.Accounts, Policy: policy,
		API:       breaker.GuardedAPI{API: r.API, Breaker: r.Breaker, HostKey: hostKey},
		Heartbeat: cfg.HeartbeatInterval, Worker: r.Worker, Now: now, Logger: log, Kinds: r.Kinds, Provider: accounts.Provider,
		Crash: c.Crash, CallTimeout: r.API.Timeout, DeadlineMargin: cfg.DeadlineMargin,
	})
	r.Kinds.MustRegister(r.Publisher.Kind())
	r.Kinds.MustRegister(httpcall.New(httpcall.Config{Local: cfg.Env == job.Local, Breaker: r.Breaker}))
	for _, k := range c.Kinds {
		r.Kinds.MustRegister(k)
	}
	return r, nil
}

// APIHost is the external API's host, the key of its breaker.
func APIHost(baseURL string) string {
	if u, err := url.Parse(baseURL); err == nil && u.Host != "" {
		return u.Host
	}
	return baseURL
}
