// Package config reads Conveyor's configuration from the environment, once,
// with every default in one place. Functions in Lambda and the local runtime
// read the same variables; every timing is a Go duration so a test can run
// the whole life of a job in seconds.
package config

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/resources"
	"github.com/conveyor/conveyor/internal/retry"
)

// Config is the whole configuration of one process.
type Config struct {
	// Env is the environment (CONVEYOR_ENV). It has no default: a process
	// that does not say where it runs refuses to start, so a deployment
	// that forgot it never gets the local environment's leniency.
	Env job.Env
	// Table is the DynamoDB table (CONVEYOR_TABLE).
	Table string
	// TableIndexes says which of the table's indexes the readers query
	// (CONVEYOR_TABLE_INDEXES): TableIndexesCurrent, or TableIndexesRetired
	// while a migration adds the current ones (docs/migrations.md).
	TableIndexes string
	// JobItems is how the writers store a job (CONVEYOR_JOB_ITEMS):
	// JobItemsCompact, or JobItemsAttributes on the first deploy of the
	// change to compact items (docs/migrations.md).
	JobItems string
	// Bucket is the upload bucket (CONVEYOR_BUCKET).
	Bucket string
	// QueueURLs and DLQURLs per tier (CONVEYOR_QUEUE_URL_HIGH, CONVEYOR_DLQ_URL_HIGH, …).
	QueueURLs map[job.Tier]string
	DLQURLs   map[job.Tier]string
	// ESMUUIDs are the tiers' event source mappings, which pausing a tier
	// disables in AWS (CONVEYOR_ESM_UUID_HIGH, …).
	ESMUUIDs map[job.Tier]string
	// KMSKeyID encrypts account tokens (CONVEYOR_KMS_KEY_ID; an alias works).
	KMSKeyID string
	// EventBus receives job events (CONVEYOR_EVENT_BUS).
	EventBus string
	// JWTSecret verifies bearer tokens, HS256 (CONVEYOR_JWT_SECRET).
	JWTSecret []byte
	// JWTSecretARN names a Secrets Manager secret to read the JWT secret
	// from at cold start when the value is not set (CONVEYOR_JWT_SECRET_ARN:
	// the CDK stacks). Webhooks are signed with each user's own secret,
	// kept sealed in the table (internal/webhook), not with one of the
	// environment.
	JWTSecretARN string
	// OIDC, when Issuer is set, accepts the tokens of that OpenID Connect
	// issuer beside the HS256 ones (CONVEYOR_OIDC_*; see httpapi.OIDCConfig).
	OIDC OIDC
	// Tracing says where the functions' spans go (CONVEYOR_OTLP_ENDPOINT,
	// CONVEYOR_TRACE_SAMPLE_RATIO); with no endpoint, nowhere.
	Tracing Tracing
	// DeviantArtURL is the external API's base URL (CONVEYOR_DEVIANTART_URL,
	// default the real service; the local stack points it at the simulator).
	DeviantArtURL string
	// DeviantArtClientID / Secret identify Conveyor to the external API
	// (CONVEYOR_DEVIANTART_CLIENT_ID, CONVEYOR_DEVIANTART_CLIENT_SECRET).
	// The functions that refresh tokens (resources.OAuthClientFunctions)
	// refuse to start without both.
	DeviantArtClientID     string
	DeviantArtClientSecret string
	// DeviantArtClientSecretARN names a Secrets Manager secret holding
	// both, as {"clientId":"…","clientSecret":"…"}, read at cold start when
	// the two values are not set (CONVEYOR_DEVIANTART_CLIENT_SECRET_ARN:
	// the CDK stacks).
	DeviantArtClientSecretARN string
	// OAuthClientRecheck is how often a publisher re-reads the OAuth
	// client secret while it holds no credentials (a first deploy before
	// an operator filled it in); jobs that must refresh a token wait
	// meanwhile, spending no attempt (CONVEYOR_OAUTH_CLIENT_RECHECK,
	// default 1m).
	OAuthClientRecheck time.Duration
	// APIAddr is the local gateway's address (CONVEYOR_API_ADDR, default 127.0.0.1:8080).
	APIAddr string
	// MaxAttempts before a job fails (CONVEYOR_MAX_ATTEMPTS, default 7).
	MaxAttempts int
	// RetryBase / RetryMax bound the exponential backoff (default 2s / 15m).
	RetryBase, RetryMax time.Duration
	// ParkAfter is the shortest wait a job spends in the table instead of
	// the queue (CONVEYOR_PARK_AFTER, default 1m; see retry.Policy.Park).
	ParkAfter time.Duration
	// Breaker window, threshold and cooldown (default 1m / 5 / 5m).
	BreakerWindow    time.Duration
	BreakerThreshold int
	BreakerCooldown  time.Duration
	// BreakerHostOwners is the number of distinct owners whose failures
	// within the window open the host's circuit
	// (CONVEYOR_BREAKER_HOST_OWNERS, default breaker.HostOwnersDefault, 3).
	BreakerHostOwners int
	// BreakerProbeLease is how long a half-open probe holds its lease
	// (CONVEYOR_BREAKER_PROBE_LEASE, default 30s); its call ends at 4/5 of it.
	BreakerProbeLease time.Duration
	// CallTimeout bounds one external API call (CONVEYOR_CALL_TIMEOUT,
	// default 20s); it must be shorter than a probe's call
	// (breaker.ProbeCallTimeout of the lease), so no probe outlives its lease.
	CallTimeout time.Duration
	// UploadRateMin is the slowest upload a Submit waits for, bytes per
	// second (CONVEYOR_UPLOAD_RATE_MIN, default 1 MiB/s).
	UploadRateMin int64
	// BreakerCache is how long an instance trusts its snapshot of the
	// breakers (CONVEYOR_BREAKER_CACHE, default 5s).
	BreakerCache time.Duration
	// RecoveryInterval / StuckAfter drive stuck-job recovery (default 5m / 20m).
	RecoveryInterval, StuckAfter time.Duration
	// SweepBudget is how long one run of the sweeps may work (default 50s).
	SweepBudget time.Duration
	// BulkSyncMax is the most matching jobs a bulk call by filter acts on
	// inside its request (CONVEYOR_BULK_SYNC_MAX, default 100); BulkChunk
	// the most jobs an operation's worker acts on per invocation
	// (CONVEYOR_BULK_CHUNK, default 200); OperationQuietAfter how long a
	// running operation goes unwritten before recovery resumes it
	// (CONVEYOR_OPERATION_QUIET_AFTER, default 2m).
	BulkSyncMax, BulkChunk int
	OperationQuietAfter    time.Duration
	// ScheduleInterval is how often due scheduled jobs are released (default 1m).
	ScheduleInterval time.Duration
	// RetentionInterval is how often the retention sweeps run (stale
	// stage, upload expiry; default 1m).
	RetentionInterval time.Duration
	// HeartbeatInterval is how often a running job's worker proves it lives (default 30s).
	HeartbeatInterval time.Duration
	// DeadlineMargin is what the publisher leaves of each invocation to
	// record outcomes: no call starts that could end later than the
	// deadline less it (CONVEYOR_DEADLINE_MARGIN, default 10s).
	DeadlineMargin time.Duration
	// CancelNotice is the longest a cancel or a stop may go unnoticed by a
	// run's next call: a run that saw its job running under its own lease
	// less than this long ago makes the call without reading the job
	// first (CONVEYOR_CANCEL_NOTICE, default 2s; docs/leases.md).
	CancelNotice time.Duration
	// IdempotencyWindow is how long a creating POST's response is
	// replayed for its Idempotency-Key (CONVEYOR_IDEMPOTENCY_WINDOW,
	// default 24h).
	IdempotencyWindow time.Duration
	// StaleAfter / DeleteAfter are the two retention stages (default 168h / 720h).
	StaleAfter, DeleteAfter time.Duration
	// StreamPing is the longest silence on an SSE stream (CONVEYOR_STREAM_PING, default 15s).
	StreamPing time.Duration
	// StreamPoll is how often an SSE stream reads for news, one DynamoDB
	// read each (CONVEYOR_STREAM_POLL, default 1s).
	StreamPoll time.Duration
	// Fairness picks the message group of each job inside its tier: a few
	// slots per owner (CONVEYOR_FAIR_SLOTS per plan, CONVEYOR_OWNER_SLOTS
	// per named owner).
	Fairness Fairness
	// RateLimits is each owner's request rate on the API function's
	// routes (CONVEYOR_RATE_LIMITS per plan, CONVEYOR_OWNER_RATE_LIMITS
	// per named owner; docs/limits.md).
	RateLimits RateLimits
	// Quotas is each owner's quotas (active jobs), by plan and for named
	// owners.
	Quotas Quotas
	// OwnerQueueDepth is the most jobs of one owner a tier's queue holds
	// (CONVEYOR_OWNER_QUEUE_DEPTH, default 1000; 0: no bound).
	OwnerQueueDepth int
	// BusEvents is which job events the relay puts on the event bus
	// (CONVEYOR_BUS_EVENTS, default lifecycle: job.progress and
	// job.phase.completed stay in the table, the event log and SSE).
	BusEvents job.BusEvents
	// StreamMaxPerUser caps a user's open SSE streams across every
	// instance (CONVEYOR_STREAM_MAX_PER_USER, default 5).
	StreamMaxPerUser int
	// StreamLifetime is the longest an SSE stream runs before it ends
	// cleanly for its client to resume (CONVEYOR_STREAM_LIFETIME, default
	// 1m).
	StreamLifetime time.Duration
	// WebhookSecretOverlap is how long a user's rotated-out webhook secret
	// keeps signing beside the new one (CONVEYOR_WEBHOOK_SECRET_OVERLAP,
	// default 24h).
	WebhookSecretOverlap time.Duration
	// WebhookTimeout is the longest a webhook delivery attempt waits for
	// its receiver (CONVEYOR_WEBHOOK_TIMEOUT, default 10s). The owner's
	// webhook slots are Fairness.Webhooks (CONVEYOR_WEBHOOK_SLOTS).
	WebhookTimeout time.Duration
	// WebhookCircuitFailures consecutive failed deliveries open an
	// endpoint's circuit for WebhookCircuitCooldown, doubling to
	// WebhookCircuitMax; an endpoint failing for longer than
	// WebhookDisableAfter is disabled (CONVEYOR_WEBHOOK_CIRCUIT_*,
	// CONVEYOR_WEBHOOK_DISABLE_AFTER; default 5, 1m, 1h, 120h).
	WebhookCircuitFailures int
	WebhookCircuitCooldown time.Duration
	WebhookCircuitMax      time.Duration
	WebhookDisableAfter    time.Duration
	// WebhookRetryBase, WebhookRetryMax and WebhookMaxAttempts space a
	// delivery's attempts and bound them (CONVEYOR_WEBHOOK_RETRY_BASE /
	// _RETRY_MAX / _MAX_ATTEMPTS, default 30s / 6h / 15: about a day).
	WebhookRetryBase   time.Duration
	WebhookRetryMax    time.Duration
	WebhookMaxAttempts int
	// UploadExpiry is how long a presigned upload URL is valid (default 5m).
	UploadExpiry time.Duration
	// MaxUploadSize is the largest upload accepted, in bytes (CONVEYOR_MAX_UPLOAD_SIZE, default 50 MiB).
	MaxUploadSize int64
	// ScheduleGroup is the EventBridge Scheduler group of the users'
	// recurring schedules (CONVEYOR_SCHEDULE_GROUP); ScheduleTargetARN the
	// function their ticks invoke (CONVEYOR_SCHEDULE_TARGET_ARN, the
	// recovery function) and ScheduleRoleARN the role Scheduler assumes to
	// invoke it (CONVEYOR_SCHEDULE_ROLE_ARN). Without the group, schedules
	// are kept but nothing fires them but the local runtime.
	ScheduleGroup, ScheduleTargetARN, ScheduleRoleARN string
	// HTTPMaxSnoozes, HTTPMaxAge, HTTPTimeoutFloor and HTTPBreakersPerUser
	// are the http kind's limits (CONVEYOR_HTTP_*, default 30 / 24h / 2s /
	// 20; see docs/http-kind.md).
	HTTPMaxSnoozes      int
	HTTPMaxAge          time.Duration
	HTTPTimeoutFloor    time.Duration
	HTTPBreakersPerUser int
}

// OIDC configures an OpenID Connect issuer (httpapi.OIDCConfig).
type OIDC struct {
	// Issuer is the issuer, exactly as its tokens' iss say it
	// (CONVEYOR_OIDC_ISSUER; empty: HS256 tokens only).
	Issuer string
	// Audiences are the accepted aud values (CONVEYOR_OIDC_AUDIENCE,
	// comma-separated; required with an issuer).
	Audiences []string
	// RoleClaim and PlanClaim name the claims read for the role and plan
	// (CONVEYOR_OIDC_ROLE_CLAIM, default "role"; CONVEYOR_OIDC_PLAN_CLAIM,
	// default "plan").
	RoleClaim, PlanClaim string
	// JWKSURL is the key set's URL (CONVEYOR_OIDC_JWKS_URL; empty: from
	// the issuer's discovery document).
	JWKSURL string
	// JWKSTTL is how long a fetched key set is trusted
	// (CONVEYOR_OIDC_JWKS_TTL, default 1h); JWKSMinRefresh the least time
	// between two fetches (CONVEYOR_OIDC_JWKS_MIN_REFRESH, default 1m).
	JWKSTTL, JWKSMinRefresh time.Duration
}

// FromEnv reads and validates the configuration of a process that runs
// the functions fns (see From).
func FromEnv(fns ...string) (Config, error) { return From(os.Getenv, fns...) }

// From reads the configuration through getenv (tests pass a map's lookup)
// and validates it for a process that runs the functions fns
// (resources.Func…; the local stack names them all). It fails, naming
// every problem and never a secret's value, when CONVEYOR_ENV is not set
// to a known environment, when a value is malformed, or when one of fns
// lacks what it needs: the OAuth client credentials for the functions
// that refresh tokens, as values or as CONVEYOR_DEVIANTART_CLIENT_SECRET_ARN
// (a secret read when first needed: until it holds credentials, jobs wait).
func From(getenv func(string) string, fns ...string) (Config, error) {
	// Each reader appends the malformed values it finds to r.errs: the
	// order of the calls is the order of the problems reported.
	r := reader{get: getenv}
	var c Config
	r.names(&c)
	r.oauthClient(&c)
	r.retries(&c)
	r.sweeps(&c)
	r.delivery(&c)
	r.uploads(&c)
	c.OIDC = r.oidc()
	c.Tracing = r.tracing()
	r.httpKind(&c)
	c.Env = r.env()
	if err := c.validate(getenv(VarCallTimeout) != "" || getenv(VarBreakerProbeLease) != ""); err != nil {
		r.errs = append(r.errs, err)
	}
	if err := c.needs(fns); err != nil {
		r.errs = append(r.errs, err)
	}
	if len(r.errs) > 0 {
		return c, fmt.Errorf("configuration: %w", errors.Join(r.errs...))
	}
	return c, nil
}

// names reads the names of what the process works with: the table,
// bucket, key, bus, JWT secret, the tiers' queues, the local gateway's
// address and the schedules' group.
func (r *reader) names(c *Config) {
	c.Table = r.get(VarTable)
	c.TableIndexes = r.str(VarTableIndexes)
	c.JobItems = r.str(VarJobItems)
	c.Bucket = r.get(VarBucket)
	c.KMSKeyID = r.get(VarKMSKeyID)
	c.EventBus = r.get(VarEventBus)
	c.JWTSecret = []byte(r.get(VarJWTSecret))
	c.JWTSecretARN = r.get(VarJWTSecretARN)
	c.APIAddr = r.str(VarAPIAddr)
	c.ScheduleGroup = r.get(VarScheduleGroup)
	c.ScheduleTargetARN = r.get(VarScheduleTargetARN)
	c.ScheduleRoleARN = r.get(VarScheduleRoleARN)
	c.QueueURLs = map[job.Tier]string{}
	c.DLQURLs = map[job.Tier]string{}
	c.ESMUUIDs = map[job.Tier]string{}
	for _, t := range job.Tiers {
		if v := r.get(VarQueueURL(t)); v != "" {
			c.QueueURLs[t] = v
		}
		if v := r.get(VarDLQURL(t)); v != "" {
			c.DLQURLs[t] = v
		}
		if v := r.get(VarESMUUID(t)); v != "" {
			c.ESMUUIDs[t] = v
		}
	}
}

// oauthClient reads the external API's address and OAuth client
// credentials, and how often a missing secret is re-read.
func (r *reader) oauthClient(c *Config) {
	c.DeviantArtURL = r.str(VarDeviantArtURL)
	c.DeviantArtClientID = r.get(VarDeviantArtClientID)
	c.DeviantArtClientSecret = r.get(VarDeviantArtClientSecret)
	c.DeviantArtClientSecretARN = r.get(VarDeviantArtClientSecretARN)
	c.OAuthClientRecheck = r.dur(VarOAuthClientRecheck)
}

// retries reads how a failing call is retried and bounded: attempts,
// backoff, parking, the breakers and the calls' timeouts.
func (r *reader) retries(c *Config) {
	c.MaxAttempts = r.int(VarMaxAttempts)
	c.RetryBase = r.dur(VarRetryBase)
	c.RetryMax = r.dur(VarRetryMax)
	c.ParkAfter = r.dur(VarParkAfter)
	c.BreakerWindow = r.dur(VarBreakerWindow)
	c.BreakerThreshold = r.int(VarBreakerThreshold)
	c.BreakerHostOwners = r.int(VarBreakerHostOwners)
	c.BreakerCooldown = r.dur(VarBreakerCooldown)
	c.BreakerProbeLease = r.dur(VarBreakerProbeLease)
	c.BreakerCache = r.dur(VarBreakerCache)
	c.CallTimeout = r.dur(VarCallTimeout)
	c.UploadRateMin = r.int64(VarUploadRateMin)
	if r.get(VarBreakerProbeLease) == "" && c.BreakerCooldown > 0 {
		// A cooldown shorter than the lease (tests, chaos) shortens it.
		c.BreakerProbeLease = min(c.BreakerProbeLease, c.BreakerCooldown)
	}
}

// sweeps reads the timings of the background work: recovery, schedules,
// retention, heartbeats, a run's deadline margin and cancel notice, and
// the idempotency window.
func (r *reader) sweeps(c *Config) {
	c.RecoveryInterval = r.dur(VarRecoveryInterval)
	c.StuckAfter = r.dur(VarStuckAfter)
	c.SweepBudget = r.dur(VarSweepBudget)
	c.BulkSyncMax = r.int(VarBulkSyncMax)
	c.BulkChunk = r.int(VarBulkChunk)
	c.OperationQuietAfter = r.dur(VarOperationQuietAfter)
	c.ScheduleInterval = r.dur(VarScheduleInterval)
	c.RetentionInterval = r.dur(VarRetentionInterval)
	c.HeartbeatInterval = r.dur(VarHeartbeatInterval)
	c.DeadlineMargin = r.dur(VarDeadlineMargin)
	c.CancelNotice = r.dur(VarCancelNotice)
	c.IdempotencyWindow = r.dur(VarIdempotencyWindow)
	c.StaleAfter = r.dur(VarStaleAfter)
	c.DeleteAfter = r.dur(VarDeleteAfter)
}

// delivery reads how jobs and their events reach their consumers: the SSE
// streams, the queues' fairness, the bus's events and the webhook
// secrets' overlap.
func (r *reader) delivery(c *Config) {
	c.StreamPing = r.dur(VarStreamPing)
	c.StreamPoll = r.dur(VarStreamPoll)
	c.StreamMaxPerUser = r.int(VarStreamMaxPerUser)
	c.StreamLifetime = r.dur(VarStreamLifetime)
	c.Fairness = Fairness{PerPlan: r.slots(VarFairSlots), PerOwner: r.slots(VarOwnerSlots), Webhooks: r.int(VarWebhookSlots)}
	c.RateLimits = RateLimits{PerPlan: r.rates(VarRateLimits), PerOwner: r.rates(VarOwnerRateLimits)}
	c.OwnerQueueDepth = r.int(VarOwnerQueueDepth)
	c.Quotas = Quotas{ActiveJobs: r.quotas(VarActiveJobQuotas), OwnerActiveJobs: r.quotas(VarOwnerActiveJobQuotas)}
	c.BusEvents = r.busEvents(VarBusEvents)
	c.WebhookSecretOverlap = r.dur(VarWebhookSecretOverlap)
	c.WebhookTimeout = r.dur(VarWebhookTimeout)
	c.WebhookRetryBase, c.WebhookRetryMax, c.WebhookMaxAttempts = r.dur(VarWebhookRetryBase), r.dur(VarWebhookRetryMax), r.int(VarWebhookMaxAttempts)
	c.WebhookCircuitFailures, c.WebhookCircuitCooldown = r.int(VarWebhookCircuitFailures), r.dur(VarWebhookCircuitCooldown)
	c.WebhookCircuitMax, c.WebhookDisableAfter = r.dur(VarWebhookCircuitMax), r.dur(VarWebhookDisableAfter)
}

// uploads reads the presigned URLs' lifetime and the largest upload.
func (r *reader) uploads(c *Config) {
	c.UploadExpiry = r.dur(VarUploadExpiry)
	c.MaxUploadSize = r.int64(VarMaxUploadSize)
}

// oidc reads the OpenID Connect issuer whose tokens are accepted.
func (r *reader) oidc() OIDC {
	return OIDC{
		Issuer: r.get(VarOIDCIssuer), Audiences: list(r.get(VarOIDCAudience)),
		RoleClaim: r.str(VarOIDCRoleClaim), PlanClaim: r.str(VarOIDCPlanClaim), JWKSURL: r.get(VarOIDCJWKSURL),
		JWKSTTL: r.dur(VarOIDCJWKSTTL), JWKSMinRefresh: r.dur(VarOIDCJWKSMinRefresh),
	}
}

// Tracing is where spans go and how many traces are kept.
type Tracing struct {
	// Endpoint is the OTLP/HTTP collector's base URL; empty: tracing off.
	Endpoint string
	// SampleRatio is the share of new traces recorded (default 1).
	SampleRatio float64
}

// tracing reads the collector's address and the sampling ratio.
func (r *reader) tracing() Tracing {
	t := Tracing{Endpoint: r.get(VarOTLPEndpoint)}
	if t.Endpoint != "" {
		if err := httpsURL(t.Endpoint); err != nil {
			r.errs = append(r.errs, fmt.Errorf("%s: %w", VarOTLPEndpoint, err))
		}
	}
	v := r.str(VarTraceSampleRatio)
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f < 0 || f > 1 {
		r.errs = append(r.errs, fmt.Errorf("%s=%q is not a ratio between 0 and 1", VarTraceSampleRatio, v))
		f = 1
	}
	t.SampleRatio = f
	return t
}

// httpKind reads the http kind's limits.
func (r *reader) httpKind(c *Config) {
	c.HTTPMaxSnoozes = r.int(VarHTTPMaxSnoozes)
	c.HTTPMaxAge = r.dur(VarHTTPMaxAge)
	c.HTTPTimeoutFloor = r.dur(VarHTTPTimeoutFloor)
	c.HTTPBreakersPerUser = r.int(VarHTTPBreakersPerUser)
}

// env reads CONVEYOR_ENV, which has no default: unset or unknown, it is an
// error and the environment is empty.
func (r *reader) env() job.Env {
	name := r.get(VarEnv)
	if name == "" {
		r.errs = append(r.errs, errors.New("CONVEYOR_ENV is not set: name the environment explicitly (local, staging, prod-ru or prod-en)"))
		return ""
	}
	env, err := job.ParseEnv(name)
	if err != nil {
		r.errs = append(r.errs, fmt.Errorf("CONVEYOR_ENV: %w", err))
		return ""
	}
	return env
}

// Complete reports, naming every gap and never a value, what the functions
// fns need that is still missing once the secrets named by ARN were read:
// a function that refreshes tokens needs both OAuth client credentials,
// or the ARN of the secret it reads them from when needed.
func (c Config) Complete(fns ...string) error {
	if err := c.needs(fns); err != nil {
		return fmt.Errorf("configuration: %w", err)
	}
	return nil
}

// needs checks what fns need; an ARN to read the credentials from takes
// the place of the values.
func (c Config) needs(fns []string) error {
	var errs []error
	for _, fn := range fns {
		if !resources.NeedsOAuthClient(fn) {
			continue
		}
		if c.DeviantArtClientSecretARN != "" {
			// Read when a token first needs refreshing, and re-read
			// (OAuthClientRecheck) while it holds no credentials: jobs
			// wait meanwhile, none is failed or dead-lettered.
			break
		}
		var missing []string
		if c.DeviantArtClientID == "" {
			missing = append(missing, "CONVEYOR_DEVIANTART_CLIENT_ID")
		}
		if c.DeviantArtClientSecret == "" {
			missing = append(missing, "CONVEYOR_DEVIANTART_CLIENT_SECRET")
		}
		if len(missing) > 0 {
			where := "set both, or CONVEYOR_DEVIANTART_CLIENT_SECRET_ARN"
			errs = append(errs, fmt.Errorf("the %s function refreshes tokens and needs the OAuth client credentials, but %s %s empty (%s)",
				fn, strings.Join(missing, " and "), isAre(len(missing)), where))
		}
		break // one message for the credentials, however many functions need them
	}
	return errors.Join(errs...)
}

func isAre(n int) string {
	if n == 1 {
		return "is"
	}
	return "are"
}

// validate checks c; deadlines says the call timeout or the probe lease
// was set explicitly, so their relation is checked too. (With both
// defaulted, only a cooldown shorter than 30 s makes the lease shorter
// than the call timeout, and breaker.Do cuts a probe's call at 4/5 of the
// lease anyway.)
func (c Config) validate(deadlines bool) error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if c.MaxAttempts < 1 {
		bad("%s must be at least 1", VarMaxAttempts)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{VarParkAfter, c.ParkAfter}, {VarBreakerWindow, c.BreakerWindow}, {VarBreakerCooldown, c.BreakerCooldown},
		{VarBreakerProbeLease, c.BreakerProbeLease}, {VarCallTimeout, c.CallTimeout}, {VarRecoveryInterval, c.RecoveryInterval},
		{VarScheduleInterval, c.ScheduleInterval}, {VarRetentionInterval, c.RetentionInterval}, {VarStuckAfter, c.StuckAfter}, {VarSweepBudget, c.SweepBudget}, {VarOperationQuietAfter, c.OperationQuietAfter}, {VarHeartbeatInterval, c.HeartbeatInterval},
		{VarStreamPing, c.StreamPing}, {VarUploadExpiry, c.UploadExpiry}, {VarOAuthClientRecheck, c.OAuthClientRecheck},
		{VarHTTPMaxAge, c.HTTPMaxAge}, {VarHTTPTimeoutFloor, c.HTTPTimeoutFloor}, {VarDeadlineMargin, c.DeadlineMargin},
		{VarCancelNotice, c.CancelNotice}, {VarIdempotencyWindow, c.IdempotencyWindow},
	} {
		if d.v <= 0 {
			bad("%s must be positive, got %s", d.name, d.v)
		}
	}
	if c.BreakerCache < 0 {
		bad("%s must not be negative, got %s", VarBreakerCache, c.BreakerCache)
	}
	if c.RetryBase <= 0 || c.RetryMax < c.RetryBase {
		bad("%s must be positive and not above %s", VarRetryBase, VarRetryMax)
	}
	if c.RetryMax > retry.MaxVisibility {
		bad("%s must not exceed %s, the longest SQS visibility timeout", VarRetryMax, retry.MaxVisibility)
	}
	if c.BreakerThreshold < 1 {
		bad("%s must be at least 1", VarBreakerThreshold)
	}
	if c.BreakerHostOwners < 2 {
		bad("%s must be at least 2: one owner must never open the host's circuit", VarBreakerHostOwners)
	}
	if c.HTTPMaxSnoozes < 1 {
		bad("%s must be at least 1", VarHTTPMaxSnoozes)
	}
	if c.HTTPBreakersPerUser < 1 {
		bad("%s must be at least 1", VarHTTPBreakersPerUser)
	}
	if probe := probeCallTimeout(c.BreakerProbeLease); deadlines && c.CallTimeout > 0 && c.BreakerProbeLease > 0 && c.CallTimeout > probe {
		bad("%s (%s) must be shorter than the breaker's probe lease: at most %s, the 4/5 of %s (%s) a half-open probe's call may take, so that no probe outlives its lease and lets a second one through",
			VarCallTimeout, c.CallTimeout, probe, VarBreakerProbeLease, c.BreakerProbeLease)
	}
	if c.UploadRateMin < 1 {
		bad("%s must be at least 1 (bytes per second)", VarUploadRateMin)
	}
	if c.StaleAfter > resources.MaxStaleAfter {
		// The bucket lifecycle is derived from it (resources.UploadObjectHorizon).
		bad("%s must not exceed %s (the upload bucket's lifecycle allows for no more)", VarStaleAfter, resources.MaxStaleAfter)
	}
	if c.DeleteAfter < c.StaleAfter {
		bad("%s must not be before %s", VarDeleteAfter, VarStaleAfter)
	}
	if c.UploadExpiry > maxPresignExpiry {
		bad("%s must not exceed %s (the longest a SigV4 presigned URL may live)", VarUploadExpiry, maxPresignExpiry)
	}
	if c.StreamPoll <= 0 || c.StreamPoll > time.Second {
		bad("%s must be positive and at most 1s (a transition reaches a stream within it)", VarStreamPoll)
	}
	if c.TableIndexes != TableIndexesCurrent && c.TableIndexes != TableIndexesRetired {
		bad("%s must be %s or %s, got %q", VarTableIndexes, TableIndexesCurrent, TableIndexesRetired, c.TableIndexes)
	}
	if c.JobItems != JobItemsCompact && c.JobItems != JobItemsAttributes {
		bad("%s must be %s or %s, got %q", VarJobItems, JobItemsCompact, JobItemsAttributes, c.JobItems)
	}
	if c.OwnerQueueDepth < 0 || c.OwnerQueueDepth > 100000 {
		bad("%s must be between 0 and 100000", VarOwnerQueueDepth)
	}
	if c.StreamLifetime <= 0 {
		bad("%s must be positive", VarStreamLifetime)
	}
	if c.StreamMaxPerUser < 1 {
		bad("%s must be at least 1", VarStreamMaxPerUser)
	}
	if c.WebhookSecretOverlap < time.Minute {
		bad("%s must be at least 1m (functions cache a user's keys that long)", VarWebhookSecretOverlap)
	}
	if c.MaxUploadSize < 1 {
		bad("%s must be positive", VarMaxUploadSize)
	}
	if c.BulkSyncMax < 1 || c.BulkSyncMax > 100 {
		bad("%s must be between 1 and 100, got %d", VarBulkSyncMax, c.BulkSyncMax)
	}
	if c.BulkChunk < 1 || c.BulkChunk > 200 {
		bad("%s must be between 1 and 200, got %d", VarBulkChunk, c.BulkChunk)
	}
	if _, ok := c.RateLimits.PerPlan["free"]; !ok {
		bad("%s must give the free plan a rate (a token of an unknown plan gets it)", VarRateLimits)
	}
	if _, ok := c.Quotas.ActiveJobs["free"]; !ok {
		bad("%s must give the free plan a quota (a token of an unknown plan gets it)", VarActiveJobQuotas)
	}
	if c.Fairness.Webhooks < 0 || c.Fairness.Webhooks > 1000 {
		bad("%s must be between 0 and 1000, got %d", VarWebhookSlots, c.Fairness.Webhooks)
	}
	if c.WebhookRetryBase <= 0 || c.WebhookRetryMax < c.WebhookRetryBase || c.WebhookRetryMax > 12*time.Hour || c.WebhookMaxAttempts < 1 {
		bad("%s must be positive and at most %s, %s at most 12h, %s at least 1", VarWebhookRetryBase, VarWebhookRetryMax, VarWebhookRetryMax, VarWebhookMaxAttempts)
	}
	if c.WebhookCircuitFailures < 1 || c.WebhookCircuitCooldown <= 0 || c.WebhookCircuitMax < c.WebhookCircuitCooldown || c.WebhookDisableAfter <= 0 {
		bad("%s must be at least 1, %s positive, %s not below it and %s positive", VarWebhookCircuitFailures, VarWebhookCircuitCooldown, VarWebhookCircuitMax, VarWebhookDisableAfter)
	}
	if c.WebhookTimeout <= 0 || c.WebhookTimeout > 30*time.Second {
		bad("%s must be positive and at most 30s (an attempt must end well inside the system function's invocation), got %s", VarWebhookTimeout, c.WebhookTimeout)
	}
	errs = append(errs, c.OIDC.validate()...)
	if u, err := url.Parse(c.DeviantArtURL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		bad("%s=%q is not an absolute http(s) URL", VarDeviantArtURL, c.DeviantArtURL)
	}
	return errors.Join(errs...)
}

// validate checks the OIDC settings; with no issuer, only that none of
// the issuer's settings is set alone.
func (o OIDC) validate() []error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if o.Issuer == "" {
		if len(o.Audiences) > 0 || o.JWKSURL != "" {
			bad("%s and %s need %s: name the issuer whose tokens to accept", VarOIDCAudience, VarOIDCJWKSURL, VarOIDCIssuer)
		}
		return errs
	}
	if err := httpsURL(o.Issuer); err != nil {
		bad("%s: %v", VarOIDCIssuer, err)
	}
	if o.JWKSURL != "" {
		if err := httpsURL(o.JWKSURL); err != nil {
			bad("%s: %v", VarOIDCJWKSURL, err)
		}
	}
	if len(o.Audiences) == 0 {
		bad("%s is required with %s: the audience (aud) the issuer's tokens name for this API, e.g. the app client id", VarOIDCAudience, VarOIDCIssuer)
	}
	if o.RoleClaim == "" || o.PlanClaim == "" {
		bad("%s and %s must not be empty", VarOIDCRoleClaim, VarOIDCPlanClaim)
	}
	if o.JWKSTTL <= 0 || o.JWKSMinRefresh <= 0 || o.JWKSMinRefresh > o.JWKSTTL {
		bad("%s and %s must be positive, the second not above the first", VarOIDCJWKSTTL, VarOIDCJWKSMinRefresh)
	}
	return errs
}

// httpsURL accepts an absolute https URL, or http on a loopback host.
func httpsURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
		return fmt.Errorf("%q is not an absolute https URL", raw)
	}
	if u.Scheme == "http" {
		if h := u.Hostname(); h != "localhost" && h != "127.0.0.1" && h != "::1" {
			return fmt.Errorf("%q must be https (http only on a loopback host)", raw)
		}
	}
	return nil
}

// list splits a comma-separated value, dropping empty parts.
func list(v string) []string {
	var out []string
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// maxPresignExpiry is SigV4's limit on X-Amz-Expires (7 days).
const maxPresignExpiry = 7 * 24 * time.Hour

// Values of CONVEYOR_TABLE_INDEXES.
const (
	TableIndexesCurrent = "current"
	TableIndexesRetired = "retired"
)

// Values of CONVEYOR_JOB_ITEMS.
const (
	JobItemsCompact    = "compact"
	JobItemsAttributes = "attributes"
)

// Environ renders the resource part of the configuration as environment
// variables (the inverse of From), for the local runtime and tests.
func (c Config) Environ() map[string]string {
	m := map[string]string{
		VarEnv:           string(c.Env),
		VarTable:         c.Table,
		VarTableIndexes:  c.TableIndexes,
		VarJobItems:      c.JobItems,
		VarBucket:        c.Bucket,
		VarKMSKeyID:      c.KMSKeyID,
		VarEventBus:      c.EventBus,
		VarAPIAddr:       c.APIAddr,
		VarDeviantArtURL: c.DeviantArtURL,
	}
	for k, v := range map[string]string{"CONVEYOR_SCHEDULE_GROUP": c.ScheduleGroup,
		"CONVEYOR_SCHEDULE_TARGET_ARN": c.ScheduleTargetARN, "CONVEYOR_SCHEDULE_ROLE_ARN": c.ScheduleRoleARN} {
		if v != "" {
			m[k] = v
		}
	}
	for t, u := range c.QueueURLs {
		m[VarQueueURL(t)] = u
	}
	for t, u := range c.DLQURLs {
		m[VarDLQURL(t)] = u
	}
	return m
}

type reader struct {
	get  func(string) string
	errs []error
}

func (r *reader) str(name string) string {
	if v := r.get(name); v != "" {
		return v
	}
	return defaultOf[string](name)
}

// busEvents reads a job.BusEvents.
func (r *reader) busEvents(name string) job.BusEvents {
	b, err := job.ParseBusEvents(r.str(name))
	if err != nil {
		r.errs = append(r.errs, fmt.Errorf("%s: %w", name, err))
	}
	return b
}

// rates reads a "name=rate/burst,…" list (ParseRates).
func (r *reader) rates(name string) map[string]Rate {
	m, err := ParseRates(r.str(name))
	if err != nil {
		r.errs = append(r.errs, fmt.Errorf("%s: %w", name, err))
		return map[string]Rate{}
	}
	return m
}

// quotas reads a "name=n,…" list of quotas (ParseQuotas).
func (r *reader) quotas(name string) map[string]int {
	m, err := ParseQuotas(r.str(name))
	if err != nil {
		r.errs = append(r.errs, fmt.Errorf("%s: %w", name, err))
		return map[string]int{}
	}
	return m
}

// slots reads a "name=n,…" list (ParseSlots).
func (r *reader) slots(name string) map[string]int {
	m, err := ParseSlots(r.str(name))
	if err != nil {
		r.errs = append(r.errs, fmt.Errorf("%s: %w", name, err))
		return map[string]int{}
	}
	return m
}

func (r *reader) int(name string) int {
	def := defaultOf[int](name)
	v := r.get(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		r.errs = append(r.errs, fmt.Errorf("%s=%q is not an integer", name, v))
		return def
	}
	return n
}

func (r *reader) int64(name string) int64 {
	def := defaultOf[int64](name)
	v := r.get(name)
	if v == "" {
		return def
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		r.errs = append(r.errs, fmt.Errorf("%s=%q is not an integer", name, v))
		return def
	}
	return n
}

func (r *reader) dur(name string) time.Duration {
	def := defaultOf[time.Duration](name)
	v := r.get(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		r.errs = append(r.errs, fmt.Errorf("%s=%q is not a Go duration (like 30s or 5m)", name, v))
		return def
	}
	return d
}
