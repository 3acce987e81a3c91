package handler

import (
	"context"
	"errors"
	"net/url"
	"time"

	"github.com/conveyor/conveyor/internal/accounts"
	"github.com/conveyor/conveyor/internal/aws/bucket"
	"github.com/conveyor/conveyor/internal/aws/sealer"
	"github.com/conveyor/conveyor/internal/aws/secretref"
	"github.com/conveyor/conveyor/internal/aws/store"
	"github.com/conveyor/conveyor/internal/breaker"
	"github.com/conveyor/conveyor/internal/deviantart"
	"github.com/conveyor/conveyor/internal/httpkind"
	"github.com/conveyor/conveyor/internal/ids"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/publish"
	"github.com/conveyor/conveyor/internal/retry"
	"github.com/conveyor/conveyor/internal/worker"
)

// The store keeps the jobs of the run loop.
var _ worker.Store = (*store.Store)(nil)

// The table is what the publish kind reads and writes of it (publish.Store).
var _ publish.Store = (*store.Store)(nil)

// RunnerConfig is what a Runner is built from.
type RunnerConfig struct {
	// Env is the function's environment.
	Env Env
	// Breaker builds the shared circuit breaker over the table for owner,
	// the runner's Worker, which holds its probe leases
	// (Env.Breaker, reporting its transitions to the function's
	// metrics).
	Breaker func(owner string) (*breaker.Breaker, error)
	// Bucket is the upload bucket the publish kind reads the items' images
	// from (one per cold start).
	Bucket *bucket.Bucket
	// Sealer opens the accounts' refresh tokens.
	Sealer *sealer.Sealer
	// Store is the table.
	Store *store.Store
	// Crash is the run loop's crash hook (tests; nil in production).
	Crash func(point string, j *job.Job) error
	// Kinds are kinds of job added to publish and http (tests, forks).
	Kinds []job.Kind
	// OAuthClient, when set, gives the OAuth client credentials, read from
	// their secret when a token first needs refreshing
	// (secretref.OAuthClientFor); nil, they are the configuration's values.
	// While the secret holds none, the jobs that must refresh a token
	// wait, parked, spending no attempt (see oauthReady).
	OAuthClient *secretref.OAuthClient
}

// Runner is the half of the pipeline that runs jobs: the run loop
// (internal/worker) and every kind whole (front and Work).
type Runner struct {
	// Worker identifies this instance in leases and breaker probes.
	Worker   string
	API      *deviantart.Client
	Breaker  *breaker.Breaker
	Accounts *accounts.Service
	// Publisher is the publisher function's run loop.
	Publisher *worker.Worker
	// Kinds are the kinds the run loop runs: publish, http and Config.Kinds.
	Kinds *job.Registry
}

// NewRunner wires the runner; it fails on a configuration a service refuses.
func NewRunner(c RunnerConfig) (*Runner, error) {
	cfg, log, now := c.Env.Config, c.Env.Log(), c.Env.Now
	r := &Runner{Worker: ids.New("wrk"), Kinds: &job.Registry{}}
	var err error
	api := deviantart.Config{
		BaseURL: cfg.DeviantArtURL, ClientID: cfg.DeviantArtClientID, ClientSecret: cfg.DeviantArtClientSecret,
		HTTPClient: c.Env.HTTPClient, Now: now, CallTimeout: cfg.CallTimeout, UploadRateMin: cfg.UploadRateMin,
	}
	var ready func(context.Context) error
	if c.OAuthClient != nil {
		api.Credentials = c.OAuthClient.Get
		ready = oauthReady(c.OAuthClient, max(cfg.OAuthClientRecheck, cfg.ParkAfter), now)
	}
	r.API, err = deviantart.New(api)
	if err != nil {
		return nil, err
	}
	r.Breaker, err = c.Breaker(r.Worker)
	if err != nil {
		return nil, err
	}
	hostKey := breaker.Key("host", APIHost(cfg.DeviantArtURL))
	r.Accounts = accounts.New(accounts.Config{
		Store: c.Store, Sealer: c.Sealer,
		Refresher: breaker.GuardedRefresher{Refresher: r.API, Breaker: r.Breaker, HostKey: hostKey},
		Ready:     ready, Worker: r.Worker, Now: now, Logger: log,
	})
	policy := retry.Policy{Base: cfg.RetryBase, Max: cfg.RetryMax, MaxAttempts: cfg.MaxAttempts, ParkAfter: cfg.ParkAfter}
	if err := policy.Validate(); err != nil {
		return nil, err
	}
	// The kinds of job: every tier queue carries all of them and the
	// publisher function's run loop runs each by its kind.
	r.Publisher = worker.New(worker.Config{
		Store: c.Store, Policy: policy, Heartbeat: cfg.HeartbeatInterval, Worker: r.Worker, Now: now, Logger: log,
		Kinds: r.Kinds, Crash: c.Crash, DeadlineMargin: cfg.DeadlineMargin, CancelNotice: cfg.CancelNotice,
	})
	kc := KindConfigs{
		Publish: publish.Config{
			Store: c.Store, Objects: c.Bucket, Tokens: r.Accounts, Provider: accounts.Provider,
			API:         breaker.GuardedAPI{API: r.API, Breaker: r.Breaker, HostKey: hostKey},
			CallTimeout: r.API.Timeout, Logger: log,
		},
		// The http kind's circuits are its users' own (breaker.Targets),
		// apart from the publishing API's; its jobs' headers are opened
		// here only.
		HTTP: httpkind.Config{
			Local: cfg.Env == job.Local, Breaker: r.Breaker.Targets(cfg.HTTPBreakersPerUser),
			MaxSnoozes: cfg.HTTPMaxSnoozes, MaxAge: cfg.HTTPMaxAge, TimeoutFloor: cfg.HTTPTimeoutFloor,
		},
	}
	if c.Sealer != nil {
		kc.HTTP.Opener, kc.HTTP.Sealer = c.Sealer, c.Sealer
	}
	for _, k := range append(Kinds(kc), c.Kinds...) {
		r.Kinds.MustRegister(k)
	}
	return r, nil
}

// oauthReady says whether a token can be refreshed now: while the OAuth
// client secret holds no credentials, the refresh is a snooze (no attempt
// spent) of wait, at least the shortest wait that parks a job in the table
// (retry.Policy.Park), so waiting costs no SQS receives and can never
// dead-letter the job. Its error code (secretref.CodeOAuthClientNotSet) is
// the reason the job waits, which the admin overview reports.
func oauthReady(c *secretref.OAuthClient, wait time.Duration, now func() time.Time) func(context.Context) error {
	return func(ctx context.Context) error {
		_, _, err := c.Get(ctx)
		var notSet *secretref.ClientNotSetError
		if errors.As(err, &notSet) {
			return retry.Snooze(err, now().Add(wait))
		}
		return err
	}
}

// APIHost is the external API's host, the key of its breaker.
func APIHost(baseURL string) string {
	if u, err := url.Parse(baseURL); err == nil && u.Host != "" {
		return u.Host
	}
	return baseURL
}
