// Package resources is the one definition of Conveyor's AWS resources per
// environment: the tier FIFO queues and their DLQs, the DynamoDB table with
// its indexes and TTL attribute, the upload bucket and its notification, the
// KMS key alias and the event bus. The CDK stacks (infra/) and the emulator
// provisioning (emulator.Provision, localstack/emulator) both read it, so nothing is named twice
// and local and cloud cannot drift.
package resources

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/conveyor/conveyor/internal/job"
)

// Queue describes one tier's FIFO queue, its DLQ and the event source
// mapping that feeds it to its consumer function.
type Queue struct {
	Tier job.Tier
	// Name is the queue name, ending in .fifo.
	Name string
	// DLQName is the dead-letter queue's name, ending in .fifo.
	DLQName string
	// VisibilityTimeout must exceed the consumer's timeout (AWS recommends 6×).
	VisibilityTimeout time.Duration
	// MaxReceiveCount is how many receives move a message to the DLQ. It is
	// larger than the job's attempts because circuit-open snoozes also count
	// as receives; attempts are counted on the job in DynamoDB.
	MaxReceiveCount int
	// Retention is how long a message stays in the queue.
	Retention time.Duration
	// DLQRetention is how long a message stays in the DLQ (the maximum).
	DLQRetention time.Duration
	// BatchSize is the event source mapping's batch size (≤ 10 for FIFO).
	BatchSize int
	// MaxConcurrency is the event source mapping's maximum concurrency; it
	// gives the tiers their weights (high > medium > low).
	MaxConcurrency int
	// Consumer names the function that consumes the queue.
	Consumer string
	// DeduplicationScope and FifoThroughputLimit put the queue in SQS's
	// high-throughput FIFO mode (DeduplicationScopeMessageGroup,
	// FifoThroughputLimitPerMessageGroup): every job is its own message
	// group, so the queue's send and receive rate scales with the number
	// of groups instead of stopping at 300 API calls per second.
	DeduplicationScope  string
	FifoThroughputLimit string
}

// High-throughput FIFO attribute values (SQS queue attributes).
const (
	DeduplicationScopeMessageGroup     = "messageGroup"
	FifoThroughputLimitPerMessageGroup = "perMessageGroupId"
)

// RedriveAllowPolicy is the JSON of the DLQ's RedriveAllowPolicy: only the
// queue whose ARN is sourceARN may use it as its dead-letter queue.
func RedriveAllowPolicy(sourceARN string) string {
	b, _ := json.Marshal(map[string]any{"redrivePermission": "byQueue", "sourceQueueArns": []string{sourceARN}})
	return string(b)
}

// KeyType is a DynamoDB attribute type for a key.
type KeyType string

// Key attribute types.
const (
	String KeyType = "S"
	Number KeyType = "N"
)

// Key is one key attribute of a table or index.
type Key struct {
	Name string
	Type KeyType
}

// Index is a global secondary index. Its projection is ALL unless Include
// names the non-key attributes it carries (projection INCLUDE) or KeysOnly
// is set (projection KEYS_ONLY): such an index is written only when one of
// its keys or those attributes changes, not on every update of the item,
// and its entries are a few hundred bytes (one write unit) instead of the
// whole item. Its readers read the items they need by key.
type Index struct {
	Name         string
	PartitionKey Key
	SortKey      Key
	// Include, when set, makes the projection INCLUDE with these non-key
	// attributes (the table's and the index's keys are always projected).
	Include []string
	// KeysOnly makes the projection KEYS_ONLY (Include must be empty).
	KeysOnly bool
}

// Projection types of an Index, as DynamoDB and CloudFormation name them.
const (
	ProjectionAll      = "ALL"
	ProjectionInclude  = "INCLUDE"
	ProjectionKeysOnly = "KEYS_ONLY"
)

// Projection is the index's projection type.
func (ix Index) Projection() string {
	switch {
	case ix.KeysOnly:
		return ProjectionKeysOnly
	case len(ix.Include) > 0:
		return ProjectionInclude
	}
	return ProjectionAll
}

// Table describes the DynamoDB table.
type Table struct {
	Name         string
	PartitionKey Key
	SortKey      Key
	Indexes      []Index
	// TTLAttribute holds the epoch second after which an item is expired;
	// readers treat expired items as gone, since TTL deletes late.
	TTLAttribute string
	// PointInTimeRecovery and DeletionProtection are on in the cloud.
	PointInTimeRecovery bool
	DeletionProtection  bool
	// StreamView is the table's stream view type (DynamoDB Streams): the
	// relay reads the event items' new images from it.
	StreamView string
}

// StreamViewNewImage is the stream view the relay needs.
const StreamViewNewImage = "NEW_IMAGE"

// EventSKPrefix starts the sort key of every event item (EVT#<seq>).
const EventSKPrefix = "EVT#"

// EventStream is the DynamoDB Streams event source mapping that feeds the
// table's new event items to the relay function; the CDK stacks deploy it
// and the local runtime's stream poller follows it.
type EventStream struct {
	// Function is the relay function.
	Function string
	// BatchSize is the most records per invocation.
	BatchSize int
	// BatchingWindow is how long records gather before an invocation with
	// fewer than BatchSize (MaximumBatchingWindowInSeconds, whole seconds;
	// 0: Lambda invokes with what each poll of the shard found, four polls
	// a second).
	BatchingWindow time.Duration
	// ParallelizationFactor is how many batches of one shard run at once
	// (1–10). Lambda splits a shard's records by a hash of their partition
	// key, so the records of one key (one job's events) still arrive in
	// order, one batch at a time; the relay function's reserved
	// concurrency must cover shards × this.
	ParallelizationFactor int
	// MaxRetries bounds the retries of a failing batch
	// (MaximumRetryAttempts); then it goes to the failure queue.
	MaxRetries int
	// BisectOnError splits a batch whose invocation failed and retries the
	// halves (BisectBatchOnFunctionError).
	BisectOnError bool
	// StartingPosition is where a new mapping starts reading the stream.
	StartingPosition string
	// Filter is the mapping's filter pattern (FilterCriteria): new event
	// items only. Records it drops are never handed to the function.
	Filter string
	// FailureQueueName is the on-failure destination, a standard SQS queue
	// (a stream mapping cannot send to FIFO): what a batch that ran out of
	// retries left behind (its shard and sequence numbers).
	FailureQueueName string
	// FailureRetention is how long the failure queue keeps a message.
	FailureRetention time.Duration
}

// EventStreamFilter is EventStream.Filter: inserted items whose sort key
// starts with EventSKPrefix.
const EventStreamFilter = `{"eventName":["INSERT"],"dynamodb":{"Keys":{"` + AttrSK + `":{"S":[{"prefix":"` + EventSKPrefix + `"}]}}}}`

// EventArchive is the bus's EventBridge archive: every event Conveyor puts,
// kept for replay after a consumer's outage.
type EventArchive struct {
	// Name is the archive's name.
	Name string
	// Retention is how long events are kept (0: forever).
	Retention time.Duration
}

// EventSource is the EventBridge source of an environment's events; the
// archive's pattern matches it.
func EventSource(env job.Env) string { return "conveyor." + string(env) }

// Bucket describes the upload bucket and its notification.
type Bucket struct {
	// Name is the bucket's name; in the cloud the account id is appended
	// (bucket names are global).
	Name string
	// UploadPrefix is where presigned uploads land; ObjectCreated events
	// under it go to NotifyFunction.
	UploadPrefix string
	// NotifyFunction is the function that receives ObjectCreated events.
	NotifyFunction string
	// UploadObjectExpiry is the bucket lifecycle's expiration of objects
	// under UploadPrefix, counted from each object's creation (whole days,
	// as S3 counts). It is the backstop behind the retention sweep, and it
	// outlives the longest any job may need an object (UploadObjectHorizon).
	UploadObjectExpiry time.Duration
	// CORSOrigins may PUT to presigned URLs from a browser, locally; the
	// cloud stacks take theirs from the environment's deploy configuration
	// (infra/env/<env>.json), so the cloud definitions have none.
	CORSOrigins []string
}

// Schedule describes a scheduled function.
type Schedule struct {
	Name     string
	Function string
	// Expression is the EventBridge Scheduler expression used in AWS.
	Expression string
	// Interval is the same period, used by the local runtime's ticker
	// (overridden there by configuration).
	Interval time.Duration
	// Task is sent in the event's detail ({"task": …}) so one function
	// can serve several schedules.
	Task string
	// Shards are the sweep index shards (0 … SweepShards-1) whose due
	// items this schedule's invocations sweep, sent in the detail too
	// ({"task": …, "shards": […]}); nil: every shard. A task split over
	// several schedules (TaskRelease, TaskRetain: Parts) gives each a
	// disjoint set, together every shard once.
	Shards []int
}

// Detail is the detail of the event that invokes the schedule's function:
// its task and, when it owns some shards only, those.
func (s Schedule) Detail() map[string]any {
	d := map[string]any{"task": s.Task}
	if s.Shards != nil {
		d["shards"] = slices.Clone(s.Shards)
	}
	return d
}

// DetailJSON is Detail as the event's JSON.
func (s Schedule) DetailJSON() string {
	b, err := json.Marshal(s.Detail())
	if err != nil {
		panic(err) // a string and ints
	}
	return string(b)
}

// CORS is what a browser on an allowed origin may do with an endpoint:
// the methods and request headers its preflight is answered with, the
// response headers its scripts may read, and how long it may cache the
// preflight's answer. The allowed origins are the environment's (the
// cloud's deploy configuration, allowedOrigins; locally
// Bucket.CORSOrigins).
type CORS struct {
	AllowMethods  []string
	AllowHeaders  []string
	ExposeHeaders []string
	MaxAge        time.Duration
}

// APICORS is the HTTP API's CORS, the one definition the CDK stacks
// (infra/stack: apiCORS) and the local gateway (localstack/stack) both
// serve. It follows the contract (API.md, openapi.yaml): a browser sends
// Authorization (the bearer token), Content-Type (JSON bodies) and
// Idempotency-Key (the creating POSTs); it reads Location (what a POST
// created), X-Total-Count (lists), X-Request-Id (every answer: to quote
// when reporting a problem), Retry-After (a 429's wait) and
// Idempotent-Replayed (a repeated Idempotency-Key's replay). The methods
// are those the API's routes take.
var APICORS = CORS{
	AllowMethods:  []string{"GET", "HEAD", "POST", "PUT", "DELETE"},
	AllowHeaders:  []string{"Authorization", "Content-Type", "Idempotency-Key"},
	ExposeHeaders: []string{"Idempotent-Replayed", "Location", "Retry-After", "X-Request-Id", "X-Total-Count"},
	MaxAge:        time.Hour,
}

// StreamCORS is the event stream function URL's CORS (infra/stack:
// streamURL; localstack/stack): a browser's EventSource GETs, with the
// token and the Last-Event-ID it resumes from.
var StreamCORS = CORS{
	AllowMethods: []string{"GET"},
	AllowHeaders: []string{"Authorization", "Last-Event-ID"},
	MaxAge:       time.Hour,
}

// AsyncInvoke is how Lambda handles a function's asynchronous invocations
// (its EventInvokeConfig): how often a failed one is retried, and how long
// an event waits (throttled, or between retries) before Lambda gives up on
// it. Either way the event then goes to the on-failure destination, the
// definition's AsyncFailureQueue, with the error.
type AsyncInvoke struct {
	// RetryAttempts is how many times Lambda retries a failed invocation
	// (0 to 2; Lambda's default is 2).
	RetryAttempts int
	// MaxEventAge is the age past which Lambda stops trying an event (1
	// minute to 6 hours; Lambda's default is 6 hours).
	MaxEventAge time.Duration
}

// ScheduleTickFunction is the function the users' recurring schedules
// invoke with each tick (EventBridge Scheduler, asynchronously).
const ScheduleTickFunction = FuncRecovery

// AsyncInvokes is the asynchronous-invoke setting of every function that
// something invokes asynchronously (Definition.AsyncInvoked): a function
// invoked so without a setting here fails the synth.
var AsyncInvokes = map[string]AsyncInvoke{
	// S3 ObjectCreated events: a failure is worth retrying (the table or
	// the object was briefly unavailable), and an upload's client may
	// still confirm on demand, so the whole default window is kept.
	FuncConfirm: {RetryAttempts: 2, MaxEventAge: 6 * time.Hour},
	// EventBridge Scheduler: the sweeps (every minute or five) and the
	// users' schedule ticks. A missed sweep is covered by the next run,
	// and a retried one overlaps it safely (every change is a conditional
	// write), so retries cost a sweep nothing. A tick must not be
	// silently dropped: it is retried (a tick fired twice still submits
	// one job), and one that still fails, or waits an hour (throttled),
	// goes to the failure queue, alarmed, to be fired again by hand —
	// rather than submitting its job hours late. An hour is also how long
	// Scheduler itself retries a tick it cannot deliver
	// (internal/aws/scheduler).
	FuncRecovery: {RetryAttempts: 2, MaxEventAge: time.Hour},
}

// AsyncInvoked lists the functions of d that are invoked asynchronously,
// sorted: the bucket's notification target, the schedules' targets and
// the users' schedule ticks' target. Each has its AsyncInvokes setting and
// the failure queue as its on-failure destination.
func (d Definition) AsyncInvoked() []string {
	fns := []string{d.Bucket.NotifyFunction, ScheduleTickFunction}
	for _, s := range d.Schedules {
		fns = append(fns, s.Function)
	}
	slices.Sort(fns)
	return slices.Compact(fns)
}

// ReleaseParts and RetainParts are how many schedules share the release
// and the retention sweeps, each every minute over its own shards
// (PartShards): each invocation has its own processor and its own budget,
// so a task keeps up with its parts times what one invocation handles
// (docs/performance.md, "The sweeps").
const (
	ReleaseParts = 4
	RetainParts  = 4
)

// Parts is how many schedules share task's sweeps (1: one schedule over
// every shard).
func Parts(task string) int {
	switch task {
	case TaskRelease:
		return ReleaseParts
	case TaskRetain:
		return RetainParts
	}
	return 1
}

// PartShards are the shards of part p of a task split over parts
// schedules: those whose number is p modulo parts (nil when parts is 1:
// every shard).
func PartShards(p, parts int) []int {
	if parts <= 1 {
		return nil
	}
	var out []int
	for n := p; n < SweepShards; n += parts {
		out = append(out, n)
	}
	return out
}

// Scheduled tasks of the recovery function.
const (
	// TaskRecover: stuck jobs (every 5 minutes).
	TaskRecover = "recover"
	// TaskRelease: scheduled jobs whose time came and parked jobs whose
	// wait is over (every minute, ReleaseParts schedules, each over its
	// own shards).
	TaskRelease = "release"
	// TaskRetain: retention's stale stage and the expiry of unreferenced
	// uploads (every minute, invocations of their own, so that their
	// budget is not shared with the other sweeps: RetainParts schedules,
	// each over its own shards).
	TaskRetain = "retain"
)

// Definition is every resource of one environment.
type Definition struct {
	Env      job.Env
	Prefix   string
	Queues   []Queue
	Table    Table
	Bucket   Bucket
	KMSAlias string
	EventBus string
	// EventStream feeds the table's event items to the relay.
	EventStream EventStream
	// EventArchive keeps the bus's events for replay.
	EventArchive EventArchive
	Schedules    []Schedule
	// ScheduleGroup is the EventBridge Scheduler group that holds the
	// users' recurring schedules (one schedule per definition).
	ScheduleGroup string
	// Functions lists the Lambda functions (their directory under functions/).
	Functions []string
	// AsyncFailureQueue is the standard SQS queue that receives the
	// asynchronous invocations (AsyncInvoked: the bucket's ObjectCreated
	// events to confirm, the schedules' sweeps and the users' schedule
	// ticks to recovery) that still failed after Lambda's retries or
	// outlived their maximum age (AsyncInvokes): the invocation
	// record, with the event and the error, for an operator to inspect
	// and replay. Lambda destinations cannot target FIFO queues.
	AsyncFailureQueue string
}

// LambdaBuildTags are the build tags of every function's bootstrap, in
// `make build` (its LAMBDA_TAGS), the local runtime and the bench alike:
//   - lambda.norpc: aws-lambda-go without the net/rpc path of the retired
//     go1.x runtime (provided.al2023 speaks the Runtime API);
//   - nethttpomithttp2: net/http without its bundled HTTP/2. Every
//     connection a function makes is HTTP/1.1 anyway or gains nothing from
//     HTTP/2 — the AWS endpoints we call answer HTTP/1.1, the external API
//     and the http kind's targets and webhook receivers are one request at
//     a time per job over a pooled keep-alive connection — and it saves
//     0.33–0.39 MB per bootstrap and its package inits at every cold start
//     (docs/performance.md, "Decisions").
const LambdaBuildTags = "lambda.norpc,nethttpomithttp2"

// Function names (directories under functions/).
const (
	FuncAPI       = "api"
	FuncAdmin     = "admin"
	FuncConfirm   = "confirm"
	FuncPublisher = "publisher"
	FuncSystem    = "system"
	FuncRecovery  = "recovery"
	FuncStream    = "stream"
	FuncRelay     = "relay"
	FuncUploads   = "uploads"
	FuncSchedules = "schedules"
)

// AdminPathPrefix is the path of every admin route of the HTTP API
// (API.md, "Admin"): API Gateway sends them to the admin function
// (HTTPRoutes). The admin function alone holds the operators' clients
// (Lambda for the tiers' event source mappings, SQS move tasks, DLQ
// access), so the api function links and may call none of them.
const AdminPathPrefix = "/v1/admin/"

// UploadsPathPrefix is the path of every uploads route (API.md,
// "Uploads": sign, confirm on demand, get): the uploads function's.
const UploadsPathPrefix = "/v1/uploads/"

// SchedulesPath is the recurring schedules' collection (API.md,
// "Recurring schedules"); it and every path under it are the schedules
// function's.
const SchedulesPath = "/v1/schedules"

// HTTPRoute sends a part of the HTTP API's paths to a function other than
// the api function.
type HTTPRoute struct {
	// Prefix is a path ending in "/": every path under it goes to
	// Function, as API Gateway's "ANY {Prefix}{proxy+}" route does (and
	// the prefix itself, trailing slash included, which the routers read
	// as the path without it).
	Prefix string
	// Bare sends the prefix without its final slash to Function too (API
	// Gateway: "ANY {Prefix without /}"), for a collection that is itself
	// a route (POST/GET /v1/schedules).
	Bare bool
	// Function is the function that serves these paths.
	Function string
}

// HTTPRoutes is the HTTP API's route table: which paths go to which
// function; every other path goes to the api function (API Gateway's
// $default route). The CDK stacks create their routes from it and the local
// gateway routes by it (FunctionForPath), so the two cannot drift. Each
// group has its own function so that each links and may call only what it
// uses (least privilege, and a smaller bootstrap, a faster cold start): the
// admin function the operators' clients, uploads the S3 client (presigned
// PUTs, a confirm's ranged GET), schedules EventBridge Scheduler and the time zone
// database; the api neither. The contract (API.md) is the same whichever
// function answers: each function's router holds exactly its group's
// routes, under the same middleware (internal/httpapi).
var HTTPRoutes = []HTTPRoute{
	{Prefix: AdminPathPrefix, Function: FuncAdmin},
	{Prefix: UploadsPathPrefix, Function: FuncUploads},
	{Prefix: SchedulesPath + "/", Bare: true, Function: FuncSchedules},
}

// FunctionForPath is the function that serves path (a request's path,
// without its query) in HTTPRoutes, FuncAPI for any other path.
func FunctionForPath(path string) string {
	for _, r := range HTTPRoutes {
		if strings.HasPrefix(path, r.Prefix) || (r.Bare && path == strings.TrimSuffix(r.Prefix, "/")) {
			return r.Function
		}
	}
	return FuncAPI
}

// RouteKeys are the API Gateway route keys of r ("ANY /v1/schedules",
// "ANY /v1/schedules/{proxy+}").
func (r HTTPRoute) RouteKeys() []string {
	var keys []string
	if r.Bare {
		keys = append(keys, "ANY "+strings.TrimSuffix(r.Prefix, "/"))
	}
	return append(keys, "ANY "+r.Prefix+"{proxy+}")
}

// AccessLogFields are the fields of the HTTP API's JSON access log line,
// each an API Gateway context variable: the CDK stack sets them as the
// stage's access log format, and the bench prices the bytes of a line
// (one per request, in the API's log group). A line is what an operator
// traces a request by: its id (the X-Request-Id the API answers with, and
// the request_id of the function's own line, which names the caller), the
// time, the caller's address, method and path, the status, the latency
// the caller saw and, when API Gateway could not get an answer from the
// function, why. What the function's line already says (the user, its own
// duration) and what diagnoses nothing (protocol, response length, user
// agent) is left out.
var AccessLogFields = map[string]string{
	"requestId":        "$context.requestId",
	"time":             "$context.requestTimeEpoch",
	"ip":               "$context.identity.sourceIp",
	"method":           "$context.httpMethod",
	"path":             "$context.path",
	"status":           "$context.status",
	"latencyMs":        "$context.responseLatency",
	"integrationError": "$context.integrationErrorMessage",
}

// JWTFunctions are the functions that verify callers' tokens: only they
// are given the JWT key (in AWS: may read its secret), at cold start.
var JWTFunctions = []string{FuncAPI, FuncAdmin, FuncUploads, FuncSchedules, FuncStream}

// JWTSecretName is the name of the Secrets Manager secret holding the
// HS256 key of env's tokens, as the CDK stack names it (prefix/jwt): the
// operator CLI reads it to mint service and admin tokens.
func JWTSecretName(env job.Env) string { return For(env).Prefix + "/jwt" }

// ReadsJWTSecret reports whether fn is one of JWTFunctions.
func ReadsJWTSecret(fn string) bool { return slices.Contains(JWTFunctions, fn) }

// OAuthClientFunctions are the functions that refresh users' tokens at the
// external API and so need Conveyor's OAuth client credentials: only they
// are given the credentials (in AWS: may read their secret), and they
// refuse to start without them.
var OAuthClientFunctions = []string{FuncPublisher}

// NeedsOAuthClient reports whether fn is one of OAuthClientFunctions.
func NeedsOAuthClient(fn string) bool {
	for _, f := range OAuthClientFunctions {
		if f == fn {
			return true
		}
	}
	return false
}

// FunctionSize is a function's memory, timeout and reserved concurrency,
// the same in every environment: the CDK stacks deploy it and the local
// runtime runs it.
type FunctionSize struct {
	// MemoryMB is the function's memory (and so its CPU share).
	MemoryMB int
	// Timeout bounds one invocation.
	Timeout time.Duration
	// ReservedConcurrency is the recommended reservation for an
	// environment with an account of its own; the stacks reserve only what
	// the environment's deploy configuration sets (infra/env/<env>.json,
	// off unless set). A reservation is both a floor and a ceiling: that many
	// concurrent executions are set aside for the function out of the
	// account's pool, and it never runs more. It protects the functions
	// users wait on (api, publisher) from the others and caps the ones
	// that hold an execution for long (stream). A queue consumer's
	// reservation covers the sum of its mappings' MaxConcurrency.
	ReservedConcurrency int
}

// AccountConcurrencyDefault is a new AWS account's regional concurrency
// quota; AWS keeps UnreservedConcurrencyMin of it unreserved.
const (
	AccountConcurrencyDefault = 1000
	UnreservedConcurrencyMin  = 100
)

// MemoryMBNewAccountMax is the most memory a function may have in a new
// AWS account: Lambda's quotas page says new accounts have reduced
// concurrency and memory quotas, raised with usage, and a new account's
// functions are refused above 3,008 MB. A first deploy must fit it.
const MemoryMBNewAccountMax = 3008

// FunctionSizes sizes every function of the definition.
var FunctionSizes = map[string]FunctionSize{
	// API Gateway's integration timeout is 30 s. Users wait on it: the
	// largest reservation of the HTTP functions, so no other function can
	// starve it. api, uploads and schedules share the 100 the api alone
	// reserved before their routes were split, by their share of the
	// work per job: here a submit (a transaction and a send, ≈ 4 round
	// trips) and the status reads (one GetItem each) — 65 carry ≈ 2,000
	// requests/s at 30 ms (the bench's API invocation at AWS latencies).
	FuncAPI: {MemoryMB: 512, Timeout: 29 * time.Second, ReservedConcurrency: 65},
	// Per job, one sign per file (one PutItem; the signature is local) and,
	// when the client asks instead of waiting for the S3 event, a confirm
	// (GetItem, a ranged GET, UpdateItem): about half the api's
	// round trips, so 30 (≈ 1,000 requests/s at 30 ms). A burst beyond
	// waits (429) instead of taking the api's executions.
	FuncUploads: {MemoryMB: 512, Timeout: 29 * time.Second, ReservedConcurrency: 30},
	// Users create, list and pause recurring schedules now and then (the
	// ticks run in the recovery function, not here): 5 carry ≈ 100
	// requests/s, and a create holds an execution for one Scheduler call.
	FuncSchedules: {MemoryMB: 256, Timeout: 29 * time.Second, ReservedConcurrency: 5},
	// The admin routes: operators and their monitors, behind the same
	// integration timeout. A small reservation: a burst of bulk calls
	// waits (429) rather than taking executions from api and publisher.
	FuncAdmin: {MemoryMB: 256, Timeout: 29 * time.Second, ReservedConcurrency: 10},
	// Asynchronous (S3 events): a throttled event is retried by Lambda
	// for up to 6 hours, so a small reservation loses nothing.
	FuncConfirm: {MemoryMB: 256, Timeout: 30 * time.Second, ReservedConcurrency: 20},
	// The tier queues' visibility timeout is 6× this. The high, medium
	// and low mappings run at most 50+20+5 at once; 5 spare. 256 MB: an
	// invocation waits — about six AWS requests and three external calls
	// per job, the jobs of a batch in parallel — and streams the image
	// from S3 into the upload through a pipe, never holding it whole; its
	// CPU per job is a few ms, so a quarter of the CPU share of 1 GB adds
	// tens of ms to a batch that waits hundreds, at a quarter of the
	// GB-seconds (docs/performance.md, "Lambda memory").
	FuncPublisher: {MemoryMB: 256, Timeout: ConsumerTimeout, ReservedConcurrency: 525},
	// The system mapping runs at most 10 at once; 2 spare.
	FuncSystem: {MemoryMB: 256, Timeout: time.Minute, ReservedConcurrency: 20},
	// Overlapping runs are safe (every change is a conditional write); the
	// timeout keeps a slow sweep from piling up behind the 1-minute
	// schedules. Nine schedules (recovery, ReleaseParts release parts,
	// RetainParts retention parts), each allowed one overlapping run. A
	// sweep handles 128 items at a time and its processor time comes with
	// the memory: the most a new account allows (MemoryMBNewAccountMax,
	// 1.7 vCPU; docs/performance.md, "The sweeps").
	FuncRecovery: {MemoryMB: MemoryMBNewAccountMax, Timeout: 2 * time.Minute, ReservedConcurrency: 2 * (1 + ReleaseParts + RetainParts)},
	// Clients reconnect with Last-Event-ID; a bounded stream bounds the
	// cost of an idle browser tab. Each open stream holds an execution for
	// up to the timeout (auth NONE, one DynamoDB read a second), so the
	// stream is capped low: the 26th concurrent viewer is refused rather
	// than taking executions from api and publisher.
	FuncStream: {MemoryMB: 256, Timeout: 5 * time.Minute, ReservedConcurrency: 25},
	// One stream batch: about EventStream.BatchSize/10 PutEvents and the
	// webhook sends. The mapping runs EventStream.ParallelizationFactor
	// (4) batches per shard at once: 20 covers a table of five stream
	// shards; beyond, invocations are throttled and retried (late, not lost).
	FuncRelay: {MemoryMB: 256, Timeout: time.Minute, ReservedConcurrency: 20},
}

// Table attribute names: the key schema, the index keys and TTL. The store
// writes items with these names; the definition creates tables with them.
const (
	AttrPK          = "pk"
	AttrSK          = "sk"
	AttrOwner       = "owner"       // byOwnerCreated / byOwnerUpdatedKeys partition key
	AttrCreatedKey  = "createdKey"  // byOwnerCreated sort key: createdAt#id
	AttrOwnerStatus = "ownerStatus" // owner#status: the retired byOwnerStatus's partition key, still written
	AttrUpdatedKey  = "updatedKey"  // byOwnerUpdatedKeys sort key: updatedAt#id
	AttrSweepKey    = "sweepKey"    // bySweepKeys partition key: status#shard (sparse)
	AttrSweepAt     = "sweepAt"     // bySweepKeys sort key: the time the sweep looks at
	AttrExpiresAt   = "expiresAt"   // TTL, epoch seconds
	AttrFeedKey     = "feedKey"     // byFeedKeys partition key: feed#shard (event items only)
	AttrFeedAt      = "feedAt"      // byFeedKeys sort key: at#jobId#seq
	AttrFeedFrom    = "feedFrom"    // the first event's sequence of the write a feed entry stands for
	AttrEventSeq    = "eventSeq"    // a job's last event's sequence number

	// The inspector's indexes (operators' search across users). Only job
	// items carry these attributes, so the indexes hold jobs only.
	AttrJobStatus = "jobStatus" // byStatusCreated partition key: the job's status
	AttrJobTier   = "jobTier"   // byTierCreatedKeys partition key: the job's tier
	AttrJobType   = "jobType"   // byTypeCreatedKeys partition key: the job's type
	AttrJobError  = "jobError"  // byErrorCreated partition key: the job's error code (sparse)
	AttrEntity    = "entity"    // byCreatedKeys partition key: "job" on every job
)

// Index names. A GSI's key schema and projection cannot change in place, so
// an index whose projection changes gets a new name, and the old one is
// retired (RetiredIndexes; docs/migrations.md).
const (
	// IndexByOwner holds every job of a user by creation, newest first,
	// with the inspector's attributes (INCLUDE): a user's list and its
	// count, and the inspector's owner filter. Written when a job is
	// created and when its status or error changes; never re-keyed.
	IndexByOwner = "byOwnerCreated"
	// IndexByOwnerUpdated holds a user's jobs by updatedAt with their
	// status and last event's sequence (INCLUDE): the status filter (newest
	// updated first) and its count, the updatedSince change feed (oldest
	// first, with or without a status) and the SSE stream's poll of what
	// changed. The one owner index re-keyed on every write of a job; its
	// entries are about 150 bytes.
	IndexByOwnerUpdated = "byOwnerUpdatedKeys"
	// IndexBySweep is the sparse sweep index: a job while some sweep may
	// be due for it (every status but stale), an upload while it may
	// expire, with what the sweeps read (INCLUDE SweepAttrs).
	IndexBySweep = "bySweepKeys"
	// IndexByFeed holds every write of a job's events of every user by
	// time, for the operators' live feed (GET /v1/admin/events): one entry
	// per write, on its last event item (INCLUDE FeedAttrs); the feed
	// reads the write's events by key.
	IndexByFeed = "byFeedKeys"
	// The inspector's indexes, all sorted by createdKey (createdAt#id).
	// Only byStatusCreated and byErrorCreated carry the job's status
	// (the inspector picks them whenever a status is asked for), so the
	// others are written once, when a job is created.
	IndexByStatusCreated = "byStatusCreated"
	IndexByTierCreated   = "byTierCreatedKeys"
	IndexByTypeCreated   = "byTypeCreatedKeys"
	IndexByErrorCreated  = "byErrorCreated"
	IndexByCreated       = "byCreatedKeys"
)

// BulkIndexes are the indexes a bulk operation's worker selects its jobs
// from: a bulk filter always names a status, so the inspector picks the
// owner's, the error code's or the status's index.
var BulkIndexes = []string{IndexByOwner, IndexByErrorCreated, IndexByStatusCreated}

// RetiredIndexes are the indexes an earlier definition had, by name, with
// their definitions: an existing table keeps them until the migration
// drops them (docs/migrations.md). Five projected whole items (ALL), and
// three of them were re-keyed on every write of a job; the three inspector
// indexes carried the job's status, so every status change wrote them.
var RetiredIndexes = []Index{
	{Name: "byOwner", PartitionKey: Key{AttrOwner, String}, SortKey: Key{AttrCreatedKey, String}},
	{Name: "byOwnerStatus", PartitionKey: Key{AttrOwnerStatus, String}, SortKey: Key{AttrUpdatedKey, String}},
	{Name: "byOwnerUpdated", PartitionKey: Key{AttrOwner, String}, SortKey: Key{AttrUpdatedKey, String}},
	{Name: "bySweep", PartitionKey: Key{AttrSweepKey, String}, SortKey: Key{AttrSweepAt, String}},
	{Name: "byFeed", PartitionKey: Key{AttrFeedKey, String}, SortKey: Key{AttrFeedAt, String}},
	inspectorIndex("byTierCreated", AttrJobTier, true),
	inspectorIndex("byTypeCreated", AttrJobType, true),
	inspectorIndex("byCreated", AttrEntity, true),
}

// Replaced names, for each index that replaced a retired one, the retired
// one: the same keys, and a projection the replacement's is part of, so a
// reader can query either (store.Store.ReadRetiredIndexes). The retired
// byOwnerStatus has no replacement of its own: its readers query
// byOwnerUpdatedKeys through a filter.
var Replaced = map[string]string{
	IndexByOwner: "byOwner", IndexByOwnerUpdated: "byOwnerUpdated", IndexBySweep: "bySweep", IndexByFeed: "byFeed",
	IndexByTierCreated: "byTierCreated", IndexByTypeCreated: "byTypeCreated", IndexByCreated: "byCreated",
}

// IndexStage is one stage of the index migration: the table's indexes and
// which of them the functions query.
type IndexStage struct {
	Indexes []Index
	// ReadRetired: the functions query the retired indexes
	// (CONVEYOR_TABLE_INDEXES=retired), since a replacement is missing or
	// was added by this very stage (and may still be filling).
	ReadRetired bool
}

// IndexMigration is the table at each stage of the migration from the
// retired indexes to t's (docs/migrations.md), one GSI created or deleted
// per stage, as DynamoDB and CloudFormation change them: stage 0 is the
// table before (the retired indexes and the ones kept), then each
// replacement is added, read only from the stage after the last one (the
// switch), then each retired index is dropped. The last stage holds
// t.Indexes.
func IndexMigration(t Table) []IndexStage {
	var kept, added []Index
	for _, ix := range t.Indexes {
		if _, ok := Replaced[ix.Name]; ok {
			added = append(added, ix)
		} else {
			kept = append(kept, ix)
		}
	}
	set := slices.Concat(RetiredIndexes, kept)
	stages := []IndexStage{{Indexes: set, ReadRetired: true}}
	for _, ix := range added {
		set = append(slices.Clone(set), ix)
		stages = append(stages, IndexStage{Indexes: set, ReadRetired: true})
	}
	stages = append(stages, IndexStage{Indexes: set})
	for _, r := range RetiredIndexes {
		set = slices.DeleteFunc(slices.Clone(set), func(ix Index) bool { return ix.Name == r.Name })
		stages = append(stages, IndexStage{Indexes: set})
	}
	return stages
}

// FeedShards is how many partitions the feed index spreads events over
// (a GSI partition takes about 1,000 writes a second); the admin feed
// reads each shard per poll.
const FeedShards = 4

// EntityJob is the value of AttrEntity on every job item.
const EntityJob = "job"

// InspectorAttrs are the attributes the inspector filters on after a
// Query; its indexes project them (INCLUDE) and nothing else, so a job's
// heartbeats and progress never write to them: only its creation, status
// changes and errors do (and, for the indexes without the status, only its
// creation and errors).
var InspectorAttrs = []string{AttrOwner, AttrJobStatus, AttrJobTier, AttrJobType, AttrJobError, AttrExpiresAt}

// OwnerUpdatedAttrs are what byOwnerUpdatedKeys carries besides its keys:
// the status its filter reads, the last event's sequence the SSE stream
// compares, and the TTL readers check.
var OwnerUpdatedAttrs = []string{AttrJobStatus, AttrEventSeq, AttrExpiresAt}

// SweepAttrs are what bySweepKeys carries besides its keys: what the sweeps
// and the operators' counts read of a job (its id, owner, status and tier,
// the times a sweep looks at, why and for what a parked job waits) and of
// an upload (its id). Each changes only with the entry's sort key, so a
// write that leaves a job's sweep time alone (progress, a lease extension)
// writes nothing here. Readers that need more read the item.
var SweepAttrs = []string{"id", AttrOwner, "status", "tier", "scheduleAt", "queuedAt", "retryAt", "stuckFrom",
	"heartbeatAt", "finishedAt", "waiting", "wait", AttrExpiresAt}

// FeedAttrs are what byFeedKeys carries besides its keys: the header of a
// write's last event and the sequence of the write's first (only a
// write's last event item enters the feed). The feed reads the events
// themselves by key.
var FeedAttrs = []string{"jobId", "seq", "type", "at", AttrFeedFrom, AttrExpiresAt}

// inspectorIndex is one of the inspector's indexes: partition key attr,
// sort key createdKey, projecting InspectorAttrs other than its own key,
// and other than the job's status unless withStatus.
func inspectorIndex(name, attr string, withStatus bool) Index {
	var inc []string
	for _, a := range InspectorAttrs {
		if a != attr && (withStatus || a != AttrJobStatus) {
			inc = append(inc, a)
		}
	}
	return Index{Name: name, PartitionKey: Key{attr, String}, SortKey: Key{AttrCreatedKey, String}, Include: inc}
}

// SweepShards is how many partitions the sparse sweep index spreads each
// status over, so no single partition gets hot; sweeps query each shard.
// Each status partition takes about 2 WCU per job passing through it (a
// one-unit entry in and out), and an index partition takes 1,000 WCU/s:
// 16 shards carry several thousand jobs/s (see the capacity model of
// `make bench`). Raising it is safe: a job's shard is its hash modulo this
// number, and sweeps query every shard up to it, old ones included;
// lowering it would hide the jobs in the dropped shards.
const SweepShards = 16

// Default tuning shared by all environments.
const (
	// ConsumerTimeout is the publisher's Lambda timeout.
	ConsumerTimeout = 2 * time.Minute
	// DefaultMaxReceiveCount lets a message be received this many times
	// before it moves to the DLQ.
	DefaultMaxReceiveCount = 10
)

// Retention horizons. The bucket lifecycle is derived from them, so the
// lifecycle cannot delete an object a job may still need while they hold.
const (
	// MaxScheduleAhead is how far in the future a job's scheduleAt may lie.
	MaxScheduleAhead = 365 * 24 * time.Hour
	// StaleAfterDefault is the first retention stage: a finished job
	// becomes stale (and lets go of its media) this long after it finished.
	// CONVEYOR_STALE_AFTER may lower it, never raise it (MaxStaleAfter).
	StaleAfterDefault = 168 * time.Hour
	// MaxStaleAfter is the largest CONVEYOR_STALE_AFTER the lifecycle
	// horizon allows for.
	MaxStaleAfter = StaleAfterDefault
	// DeleteAfterDefault is the second retention stage: a stale job's
	// record expires this long after the job finished. Expired uploads,
	// idempotency and webhook-delivery records are kept as long.
	DeleteAfterDefault = 720 * time.Hour
	// UploadUseWindow is how long after its upload was signed a new job
	// may name it. Afterwards the upload reads expired and is deleted once
	// no job that may still run refers to it.
	UploadUseWindow = 7 * 24 * time.Hour
	// RunMargin covers how long a job may take between its scheduled time
	// and finishing: backlog, backoff, snoozes, outages and user retries.
	RunMargin = 30 * 24 * time.Hour
	// PendingUploadMargin is how long a pending upload's record outlives
	// its presigned URL (a PUT started just before the URL expired may
	// take a while, and its S3 event must still find the record).
	PendingUploadMargin = 24 * time.Hour
)

// UploadObjectHorizon is the longest time after an upload was signed that
// a job may still need its object: named within UploadUseWindow, scheduled
// up to MaxScheduleAhead later, run within RunMargin, and retryable until
// it goes stale MaxStaleAfter after it finished.
const UploadObjectHorizon = UploadUseWindow + MaxScheduleAhead + RunMargin + MaxStaleAfter

// UploadObjectExpiryDays is the lifecycle expiration of uploaded objects in
// whole days: UploadObjectHorizon rounded up. (S3 then rounds an object's
// expiry to the next midnight UTC, which only ever adds time.)
func UploadObjectExpiryDays() int {
	const day = 24 * time.Hour
	return int((UploadObjectHorizon + day - 1) / day)
}

// For returns the definition of an environment.
func For(env job.Env) Definition { return Named(env, "conveyor-"+string(env)) }

// Named returns the definition of an environment with every resource name
// built from prefix instead of the environment's default, so that tests can
// provision isolated copies side by side on one emulator. Prefix must be a
// valid start of a bucket name (lowercase letters, digits, hyphens).
func Named(env job.Env, prefix string) Definition {
	return Definition{
		Env:      env,
		Prefix:   prefix,
		KMSAlias: "alias/" + prefix,
		EventBus: prefix,
		// The users' recurring schedules (internal/schedule).
		ScheduleGroup:     prefix,
		Table:             jobTable(env, prefix),
		EventStream:       eventStream(prefix),
		EventArchive:      EventArchive{Name: prefix + "-events", Retention: archiveRetention(env)},
		Bucket:            uploadBucket(env, prefix),
		Schedules:         sweepSchedules(prefix),
		Functions:         []string{FuncAPI, FuncAdmin, FuncUploads, FuncSchedules, FuncConfirm, FuncPublisher, FuncSystem, FuncRecovery, FuncStream, FuncRelay},
		AsyncFailureQueue: prefix + "-async-failures",
		Queues:            tierQueues(prefix),
	}
}

// jobTable returns the environment's table: its keys, its indexes, its
// TTL and stream, and the protections of the environment.
func jobTable(env job.Env, prefix string) Table {
	return Table{
		Name:         prefix,
		PartitionKey: Key{AttrPK, String},
		SortKey:      Key{AttrSK, String},
		Indexes: []Index{
			inspectorIndex(IndexByOwner, AttrOwner, true),
			{Name: IndexByOwnerUpdated, PartitionKey: Key{AttrOwner, String}, SortKey: Key{AttrUpdatedKey, String}, Include: OwnerUpdatedAttrs},
			{Name: IndexBySweep, PartitionKey: Key{AttrSweepKey, String}, SortKey: Key{AttrSweepAt, String}, Include: SweepAttrs},
			{Name: IndexByFeed, PartitionKey: Key{AttrFeedKey, String}, SortKey: Key{AttrFeedAt, String}, Include: FeedAttrs},
			inspectorIndex(IndexByStatusCreated, AttrJobStatus, true),
			inspectorIndex(IndexByTierCreated, AttrJobTier, false),
			inspectorIndex(IndexByTypeCreated, AttrJobType, false),
			inspectorIndex(IndexByErrorCreated, AttrJobError, true),
			inspectorIndex(IndexByCreated, AttrEntity, false),
		},
		TTLAttribute:        AttrExpiresAt,
		PointInTimeRecovery: env != job.Local,
		DeletionProtection:  env.Production(),
		StreamView:          StreamViewNewImage,
	}
}

// eventStream returns the mapping of the table's stream to the relay,
// which puts the jobs' events on the bus.
func eventStream(prefix string) EventStream {
	// Events must keep up with the transitions: no batching window (a
	// second of it would be a second of lag for every event at low
	// load; under load batches fill anyway), and four batches per shard
	// at once, each a job-ordered lane of the shard (see
	// ParallelizationFactor). A batch of 100 events is about ten
	// PutEvents calls.
	return EventStream{
		Function:              FuncRelay,
		BatchSize:             100,
		BatchingWindow:        time.Second,
		ParallelizationFactor: 4,
		MaxRetries:            10,
		BisectOnError:         true,
		StartingPosition:      "TRIM_HORIZON",
		Filter:                EventStreamFilter,
		FailureQueueName:      prefix + "-relay-failures",
		FailureRetention:      14 * 24 * time.Hour,
	}
}

// uploadBucket returns the bucket of the users' uploads, whose objects
// expire once no job may still need them.
func uploadBucket(env job.Env, prefix string) Bucket {
	return Bucket{
		Name:               prefix + "-uploads",
		UploadPrefix:       "uploads/",
		NotifyFunction:     FuncConfirm,
		UploadObjectExpiry: time.Duration(UploadObjectExpiryDays()) * 24 * time.Hour,
		CORSOrigins:        corsOrigins(env),
	}
}

// sweepSchedules returns the schedules of the recovery function: recovery
// every five minutes, then the release and retention tasks' parts every
// minute.
func sweepSchedules(prefix string) []Schedule {
	schedules := []Schedule{{
		Name:       prefix + "-recovery",
		Function:   FuncRecovery,
		Expression: "rate(5 minutes)",
		Interval:   5 * time.Minute,
		Task:       TaskRecover,
	}}
	// Scheduled jobs start within a minute after their time, and parked
	// jobs within a minute after their wait; finished jobs go stale, and
	// unreferenced uploads expire. Each at the rate the pipeline takes
	// jobs: every minute, each task with a run's whole budget, in its
	// Parts invocations over disjoint shards.
	for _, task := range []struct{ name, task string }{{"release", TaskRelease}, {"retention", TaskRetain}} {
		parts := Parts(task.task)
		for p := range parts {
			schedules = append(schedules, Schedule{
				Name:       fmt.Sprintf("%s-%s-%d", prefix, task.name, p),
				Function:   FuncRecovery,
				Expression: "rate(1 minute)",
				Interval:   time.Minute,
				Task:       task.task,
				Shards:     PartShards(p, parts),
			})
		}
	}
	return schedules
}

// tierQueues returns each tier's FIFO queue and DLQ, with its consumer
// and the consumer's reserved concurrency.
func tierQueues(prefix string) []Queue {
	// Weights 4:2:1 between the publish tiers; sized by the capacity model
	// of `make bench` (about 6–8 jobs/s per instance with a 300 ms external
	// API): with a third of the jobs in each tier, low binds first at about
	// 1,500 jobs/s. The publisher reserves their sum (525); with the other
	// functions an environment reserves 738 of a default account's 1,000
	// (one account per environment, as AWS recommends; environments that
	// share an account need a concurrency quota raise).
	concurrency := map[job.Tier]int{job.High: 300, job.Medium: 150, job.Low: 75, job.System: 20}
	var queues []Queue
	for _, t := range job.Tiers {
		consumer := FuncPublisher
		if t == job.System {
			consumer = FuncSystem
		}
		queues = append(queues, Queue{
			Tier:              t,
			Name:              fmt.Sprintf("%s-%s.fifo", prefix, t),
			DLQName:           fmt.Sprintf("%s-%s-dlq.fifo", prefix, t),
			VisibilityTimeout: 6 * ConsumerTimeout,
			MaxReceiveCount:   DefaultMaxReceiveCount,
			Retention:         4 * 24 * time.Hour,
			DLQRetention:      14 * 24 * time.Hour,
			BatchSize:         10,
			MaxConcurrency:    concurrency[t],
			Consumer:          consumer,
			// Many message groups (owners' slots, waiting messages'
			// own groups): high-throughput FIFO.
			DeduplicationScope:  DeduplicationScopeMessageGroup,
			FifoThroughputLimit: FifoThroughputLimitPerMessageGroup,
		})
	}
	return queues
}

func corsOrigins(env job.Env) []string {
	if env == job.Local {
		return []string{"*"}
	}
	return nil
}

// Queue returns the definition of a tier's queue.
func (d Definition) Queue(t job.Tier) (Queue, bool) {
	for _, q := range d.Queues {
		if q.Tier == t {
			return q, true
		}
	}
	return Queue{}, false
}

// archiveRetention keeps production's events 90 days, others' 14: long
// enough to replay a window after any outage a consumer could have.
func archiveRetention(env job.Env) time.Duration {
	if env.Production() {
		return 90 * 24 * time.Hour
	}
	return 14 * 24 * time.Hour
}
