// Package config reads Conveyor's configuration from the environment, once,
// with every default in one place. Functions in Lambda and the local runtime
// read the same variables; every timing is a Go duration so a test can run
// the whole life of a job in seconds.
package config

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/conveyor/conveyor/internal/resources"
)

// Defaults, named so code and README agree.
const (
	APIAddrDefault           = "127.0.0.1:8080"
	MaxAttemptsDefault       = 7
	RetryBaseDefault         = 2 * time.Second
	RetryMaxDefault          = 15 * time.Minute
	ParkAfterDefault         = time.Minute
	BreakerWindowDefault     = time.Minute
	BreakerThresholdDefault  = 5
	BreakerCooldownDefault   = 5 * time.Minute
	BreakerCacheDefault      = 5 * time.Second
	RecoveryIntervalDefault  = 5 * time.Minute
	ScheduleIntervalDefault  = time.Minute
	StuckAfterDefault        = 20 * time.Minute
	HeartbeatIntervalDefault = 30 * time.Second
	StaleAfterDefault        = resources.StaleAfterDefault
	DeleteAfterDefault       = resources.DeleteAfterDefault
	UploadExpiryDefault      = 5 * time.Minute
	MaxUploadSizeDefault     = 50 << 20
	DeviantArtURLDefault     = "https://www.deviantart.com"
)

// Config is the whole configuration of one process.
type Config struct {
	// Env is the environment (CONVEYOR_ENV). It has no default: a process
	// that does not say where it runs refuses to start, so a deployment
	// that forgot it never gets the local environment's leniency.
	Env resources.Env
	// Table is the DynamoDB table (CONVEYOR_TABLE).
	Table string
	// Bucket is the upload bucket (CONVEYOR_BUCKET).
	Bucket string
	// QueueURLs and DLQURLs per tier (CONVEYOR_QUEUE_URL_HIGH, CONVEYOR_DLQ_URL_HIGH, …).
	QueueURLs map[resources.Tier]string
	DLQURLs   map[resources.Tier]string
	// ESMUUIDs are the tiers' event source mappings, which pausing a tier
	// disables in AWS (CONVEYOR_ESM_UUID_HIGH, …).
	ESMUUIDs map[resources.Tier]string
	// KMSKeyID encrypts account tokens (CONVEYOR_KMS_KEY_ID; an alias works).
	KMSKeyID string
	// EventBus receives job events (CONVEYOR_EVENT_BUS).
	EventBus string
	// JWTSecret verifies bearer tokens, HS256 (CONVEYOR_JWT_SECRET).
	JWTSecret []byte
	// WebhookSecret signs webhook bodies (CONVEYOR_WEBHOOK_SECRET).
	WebhookSecret []byte
	// JWTSecretARN / WebhookSecretARN name Secrets Manager secrets to read
	// the two secrets from at cold start when the values are not set
	// (CONVEYOR_JWT_SECRET_ARN, CONVEYOR_WEBHOOK_SECRET_ARN: the CDK stacks).
	JWTSecretARN, WebhookSecretARN string
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
	// BreakerCache is how long an instance trusts its snapshot of the
	// breakers (CONVEYOR_BREAKER_CACHE, default 5s).
	BreakerCache time.Duration
	// RecoveryInterval / StuckAfter drive stuck-job recovery (default 5m / 20m).
	RecoveryInterval, StuckAfter time.Duration
	// ScheduleInterval is how often due scheduled jobs are released (default 1m).
	ScheduleInterval time.Duration
	// HeartbeatInterval is how often a running job's worker proves it lives (default 30s).
	HeartbeatInterval time.Duration
	// StaleAfter / DeleteAfter are the two retention stages (default 168h / 720h).
	StaleAfter, DeleteAfter time.Duration
	// StreamPing is the longest silence on an SSE stream (CONVEYOR_STREAM_PING, default 15s).
	StreamPing time.Duration
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
// (then Complete checks them once the secret was read).
func From(getenv func(string) string, fns ...string) (Config, error) {
	r := reader{get: getenv}
	c := Config{
		Table:                     getenv("CONVEYOR_TABLE"),
		Bucket:                    getenv("CONVEYOR_BUCKET"),
		KMSKeyID:                  getenv("CONVEYOR_KMS_KEY_ID"),
		EventBus:                  getenv("CONVEYOR_EVENT_BUS"),
		JWTSecret:                 []byte(getenv("CONVEYOR_JWT_SECRET")),
		WebhookSecret:             []byte(getenv("CONVEYOR_WEBHOOK_SECRET")),
		JWTSecretARN:              getenv("CONVEYOR_JWT_SECRET_ARN"),
		WebhookSecretARN:          getenv("CONVEYOR_WEBHOOK_SECRET_ARN"),
		DeviantArtURL:             r.str("CONVEYOR_DEVIANTART_URL", DeviantArtURLDefault),
		DeviantArtClientID:        getenv("CONVEYOR_DEVIANTART_CLIENT_ID"),
		DeviantArtClientSecret:    getenv("CONVEYOR_DEVIANTART_CLIENT_SECRET"),
		DeviantArtClientSecretARN: getenv("CONVEYOR_DEVIANTART_CLIENT_SECRET_ARN"),
		APIAddr:                   r.str("CONVEYOR_API_ADDR", APIAddrDefault),
		MaxAttempts:               r.int("CONVEYOR_MAX_ATTEMPTS", MaxAttemptsDefault),
		RetryBase:                 r.dur("CONVEYOR_RETRY_BASE", RetryBaseDefault),
		RetryMax:                  r.dur("CONVEYOR_RETRY_MAX", RetryMaxDefault),
		ParkAfter:                 r.dur("CONVEYOR_PARK_AFTER", ParkAfterDefault),
		BreakerWindow:             r.dur("CONVEYOR_BREAKER_WINDOW", BreakerWindowDefault),
		BreakerThreshold:          r.int("CONVEYOR_BREAKER_THRESHOLD", BreakerThresholdDefault),
		BreakerCooldown:           r.dur("CONVEYOR_BREAKER_COOLDOWN", BreakerCooldownDefault),
		BreakerCache:              r.dur("CONVEYOR_BREAKER_CACHE", BreakerCacheDefault),
		RecoveryInterval:          r.dur("CONVEYOR_RECOVERY_INTERVAL", RecoveryIntervalDefault),
		StuckAfter:                r.dur("CONVEYOR_STUCK_AFTER", StuckAfterDefault),
		ScheduleInterval:          r.dur("CONVEYOR_SCHEDULE_INTERVAL", ScheduleIntervalDefault),
		HeartbeatInterval:         r.dur("CONVEYOR_HEARTBEAT_INTERVAL", HeartbeatIntervalDefault),
		StaleAfter:                r.dur("CONVEYOR_STALE_AFTER", StaleAfterDefault),
		DeleteAfter:               r.dur("CONVEYOR_DELETE_AFTER", DeleteAfterDefault),
		StreamPing:                r.dur("CONVEYOR_STREAM_PING", 15*time.Second),
		UploadExpiry:              r.dur("CONVEYOR_UPLOAD_EXPIRY", UploadExpiryDefault),
		MaxUploadSize:             int64(r.int("CONVEYOR_MAX_UPLOAD_SIZE", MaxUploadSizeDefault)),
		ScheduleGroup:             getenv("CONVEYOR_SCHEDULE_GROUP"),
		ScheduleTargetARN:         getenv("CONVEYOR_SCHEDULE_TARGET_ARN"),
		ScheduleRoleARN:           getenv("CONVEYOR_SCHEDULE_ROLE_ARN"),
		QueueURLs:                 map[resources.Tier]string{},
		DLQURLs:                   map[resources.Tier]string{},
		ESMUUIDs:                  map[resources.Tier]string{},
	}
	if name := getenv("CONVEYOR_ENV"); name == "" {
		r.errs = append(r.errs, errors.New("CONVEYOR_ENV is not set: name the environment explicitly (local, staging, prod-ru or prod-en)"))
	} else if env, err := resources.ParseEnv(name); err != nil {
		r.errs = append(r.errs, fmt.Errorf("CONVEYOR_ENV: %w", err))
	} else {
		c.Env = env
	}
	for _, t := range resources.Tiers {
		up := strings.ToUpper(string(t))
		if v := getenv("CONVEYOR_QUEUE_URL_" + up); v != "" {
			c.QueueURLs[t] = v
		}
		if v := getenv("CONVEYOR_DLQ_URL_" + up); v != "" {
			c.DLQURLs[t] = v
		}
		if v := getenv("CONVEYOR_ESM_UUID_" + up); v != "" {
			c.ESMUUIDs[t] = v
		}
	}
	if err := c.validate(); err != nil {
		r.errs = append(r.errs, err)
	}
	if err := c.needs(fns, true); err != nil {
		r.errs = append(r.errs, err)
	}
	if len(r.errs) > 0 {
		return c, fmt.Errorf("configuration: %w", errors.Join(r.errs...))
	}
	return c, nil
}

// Complete reports, naming every gap and never a value, what the functions
// fns need that is still missing once the secrets named by ARN were read:
// a function that refreshes tokens needs both OAuth client credentials.
func (c Config) Complete(fns ...string) error {
	if err := c.needs(fns, false); err != nil {
		return fmt.Errorf("configuration: %w", err)
	}
	return nil
}

// needs checks what fns need; pending accepts an ARN still to be read in
// place of the values.
func (c Config) needs(fns []string, pending bool) error {
	var errs []error
	for _, fn := range fns {
		if !resources.NeedsOAuthClient(fn) {
			continue
		}
		if pending && c.DeviantArtClientSecretARN != "" {
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
			if c.DeviantArtClientSecretARN != "" {
				where = "the secret " + c.DeviantArtClientSecretARN + ` must hold {"clientId":"…","clientSecret":"…"}`
			}
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

func (c Config) validate() error {
	var errs []error
	if c.MaxAttempts < 1 {
		errs = append(errs, errors.New("CONVEYOR_MAX_ATTEMPTS must be at least 1"))
	}
	if c.ParkAfter <= 0 {
		errs = append(errs, errors.New("CONVEYOR_PARK_AFTER must be positive"))
	}
	if c.RetryBase <= 0 || c.RetryMax < c.RetryBase {
		errs = append(errs, errors.New("CONVEYOR_RETRY_BASE must be positive and not above CONVEYOR_RETRY_MAX"))
	}
	if c.BreakerThreshold < 1 {
		errs = append(errs, errors.New("CONVEYOR_BREAKER_THRESHOLD must be at least 1"))
	}
	if c.StaleAfter > resources.MaxStaleAfter {
		// The bucket lifecycle is derived from it (resources.UploadObjectHorizon).
		errs = append(errs, fmt.Errorf("CONVEYOR_STALE_AFTER must not exceed %s (the upload bucket's lifecycle allows for no more)", resources.MaxStaleAfter))
	}
	if c.DeleteAfter < c.StaleAfter {
		errs = append(errs, errors.New("CONVEYOR_DELETE_AFTER must not be before CONVEYOR_STALE_AFTER"))
	}
	if c.MaxUploadSize < 1 {
		errs = append(errs, errors.New("CONVEYOR_MAX_UPLOAD_SIZE must be positive"))
	}
	return errors.Join(errs...)
}

// Environ renders the resource part of the configuration as environment
// variables (the inverse of From), for the local runtime and tests.
func (c Config) Environ() map[string]string {
	m := map[string]string{
		"CONVEYOR_ENV":            string(c.Env),
		"CONVEYOR_TABLE":          c.Table,
		"CONVEYOR_BUCKET":         c.Bucket,
		"CONVEYOR_KMS_KEY_ID":     c.KMSKeyID,
		"CONVEYOR_EVENT_BUS":      c.EventBus,
		"CONVEYOR_API_ADDR":       c.APIAddr,
		"CONVEYOR_DEVIANTART_URL": c.DeviantArtURL,
	}
	for k, v := range map[string]string{"CONVEYOR_SCHEDULE_GROUP": c.ScheduleGroup,
		"CONVEYOR_SCHEDULE_TARGET_ARN": c.ScheduleTargetARN, "CONVEYOR_SCHEDULE_ROLE_ARN": c.ScheduleRoleARN} {
		if v != "" {
			m[k] = v
		}
	}
	for t, u := range c.QueueURLs {
		m["CONVEYOR_QUEUE_URL_"+strings.ToUpper(string(t))] = u
	}
	for t, u := range c.DLQURLs {
		m["CONVEYOR_DLQ_URL_"+strings.ToUpper(string(t))] = u
	}
	return m
}

type reader struct {
	get  func(string) string
	errs []error
}

func (r *reader) str(name, def string) string {
	if v := r.get(name); v != "" {
		return v
	}
	return def
}

func (r *reader) int(name string, def int) int {
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

func (r *reader) dur(name string, def time.Duration) time.Duration {
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
