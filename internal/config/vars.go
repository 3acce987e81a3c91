package config

import (
	"fmt"
	"strings"
	"time"

	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/resources"
)

// The variables' names. From reads them; the local stack
// (localstack/stack) and the CDK stacks (infra/stack) set them by these
// names, so a rename cannot leave one of the three behind.
const (
	VarEnv                       = "CONVEYOR_ENV"
	VarTable                     = "CONVEYOR_TABLE"
	VarTableIndexes              = "CONVEYOR_TABLE_INDEXES"
	VarJobItems                  = "CONVEYOR_JOB_ITEMS"
	VarBucket                    = "CONVEYOR_BUCKET"
	VarKMSKeyID                  = "CONVEYOR_KMS_KEY_ID"
	VarEventBus                  = "CONVEYOR_EVENT_BUS"
	VarJWTSecret                 = "CONVEYOR_JWT_SECRET"
	VarJWTSecretARN              = "CONVEYOR_JWT_SECRET_ARN"
	VarDeviantArtURL             = "CONVEYOR_DEVIANTART_URL"
	VarDeviantArtClientID        = "CONVEYOR_DEVIANTART_CLIENT_ID"
	VarDeviantArtClientSecret    = "CONVEYOR_DEVIANTART_CLIENT_SECRET"
	VarDeviantArtClientSecretARN = "CONVEYOR_DEVIANTART_CLIENT_SECRET_ARN"
	VarAPIAddr                   = "CONVEYOR_API_ADDR"
	VarMaxAttempts               = "CONVEYOR_MAX_ATTEMPTS"
	VarRetryBase                 = "CONVEYOR_RETRY_BASE"
	VarRetryMax                  = "CONVEYOR_RETRY_MAX"
	VarParkAfter                 = "CONVEYOR_PARK_AFTER"
	VarFairSlots                 = "CONVEYOR_FAIR_SLOTS"
	VarOwnerSlots                = "CONVEYOR_OWNER_SLOTS"
	VarRateLimits                = "CONVEYOR_RATE_LIMITS"
	VarOwnerRateLimits           = "CONVEYOR_OWNER_RATE_LIMITS"
	VarOwnerQueueDepth           = "CONVEYOR_OWNER_QUEUE_DEPTH"
	VarActiveJobQuotas           = "CONVEYOR_ACTIVE_JOB_QUOTAS"
	VarOwnerActiveJobQuotas      = "CONVEYOR_OWNER_ACTIVE_JOB_QUOTAS"
	VarBusEvents                 = "CONVEYOR_BUS_EVENTS"
	VarBreakerWindow             = "CONVEYOR_BREAKER_WINDOW"
	VarBreakerThreshold          = "CONVEYOR_BREAKER_THRESHOLD"
	VarBreakerHostOwners         = "CONVEYOR_BREAKER_HOST_OWNERS"
	VarBreakerCooldown           = "CONVEYOR_BREAKER_COOLDOWN"
	VarBreakerProbeLease         = "CONVEYOR_BREAKER_PROBE_LEASE"
	VarBreakerCache              = "CONVEYOR_BREAKER_CACHE"
	VarCallTimeout               = "CONVEYOR_CALL_TIMEOUT"
	VarUploadRateMin             = "CONVEYOR_UPLOAD_RATE_MIN"
	VarRecoveryInterval          = "CONVEYOR_RECOVERY_INTERVAL"
	VarScheduleInterval          = "CONVEYOR_SCHEDULE_INTERVAL"
	VarRetentionInterval         = "CONVEYOR_RETENTION_INTERVAL"
	VarStuckAfter                = "CONVEYOR_STUCK_AFTER"
	VarSweepBudget               = "CONVEYOR_SWEEP_BUDGET"
	VarBulkSyncMax               = "CONVEYOR_BULK_SYNC_MAX"
	VarBulkChunk                 = "CONVEYOR_BULK_CHUNK"
	VarOperationQuietAfter       = "CONVEYOR_OPERATION_QUIET_AFTER"
	VarHeartbeatInterval         = "CONVEYOR_HEARTBEAT_INTERVAL"
	VarDeadlineMargin            = "CONVEYOR_DEADLINE_MARGIN"
	VarCancelNotice              = "CONVEYOR_CANCEL_NOTICE"
	VarIdempotencyWindow         = "CONVEYOR_IDEMPOTENCY_WINDOW"
	VarStaleAfter                = "CONVEYOR_STALE_AFTER"
	VarDeleteAfter               = "CONVEYOR_DELETE_AFTER"
	VarStreamPing                = "CONVEYOR_STREAM_PING"
	VarStreamPoll                = "CONVEYOR_STREAM_POLL"
	VarScheduleGroup             = "CONVEYOR_SCHEDULE_GROUP"
	VarScheduleTargetARN         = "CONVEYOR_SCHEDULE_TARGET_ARN"
	VarScheduleRoleARN           = "CONVEYOR_SCHEDULE_ROLE_ARN"
	VarStreamMaxPerUser          = "CONVEYOR_STREAM_MAX_PER_USER"
	VarStreamLifetime            = "CONVEYOR_STREAM_LIFETIME"
	VarWebhookSecretOverlap      = "CONVEYOR_WEBHOOK_SECRET_OVERLAP"
	VarWebhookSlots              = "CONVEYOR_WEBHOOK_SLOTS"
	VarWebhookTimeout            = "CONVEYOR_WEBHOOK_TIMEOUT"
	VarWebhookRetryBase          = "CONVEYOR_WEBHOOK_RETRY_BASE"
	VarWebhookRetryMax           = "CONVEYOR_WEBHOOK_RETRY_MAX"
	VarWebhookMaxAttempts        = "CONVEYOR_WEBHOOK_MAX_ATTEMPTS"
	VarWebhookCircuitFailures    = "CONVEYOR_WEBHOOK_CIRCUIT_FAILURES"
	VarWebhookCircuitCooldown    = "CONVEYOR_WEBHOOK_CIRCUIT_COOLDOWN"
	VarWebhookCircuitMax         = "CONVEYOR_WEBHOOK_CIRCUIT_MAX"
	VarWebhookDisableAfter       = "CONVEYOR_WEBHOOK_DISABLE_AFTER"
	VarUploadExpiry              = "CONVEYOR_UPLOAD_EXPIRY"
	VarMaxUploadSize             = "CONVEYOR_MAX_UPLOAD_SIZE"
	VarOAuthClientRecheck        = "CONVEYOR_OAUTH_CLIENT_RECHECK"
	VarOIDCIssuer                = "CONVEYOR_OIDC_ISSUER"
	VarOIDCAudience              = "CONVEYOR_OIDC_AUDIENCE"
	VarOIDCRoleClaim             = "CONVEYOR_OIDC_ROLE_CLAIM"
	VarOIDCPlanClaim             = "CONVEYOR_OIDC_PLAN_CLAIM"
	VarOIDCJWKSURL               = "CONVEYOR_OIDC_JWKS_URL"
	VarOIDCJWKSTTL               = "CONVEYOR_OIDC_JWKS_TTL"
	VarOIDCJWKSMinRefresh        = "CONVEYOR_OIDC_JWKS_MIN_REFRESH"
	// Tracing ([tracing](operations.md#tracing)).
	VarOTLPEndpoint     = "CONVEYOR_OTLP_ENDPOINT"
	VarTraceSampleRatio = "CONVEYOR_TRACE_SAMPLE_RATIO"
	// The http kind's limits ([the http kind](http-kind.md)).
	VarHTTPMaxSnoozes      = "CONVEYOR_HTTP_MAX_SNOOZES"
	VarHTTPMaxAge          = "CONVEYOR_HTTP_MAX_AGE"
	VarHTTPTimeoutFloor    = "CONVEYOR_HTTP_TIMEOUT_FLOOR"
	VarHTTPBreakersPerUser = "CONVEYOR_HTTP_BREAKERS_PER_USER"
	// VarQueueURLPrefix, VarDLQURLPrefix and VarESMUUIDPrefix name one
	// variable per tier: see VarQueueURL, VarDLQURL and VarESMUUID.
	VarQueueURLPrefix = "CONVEYOR_QUEUE_URL_"
	VarDLQURLPrefix   = "CONVEYOR_DLQ_URL_"
	VarESMUUIDPrefix  = "CONVEYOR_ESM_UUID_"
	// Variables of the local stack only (localstack/stack).
	VarStreamAddr    = "CONVEYOR_STREAM_ADDR"
	VarStreamTimeout = "CONVEYOR_STREAM_TIMEOUT"
	VarSimulatorAddr = "CONVEYOR_SIMULATOR_ADDR"
)

// VarQueueURL names the variable holding tier's queue URL, e.g. CONVEYOR_QUEUE_URL_HIGH.
func VarQueueURL(t job.Tier) string { return VarQueueURLPrefix + strings.ToUpper(string(t)) }

// VarDLQURL names the variable holding tier's dead-letter queue URL.
func VarDLQURL(t job.Tier) string { return VarDLQURLPrefix + strings.ToUpper(string(t)) }

// VarESMUUID names the variable holding tier's event source mapping UUID.
func VarESMUUID(t job.Tier) string { return VarESMUUIDPrefix + strings.ToUpper(string(t)) }

// Var is one configuration variable: the one place its default lives.
type Var struct {
	// Name is the environment variable (a pattern with <TIER> for the
	// per-tier ones).
	Name string
	// Default is the value when the variable is unset, typed as From
	// parses it (time.Duration, int, int64 or string); nil when there is
	// none. DefaultText, when set, is what docs/configuration.md says
	// instead.
	Default     any
	DefaultText string
	// Meaning says what it does.
	Meaning string
	// Rule is what From accepts; a value outside it stops the process
	// with an error naming the variable.
	Rule string
}

// Vars is the table of every variable, in docs/configuration.md's order.
// That page's table is generated from it (see Markdown; a test keeps the
// two equal).
var Vars = []Var{
	{Name: VarEnv, DefaultText: "none: **required**", Meaning: "the environment; a process without it refuses to start (CDK sets it per stack; the local stack, `.local/env` and the tests set `local` explicitly)", Rule: "`local`, `staging`, `prod-ru` or `prod-en`"},
	{Name: VarAPIAddr, Default: "127.0.0.1:8080", Meaning: "local gateway address"},
	{Name: VarStreamAddr, DefaultText: "a free loopback port", Meaning: "the stream function's local URL (`make run`; written to `.local/env` as `CONVEYOR_STREAM_URL`)"},
	{Name: VarStreamTimeout, DefaultText: "the stream function's timeout (`5m`)", Meaning: "the local stream function URL's timeout, as Lambda's: a stream ends cleanly shortly before it and the client resumes with `Last-Event-ID` (`make fuzz` sets `2s`)", Rule: "> 0"},
	{Name: VarMaxAttempts, Default: 7, Meaning: "attempts before a job fails", Rule: "≥ 1"},
	{Name: VarRetryBase, Default: 2 * time.Second, Meaning: "ceiling of the first backoff (full jitter, doubling per attempt)", Rule: "> 0, ≤ `CONVEYOR_RETRY_MAX`"},
	{Name: VarRetryMax, Default: 15 * time.Minute, Meaning: "cap of every backoff", Rule: "≤ 12h (the longest SQS visibility timeout)"},
	{Name: VarParkAfter, Default: time.Minute, Meaning: "the shortest wait a job spends in the table instead of the queue ([design](design.md#running-a-job-resume-never-repeat), \"Long waits leave the queue\")", Rule: "> 0"},
	{Name: VarFairSlots, Default: FairSlotsDefault, Meaning: "jobs of one owner in flight at once per tier, by plan: the owner's message groups ([fairness](fairness.md)); 0: a group per job, no cap", Rule: "`plan=n` pairs, 0 ≤ n ≤ 1000"},
	{Name: VarOwnerQueueDepth, Default: 1000, Meaning: "the most jobs of one owner a tier's queue holds (queued or running); the owner's next jobs wait in its backlog in the table, in order, and are admitted as these finish, so no owner's backlog outgrows what SQS FIFO looks through for other owners ([fairness](fairness.md)); 0: no bound", Rule: "0 ≤ n ≤ 100000"},
	{Name: VarOwnerSlots, Default: "", DefaultText: "none", Meaning: "the same for named owners, over their plan's (`user-42=16`): how an operator gives one owner more or fewer", Rule: "`owner=n` pairs, 0 ≤ n ≤ 1000"},
	{Name: VarRateLimits, Default: RateLimitsDefault, Meaning: "requests a second of one owner (a user token's subject) on the API function's routes, sustained / at once, by plan: a token bucket shared by every instance; beyond, `429 throttled` with `Retry-After` ([limits](limits.md)); admin and service tokens are not limited", Rule: "`plan=rate/burst` pairs, 1 ≤ rate ≤ 10000, 1 ≤ burst ≤ 100000, `free` among them"},
	{Name: VarOwnerRateLimits, Default: "", DefaultText: "none", Meaning: "the same for named owners, over their plan's (`user-42=50/500`)", Rule: "`owner=rate/burst` pairs, as above"},
	{Name: VarActiveJobQuotas, Default: ActiveJobQuotasDefault, Meaning: "active jobs (scheduled, queued or running) one owner may have at once, by the token's plan: a counter per owner in the table, moved in each job's own transaction; a submission over it gets `429 quota_exceeded` with `Retry-After` ([limits](limits.md#quotas)); a token of an unknown plan gets free's", Rule: "`plan=n` pairs, 1 ≤ n ≤ 10000000, `free` among them"},
	{Name: VarOwnerActiveJobQuotas, Default: "", DefaultText: "none", Meaning: "the same for named owners, over their plan's (`user-42=500`)", Rule: "`owner=n` pairs, as above"},
	{Name: VarBusEvents, Default: string(job.BusLifecycle), Meaning: "which job events the relay puts on the event bus: `lifecycle` keeps `job.progress` and `job.phase.completed` in the table, the event log and SSE only (about 3 events per job on the bus instead of 8); `all` puts every event ([events](events.md#what-goes-on-the-bus); infra/env/<env>.json `busEvents`)", Rule: "`lifecycle` or `all`"},
	{Name: VarBreakerWindow, Default: time.Minute, Meaning: "circuit breaker: the period failures are counted in", Rule: "> 0"},
	{Name: VarBreakerThreshold, Default: 5, Meaning: "circuit breaker: failures within the window that open a token's circuit (and an http target's)", Rule: "≥ 1"},
	{Name: VarBreakerHostOwners, Default: BreakerHostOwnersDefault, Meaning: "circuit breaker: distinct owners whose failures within the window open the publishing host's circuit, each counted once whatever its tokens; a token's 429 never counts ([fairness](fairness.md#circuits))", Rule: "≥ 2"},
	{Name: VarBreakerCooldown, Default: 5 * time.Minute, Meaning: "circuit breaker: how long a circuit stays open before one probe", Rule: "> 0"},
	{Name: VarBreakerProbeLease, Default: 30 * time.Second, Meaning: "circuit breaker: how long the half-open probe holds its lease (unset: 30s, or `CONVEYOR_BREAKER_COOLDOWN` when shorter); the probe call ends at 4/5 of it", Rule: "> 0"},
	{Name: VarBreakerCache, Default: 5 * time.Second, Meaning: "how long an instance trusts its snapshot of the breakers (one Query per period)", Rule: "≥ 0"},
	{Name: VarCallTimeout, Default: 20 * time.Second, Meaning: "deadline of one external API call (Submit adds its size at `CONVEYOR_UPLOAD_RATE_MIN`)", Rule: "> 0, at most 4/5 of `CONVEYOR_BREAKER_PROBE_LEASE` (a probe's call must end inside its lease; checked when either is set)"},
	{Name: VarUploadRateMin, Default: int64(1 << 20), Meaning: "the slowest upload to the external API a Submit waits for, bytes per second", Rule: "≥ 1"},
	{Name: VarRecoveryInterval, Default: 5 * time.Minute, Meaning: "stuck-job recovery period (the local ticker; `rate(5 minutes)` in AWS)", Rule: "> 0"},
	{Name: VarScheduleInterval, Default: time.Minute, Meaning: "how often due scheduled jobs are released (local ticker)", Rule: "> 0"},
	{Name: VarRetentionInterval, Default: time.Minute, Meaning: "how often finished jobs go stale and unreferenced uploads expire (the local ticker; `rate(1 minute)` in AWS)", Rule: "> 0"},
	{Name: VarStuckAfter, Default: 20 * time.Minute, Meaning: "a queued job not received, or a running job without a heartbeat, for this long is an orphan", Rule: "> 0"},
	{Name: VarSweepBudget, Default: 50 * time.Second, Meaning: "how long one run of the recovery function's sweeps may work in all (cut to the invocation's deadline less 10s); each sweep loops until nothing is due or its share is spent", Rule: "> 0"},
	{Name: VarBulkSyncMax, Default: 100, Meaning: "the most matching jobs a bulk restart or stop by filter without `limit` acts on inside its request; more start an operation (`202`, worked off in the background: [operations](operations.md#large-filters-run-as-operations))", Rule: "1 ≤ n ≤ 100"},
	{Name: VarBulkChunk, Default: 200, Meaning: "the most jobs one invocation of an operation's worker (the system function) acts on", Rule: "1 ≤ n ≤ 200"},
	{Name: VarOperationQuietAfter, Default: 2 * time.Minute, Meaning: "a running operation whose record was not written for this long has lost its worker: the recovery sweep sends its message again", Rule: "> 0"},
	{Name: VarHeartbeatInterval, Default: 30 * time.Second, Meaning: "worker heartbeat; a claim lapses after 3 missed beats", Rule: "> 0"},
	{Name: VarDeadlineMargin, Default: 10 * time.Second, Meaning: "what the publisher leaves of each invocation to record outcomes: no call starts that could end after the deadline less it; the job is handed back, no attempt spent", Rule: "> 0"},
	{Name: VarCancelNotice, Default: 2 * time.Second, Meaning: "the longest a cancel or stop may go unnoticed by a running job's next external call: a run that saw its job running under its own lease less than this long ago (its claim, heartbeat or last write) makes the call without reading the job first ([leases](leases.md))", Rule: "> 0"},
	{Name: VarIdempotencyWindow, Default: 24 * time.Hour, Meaning: "how long a creating POST's response is replayed to a repeat with the same `Idempotency-Key` and body ([design](design.md#submission-and-the-outbox), \"Idempotency-Key\")", Rule: "> 0"},
	{Name: VarStaleAfter, Default: resources.StaleAfterDefault, Meaning: "retention: a finished job becomes stale after it", Rule: "≤ 168h (the bucket lifecycle is derived from it)"},
	{Name: VarDeleteAfter, Default: resources.DeleteAfterDefault, Meaning: "retention: a stale job is deleted this long after it finished", Rule: "≥ `CONVEYOR_STALE_AFTER`"},
	{Name: VarStreamPing, Default: 15 * time.Second, Meaning: "the longest silence on an SSE stream (a `ping` event)", Rule: "> 0"},
	{Name: VarStreamPoll, Default: time.Second, Meaning: "how often an open SSE stream reads its job (one DynamoDB read per idle poll)", Rule: "> 0, ≤ 1s (a transition reaches a stream within it)"},
	{Name: VarStreamMaxPerUser, Default: 5, Meaning: "open SSE streams per user, across instances (beyond: `429 too_many_streams` at once, with `Retry-After`)", Rule: "≥ 1"},
	{Name: VarStreamLifetime, Default: time.Minute, Meaning: "the longest an SSE stream runs: it then ends cleanly and the client resumes with `Last-Event-ID`; a stream whose client left holds its slot and its execution until then (a function URL does not stop a streaming function when its client goes)", Rule: "> 0"},
	{Name: VarWebhookSecretOverlap, Default: 24 * time.Hour, Meaning: "how long a user's rotated-out webhook secret keeps signing beside the new one", Rule: "≥ 1m (functions cache a user's keys that long)"},
	{Name: VarWebhookSlots, Default: WebhookSlotsDefault, Meaning: "webhook deliveries of one owner in flight at once on the system tier: the owner's message groups there, each endpoint's deliveries in one of them ([fairness](fairness.md#webhooks)); 0: a group per delivery, no cap", Rule: "0 ≤ n ≤ 1000"},
	{Name: VarWebhookTimeout, Default: 10 * time.Second, Meaning: "the longest one webhook delivery attempt waits for its receiver's answer", Rule: "> 0, ≤ 30s"},
	{Name: VarWebhookRetryBase, Default: 30 * time.Second, Meaning: "the wait after a webhook delivery's first failed attempt; each further failure doubles it, less up to half at random", Rule: "> 0, ≤ `CONVEYOR_WEBHOOK_RETRY_MAX`"},
	{Name: VarWebhookRetryMax, Default: 6 * time.Hour, Meaning: "cap of every wait between a delivery's attempts", Rule: "≤ 12h (the longest SQS visibility timeout)"},
	{Name: VarWebhookMaxAttempts, Default: 15, Meaning: "attempts of one webhook delivery before it fails (the defaults span 16h to 32h: about a day)", Rule: "≥ 1"},
	{Name: VarWebhookCircuitFailures, Default: 5, Meaning: "consecutive failed deliveries (timeouts, transport errors, 5xx, 429) that open a webhook endpoint's circuit: its deliveries then wait, no attempt spent, no connection made ([fairness](fairness.md#webhooks))", Rule: "≥ 1"},
	{Name: VarWebhookCircuitCooldown, Default: time.Minute, Meaning: "how long an endpoint's circuit first stays open; each failed probe doubles it", Rule: "> 0"},
	{Name: VarWebhookCircuitMax, Default: time.Hour, Meaning: "the longest an endpoint's circuit stays open at once", Rule: "≥ `CONVEYOR_WEBHOOK_CIRCUIT_COOLDOWN`"},
	{Name: VarWebhookDisableAfter, Default: 120 * time.Hour, Meaning: "how long a webhook endpoint's deliveries fail, with no success between, before the next failure disables it: its deliveries then fail at once until its owner enables it (`PATCH /v1/webhooks/{id}`)", Rule: "> 0"},
	{Name: VarUploadExpiry, Default: 5 * time.Minute, Meaning: "presigned URL lifetime", Rule: "> 0, ≤ 168h (SigV4's limit)"},
	{Name: VarMaxUploadSize, Default: int64(50 << 20), Meaning: "largest upload, bytes", Rule: "≥ 1"},
	{Name: VarHTTPMaxSnoozes, Default: HTTPMaxSnoozesDefault, Meaning: "http jobs: waits without an attempt (429, circuit open) before the job fails `waits_exhausted`", Rule: "≥ 1"},
	{Name: VarHTTPMaxAge, Default: HTTPMaxAgeDefault, Meaning: "http jobs: how long after it became due a job is tried before it fails `max_age_exceeded`", Rule: "> 0"},
	{Name: VarHTTPTimeoutFloor, Default: HTTPTimeoutFloorDefault, Meaning: "http jobs: a `timeoutMs` below it that expires does not count on the target's circuit", Rule: "> 0"},
	{Name: VarHTTPBreakersPerUser, Default: HTTPBreakersPerUserDefault, Meaning: "http jobs: circuits (one per target host) a user may have; further hosts share one", Rule: "≥ 1"},
	{Name: VarDeviantArtURL, Default: "https://www.deviantart.com", Meaning: "external API base URL (the local stack points it at the simulator)", Rule: "an absolute http(s) URL"},
	{Name: VarDeviantArtClientID + "` / `_SECRET", DefaultText: "none (generated locally)", Meaning: "OAuth client credentials; the functions that refresh tokens (`resources.OAuthClientFunctions`: the publisher) refuse to start without both"},
	{Name: VarDeviantArtClientSecretARN, DefaultText: "set by CDK for the publisher", Meaning: "Secrets Manager secret `{\"clientId\":\"…\",\"clientSecret\":\"…\"}` read when a token first needs refreshing, when the two values are not set; until it holds both, jobs that need a refresh wait (no attempt spent) and the overview says why"},
	{Name: VarOAuthClientRecheck, Default: time.Minute, Meaning: "how often the publisher re-reads an OAuth client secret that holds no credentials yet", Rule: "> 0"},
	{Name: VarJWTSecret, DefaultText: "random locally", Meaning: "HS256 secret (in AWS read by ARN: `CONVEYOR_JWT_SECRET_ARN`, set by CDK)"},
	{Name: VarOIDCIssuer, DefaultText: "none (HS256 tokens only)", Meaning: "an OpenID Connect issuer whose RS256/ES256 tokens are accepted beside the HS256 ones ([identity](identity.md)); its `iss`, exactly", Rule: "an https URL (http only on a loopback host)"},
	{Name: VarOIDCAudience, DefaultText: "none: **required** with an issuer", Meaning: "the `aud` values accepted from the issuer, comma-separated; a token must name one", Rule: "set exactly when `CONVEYOR_OIDC_ISSUER` is"},
	{Name: VarOIDCRoleClaim, Default: "role", Meaning: "the issuer's claim holding the role (a string, or an array such as `cognito:groups`: the highest of admin, service, user; missing: user); a namespaced name or a dotted path (`realm_access.roles`)"},
	{Name: VarOIDCPlanClaim, Default: "plan", Meaning: "the issuer's claim holding the plan (missing: free)"},
	{Name: VarOIDCJWKSURL, DefaultText: "discovered", Meaning: "the issuer's key set; unset, read from `<issuer>/.well-known/openid-configuration` on the first token", Rule: "an https URL (http only on a loopback host)"},
	{Name: VarOIDCJWKSTTL, Default: time.Hour, Meaning: "how long a fetched key set is trusted before the next token refetches it", Rule: "> 0"},
	{Name: VarOIDCJWKSMinRefresh, Default: time.Minute, Meaning: "the least time between two fetches of the key set: a token naming an unknown key refetches only this long after the last fetch", Rule: "> 0, ≤ `CONVEYOR_OIDC_JWKS_TTL`"},
	{Name: VarOTLPEndpoint, DefaultText: "none (tracing off)", Meaning: "the OTLP/HTTP collector the functions send their spans to (`/v1/traces` is added; the ADOT Lambda layer's collector listens on `http://localhost:4318`); unset, no span is recorded or sent, and an incoming `traceparent` is still passed on ([tracing](operations.md#tracing); infra/env/<env>.json `tracing.otlpEndpoint`)", Rule: "an https URL (http only on a loopback host)"},
	{Name: VarTraceSampleRatio, Default: "1", Meaning: "the share of new traces recorded (a trace a caller started follows the caller's sampled flag; a job's spans follow its submission's decision)", Rule: "0 ≤ r ≤ 1"},
	{Name: "CONVEYOR_SIMULATOR_TOKEN_TTL` / `_RATE_LIMIT` / `_RATE_WINDOW` / `_LATENCY` / `_LATENCY_JITTER", DefaultText: "`1h` / `0` (off) / `1m` / `0` / `0`", Meaning: "the local simulator: access token lifetime, calls per access token per window, added latency per call ([local stack](local-stack.md))"},
	{Name: VarTableIndexes, Default: TableIndexesCurrent, Meaning: "which of the table's indexes the functions query: `retired` while a migration adds their replacements ([migrations](migrations.md); CDK sets it per stage)", Rule: "`current` or `retired`"},
	{Name: VarJobItems, Default: JobItemsCompact, Meaning: "how the functions write a job item: `attributes` (every attribute, as code before compact items reads them) on the first deploy of the change, then `compact` ([migrations](migrations.md#compact-job-items); CDK sets it from the context)", Rule: "`compact` or `attributes`"},
	{Name: VarTable + "`, `" + VarBucket + "`, `" + VarKMSKeyID + "`, `" + VarEventBus + "`, `" + VarQueueURLPrefix + "<TIER>`, `" + VarDLQURLPrefix + "<TIER>`, `" + VarESMUUIDPrefix + "<TIER>", DefaultText: "set by CDK / the local stack", Meaning: "resource names (the ESM UUIDs: the admin function's, to pause a tier)"},
	{Name: VarScheduleGroup + "`, `" + VarScheduleTargetARN + "`, `" + VarScheduleRoleARN, DefaultText: "set by CDK / the local stack", Meaning: "recurring schedules: the EventBridge Scheduler group, the function a tick invokes (recovery) and the role Scheduler assumes; unset: schedules are kept in the table only"},
	{Name: "AWS_ENDPOINT_URL`, `AWS_ENDPOINT_URL_DYNAMODB`, `AWS_REGION", DefaultText: "— / — / `us-east-1`", Meaning: "the emulators, if any (the SDK's own variables: the second sends DynamoDB elsewhere than the first); the only thing that differs from AWS"},
}

// Lookup returns the row of name; a name missing from the table is a bug
// (it panics).
func Lookup(name string) Var {
	for _, v := range Vars {
		if v.Name == name {
			return v
		}
	}
	panic("config: no variable " + name + " in the table")
}

// defaultOf returns the typed default of name.
func defaultOf[T any](name string) T {
	d, ok := Lookup(name).Default.(T)
	if !ok {
		panic(fmt.Sprintf("config: the default of %s is not a %T", name, d))
	}
	return d
}

// DefaultTextOf is the default as docs/configuration.md writes it: a Go
// duration without zero units (15m, 168h), an integer, a string, or the row's text.
func (v Var) DefaultTextOf() string {
	if v.DefaultText != "" {
		return v.DefaultText
	}
	switch d := v.Default.(type) {
	case nil:
		return "none"
	case time.Duration:
		return "`" + shortDuration(d) + "`"
	default:
		return fmt.Sprintf("`%v`", d)
	}
}

// shortDuration writes d as time.ParseDuration reads it, without the zero
// units of Duration.String ("15m" for 15m0s).
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// Markdown renders the table as docs/configuration.md shows it.
func Markdown() string {
	var b strings.Builder
	b.WriteString("| Variable | Default | Meaning | Accepted |\n|---|---|---|---|\n")
	for _, v := range Vars {
		rule := v.Rule
		if rule == "" {
			rule = "any"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", v.Name, v.DefaultTextOf(), v.Meaning, rule)
	}
	return b.String()
}
