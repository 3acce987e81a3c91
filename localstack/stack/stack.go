// Package stack starts the whole of Conveyor on localhost: the emulators,
// moto and DynamoDB Local (or the ones AWS_ENDPOINT_URL and
// AWS_ENDPOINT_URL_DYNAMODB name), provisioned from the one resource
// definition; the external-API simulator; and the real handlers behind the
// local runtime — the API gateway, the tier queue pollers, the S3
// notification bridge and the schedules. `make run` and the end-to-end
// tests use it alike.
package stack

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/conveyor/conveyor/internal/apiclient"
	"github.com/conveyor/conveyor/internal/aws/awsclient"
	"github.com/conveyor/conveyor/internal/aws/awsenv"
	"github.com/conveyor/conveyor/internal/aws/store"
	"github.com/conveyor/conveyor/internal/config"
	"github.com/conveyor/conveyor/internal/handler"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/resources"
	"github.com/conveyor/conveyor/localstack/emulator"
	"github.com/conveyor/conveyor/localstack/lambdaruntime"
	"github.com/conveyor/conveyor/localstack/simulator"
	"github.com/conveyor/conveyor/web"
)

// RateLimitsForLoad is a CONVEYOR_RATE_LIMITS of 10,000 requests a second
// on every plan: what the harnesses that push load through one owner's
// token (the tests' stacks, the bench, chaos, the fuzzer) run under,
// where the per-owner rate is not what they measure. The rate's own tests
// set the product's default (config.RateLimitsDefault).
const RateLimitsForLoad = "free=10000/100000,standard=10000/100000,pro=10000/100000,corporate=10000/100000,enterprise=10000/100000"

// Options configures Start; the zero value runs the functions in process
// (`make run` sets Binaries).
type Options struct {
	// Endpoints are the emulators to use. An empty Default means
	// AWS_ENDPOINT_URL (and AWS_ENDPOINT_URL_DYNAMODB), and if that is empty
	// too, a moto and a DynamoDB Local process of our own. An empty DynamoDB
	// means Default serves DynamoDB too.
	Endpoints awsclient.Endpoints
	// Prefix names the resources (default "conveyor-local"); tests pass a
	// unique one to share an emulator.
	Prefix string
	// APIAddr is the gateway's address (default from CONVEYOR_API_ADDR,
	// then 127.0.0.1:8080; "127.0.0.1:0" picks a free port).
	APIAddr string
	// SimulatorAddr is the simulator's address (default
	// CONVEYOR_SIMULATOR_ADDR, then a free port).
	SimulatorAddr string
	// Getenv reads the configuration (default os.Getenv); the stack sets
	// the resource names itself.
	Getenv func(string) string
	// Logger defaults to JSON on stderr.
	Logger *slog.Logger
	// Metrics receives the EMF metric lines (default stdout).
	Metrics io.Writer
	// Crash is the publisher's crash hook (tests).
	Crash func(point string, j *job.Job) error
	// OperationCrash is the bulk operations' worker's crash hook (tests;
	// admin.WorkerConfig.Crash). Not honoured with Binaries.
	OperationCrash func(point string, op store.Operation) error
	// PollerConcurrency is how many invocations each tier's poller runs at
	// once (default 4).
	PollerConcurrency int
	// MinPollers is how many of a tier poller's workers long-poll while
	// the queue is idle (lambdaruntime.Poller.MinPollers; default 1). The
	// bench sets 5, as Lambda's event source mapping polls.
	MinPollers int
	// Now replaces the clock (tests).
	Now func() time.Time
	// DisablePollers leaves the queues alone, so a test can drive the
	// publisher itself.
	DisablePollers bool
	// Kinds are kinds of job added to the built-in ones (in-process mode:
	// the functions' binaries know only the built-in kinds).
	Kinds []job.Kind
	// Counter, when set, counts every AWS request the running stack makes
	// (provisioning excluded; the S3 bridge's polls, which stand in for S3
	// invoking a function and have no AWS counterpart; and in binary mode
	// the functions' own).
	Counter *awsclient.Counter
	// Binaries runs every function as its own bootstrap binary (built for
	// this host) under the local Lambda Runtime API, with the environment
	// the CDK stacks give it, instead of calling its handler in process.
	// Crash is not honoured then.
	Binaries bool
	// FunctionsDir is where the binaries are built (default
	// .local/bin/functions under the module root).
	FunctionsDir string
	// Bootstraps, if set, are the binaries already built, by function name
	// (BuildFunctions): nothing is built then.
	Bootstraps map[string]string
	// FunctionOutput receives the functions' processes' output, their
	// CloudWatch Logs (default stderr).
	FunctionOutput io.Writer
	// FunctionOutputs, when set, gives each function's output a writer of
	// its own (by the definition's function name), instead of
	// FunctionOutput: `make run` tags each line with its function. In
	// process, each function's log lines at Info and above and its EMF
	// metric lines go there too (besides Logger and Metrics): what its
	// CloudWatch log group would receive, which the bench prices.
	FunctionOutputs func(function string) io.Writer
	// Observe, when set, is told each invocation's function and duration
	// (what Lambda bills: the bench prices GB-seconds from it). Streamed
	// invocations are not observed.
	Observe func(function string, took time.Duration)
	// CallLog, in binary mode, is a directory where each function records
	// every AWS access its requests need, in <function>.jsonl
	// (awsenv.VarLog), for the IAM conformance check (docs/iam.md).
	CallLog string
	// DataDir, when set, keeps the emulators' data there between runs
	// (DynamoDB Local's database, moto's state file) when the stack starts
	// its own emulators: `make run` keeps its jobs, uploads and accounts.
	// Empty: the emulators start empty and keep nothing.
	DataDir string
	// StreamAddr is, in binary mode, the address of the stream function's
	// URL (default CONVEYOR_STREAM_ADDR, then a free port). In process the
	// streams are served by the gateway.
	StreamAddr string
	// StreamTimeout is the stream function URL's timeout, as Lambda's
	// (default CONVEYOR_STREAM_TIMEOUT, then the stream function's timeout
	// in the resource definition).
	StreamTimeout time.Duration
	// StreamConcurrency is the stream function's reserved concurrency,
	// which its URL enforces as Lambda does (default the resource
	// definition's).
	StreamConcurrency int
}

// Stack is a running local Conveyor.
type Stack struct {
	APIURL string
	// StreamURL serves GET /v1/events, /v1/jobs/{id}/events and the two
	// admin streams (/v1/admin/events, /v1/admin/jobs/{id}/events): the stream
	// function's URL in binary mode (its own origin, as in AWS), the
	// gateway in process.
	StreamURL    string
	SimulatorURL string
	// Endpoints are the emulators the stack talks to.
	Endpoints awsclient.Endpoints
	Config    config.Config
	App       *App
	// Schedules fires the users' recurring schedules (polling every
	// ScheduleFirerInterval unless the pollers are disabled; tests call
	// RunOnce with their clock).
	Schedules   *lambdaruntime.ScheduleFirer
	Provisioned emulator.Provisioned
	Simulator   *simulator.Server
	// EmulatorStart is how long our own moto took to answer (0 when an
	// existing emulator was used).
	EmulatorStart time.Duration
	// DynamoDBStart is how long our own DynamoDB Local took to answer (0
	// when an existing emulator was used).
	DynamoDBStart time.Duration
	// EmulatorLogs are the files our own emulators write their output to.
	EmulatorLogs []string
	// Functions is how the stack invokes each function.
	Functions *Functions

	cancel    context.CancelFunc
	wg        sync.WaitGroup
	server    *http.Server
	streams   *http.Server
	streamURL *lambdaruntime.FunctionURL
	emulators *emulator.Emulators
	stopSim   func()
	logFiles  []*os.File
	dataDir   string
	closed    sync.Once
}

// Start brings the stack up and returns once the API answers: the
// emulators, provisioned (emulate); the configuration the functions get
// (configure); the functions and the local runtime around them (serve).
func Start(ctx context.Context, opts Options) (*Stack, error) {
	opts = opts.withDefaults()
	s := &Stack{}
	ok := false
	defer func() {
		if !ok {
			s.Close()
		}
	}()
	b, err := s.emulate(ctx, opts)
	if err != nil {
		return nil, err
	}
	if err := s.configure(b, opts); err != nil {
		return nil, err
	}
	if err := s.serve(ctx, b, opts); err != nil {
		return nil, err
	}
	if err := waitHealthy(ctx, s.APIURL); err != nil {
		return nil, err
	}
	ok = true
	return s, nil
}

// withDefaults fills the options left empty.
func (o Options) withDefaults() Options {
	if o.Getenv == nil {
		o.Getenv = os.Getenv
	}
	if o.Logger == nil {
		o.Logger = handler.NewLogger()
	}
	if o.Prefix == "" {
		o.Prefix = "conveyor-" + string(job.Local)
	}
	o.APIAddr = firstSet(o.APIAddr, o.Getenv(config.VarAPIAddr), config.Lookup(config.VarAPIAddr).Default.(string))
	o.SimulatorAddr = firstSet(o.SimulatorAddr, o.Getenv(config.VarSimulatorAddr), "127.0.0.1:0")
	o.StreamAddr = firstSet(o.StreamAddr, o.Getenv(config.VarStreamAddr), "127.0.0.1:0")
	if o.StreamTimeout == 0 {
		o.StreamTimeout = resources.FunctionSizes[resources.FuncStream].Timeout
		if v := o.Getenv(config.VarStreamTimeout); v != "" {
			if d, err := time.ParseDuration(v); err == nil && d > 0 {
				o.StreamTimeout = d
			} else {
				o.Logger.Warn("ignoring "+config.VarStreamTimeout+": not a positive duration", "value", v)
			}
		}
	}
	if o.PollerConcurrency == 0 {
		o.PollerConcurrency = 4
	}
	return o
}

func firstSet(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

// bringUp is what one step of Start hands the next.
type bringUp struct {
	def resources.Definition
	// awsCfg reaches the emulators, counted when Options.Counter is set;
	// uncountedCfg and uncounted stand in for what AWS does without
	// requests of ours (S3 invoking a function, the stream's mapping).
	awsCfg, uncountedCfg aws.Config
	clients, uncounted   awsclient.Clients
	// read is every configuration variable read, with its value.
	read map[string]string
	// api listens for the gateway.
	api net.Listener
}

// emulate finds or starts the emulators and provisions them from the
// resource definition.
func (s *Stack) emulate(ctx context.Context, opts Options) (*bringUp, error) {
	s.Endpoints = opts.Endpoints
	if s.Endpoints.Default == "" {
		s.Endpoints = awsclient.Endpoints{Default: opts.Getenv("AWS_ENDPOINT_URL"), DynamoDB: opts.Getenv("AWS_ENDPOINT_URL_DYNAMODB")}
	}
	if s.Endpoints.Default == "" {
		s.dataDir = opts.DataDir
		if err := s.startEmulators(ctx); err != nil {
			return nil, err
		}
	}
	if s.Endpoints.DynamoDB == "" {
		s.Endpoints.DynamoDB = s.Endpoints.Default
	}
	b := &bringUp{def: resources.Named(job.Local, opts.Prefix)}
	b.uncountedCfg = awsclient.ForEndpoint(s.Endpoints, awsenv.DefaultRegion)
	b.uncounted = awsclient.New(b.uncountedCfg)
	res, err := emulator.Provision(ctx, b.uncounted, b.def)
	if err != nil {
		return nil, err
	}
	s.Provisioned = res
	b.awsCfg = b.uncountedCfg
	if opts.Counter != nil {
		b.awsCfg = opts.Counter.Attach(b.awsCfg)
	}
	b.clients = awsclient.New(b.awsCfg)
	return b, nil
}

// configure starts the simulator, opens the gateway's listener and reads
// the configuration: the environment's timings, the provisioned resources'
// names, the simulator as the external API, secrets generated when unset.
func (s *Stack) configure(b *bringUp, opts Options) error {
	env := map[string]string{}
	getenv := func(k string) string {
		if v, ok := env[k]; ok {
			return v
		}
		return opts.Getenv(k)
	}
	// The OAuth client: the environment's, else one generated for this
	// run. The simulator requires exactly what the functions are given.
	if getenv(config.VarDeviantArtClientID) == "" && getenv(config.VarDeviantArtClientSecret) == "" {
		env[config.VarDeviantArtClientID] = "conveyor-local"
		env[config.VarDeviantArtClientSecret] = randomHex(16)
	}
	if getenv(config.VarJWTSecret) == "" {
		env[config.VarJWTSecret] = randomHex(32)
	}
	simOpts, err := simulator.OptionsFromEnv(getenv)
	if err != nil {
		return err
	}
	sim, simURL, stopSim, err := simulator.Start(opts.SimulatorAddr, simOpts)
	if err != nil {
		return fmt.Errorf("starting the simulator: %w", err)
	}
	s.Simulator, s.SimulatorURL, s.stopSim = sim, simURL, stopSim
	if b.api, err = net.Listen("tcp", opts.APIAddr); err != nil {
		return fmt.Errorf("listening on %s (set CONVEYOR_API_ADDR to use another address): %w", opts.APIAddr, err)
	}
	maps.Copy(env, s.Provisioned.Environ())
	env[config.VarAPIAddr] = b.api.Addr().String()
	env[config.VarDeviantArtURL] = simURL
	b.read = map[string]string{}
	cfg, err := config.From(recordingGetenv(getenv, b.read), b.def.Functions...)
	if err != nil {
		_ = b.api.Close()
		return err
	}
	s.Config = cfg
	return nil
}

// serve wires the graph, starts the functions (in process or as their
// binaries) and the local runtime that triggers them.
func (s *Stack) serve(ctx context.Context, b *bringUp, opts Options) error {
	// The local stand-ins (handler.AdminLocal, handler.APILocal): DLQs are redriven by
	// receive/send/delete (the emulator has no move tasks), no event source
	// mapping is switched (the pollers read the tier flag) and the
	// dashboard is plain HTTP.
	logger := opts.Logger
	if opts.FunctionOutputs != nil && !opts.Binaries {
		logger = slog.New(newFunctionLogs(opts.Logger.Handler(), opts.FunctionOutputs, b.def.Functions))
	}
	a, err := NewApp(s.Config, b.awsCfg, AppOptions{Logger: logger, Crash: opts.Crash, OperationCrash: opts.OperationCrash, Now: opts.Now, Metrics: opts.Metrics, Kinds: opts.Kinds,
		Mover: handler.LocalMover(b.clients.SQS, opts.Logger), Dashboard: handler.LocalDashboard})
	if err != nil {
		_ = b.api.Close()
		return err
	}
	s.App = a
	if err := s.startFunctions(ctx, b, opts); err != nil {
		_ = b.api.Close()
		return err
	}
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s.cancel = cancel
	mux := s.serveGateway(b.api, b.def, opts)
	if err := s.serveStreams(mux, b.def, opts); err != nil {
		return err
	}
	s.serveDashboardSession(mux)
	if !opts.DisablePollers {
		s.startPollers(rctx, b, opts)
	}
	s.startSchedules(rctx, b, opts)
	return nil
}

// startFunctions makes the functions' invokers: their handlers in process,
// or each its own binary under the local Runtime API.
func (s *Stack) startFunctions(ctx context.Context, b *bringUp, opts Options) error {
	emf := func(string) *handler.Emitter { return s.App.Metrics }
	if opts.FunctionOutputs != nil {
		emf = func(fn string) *handler.Emitter {
			return handler.NewEmitter(opts.FunctionOutputs(fn), string(s.Config.Env), opts.Now)
		}
	}
	fns := inProcess(s.App, emf)
	if opts.Binaries {
		var err error
		fns, err = startBinaries(ctx, binaryConfig{
			def: b.def, config: b.read, aws: awsEnviron(s.Env()), awsCfg: b.awsCfg, dir: opts.FunctionsDir, built: opts.Bootstraps,
			output: defaultOutput(opts.FunctionOutput), outputs: opts.FunctionOutputs, logger: opts.Logger, callLog: opts.CallLog,
		})
		if err != nil {
			return err
		}
	}
	if opts.Observe != nil {
		for name, inv := range fns.Invokers {
			fns.Invokers[name] = observed{name: name, fn: inv, observe: opts.Observe}
		}
	}
	s.Functions = fns
	return nil
}

// serveGateway serves the HTTP API on ln as API Gateway does, by the same
// route table (resources.HTTPRoutes): the admin, uploads and schedules
// routes to their functions, every other route to the api function. The
// operations dashboard is one of the api function's routes
// (httpapi.RegisterDashboard), as in AWS.
func (s *Stack) serveGateway(ln net.Listener, def resources.Definition, opts Options) *http.ServeMux {
	fns := map[string]http.Handler{resources.FuncAPI: lambdaruntime.Gateway(s.Functions.Invokers[resources.FuncAPI], opts.Logger)}
	for _, r := range resources.HTTPRoutes {
		fns[r.Function] = lambdaruntime.Gateway(s.Functions.Invokers[r.Function], opts.Logger)
	}
	mux := http.NewServeMux()
	// API Gateway answers preflights and sets the CORS headers in front of
	// every route, by the API's CORS configuration (resources.APICORS).
	mux.Handle("/", lambdaruntime.WithCORS(apiCORS(def), lambdaruntime.RouteByPath(resources.FunctionForPath, fns)))
	s.server = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	s.APIURL = "http://" + ln.Addr().String()
	s.wg.Go(func() {
		if err := s.server.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			opts.Logger.Error("gateway stopped", "error", err)
		}
	})
	return mux
}

// serveDashboardSession lets the dashboard sign itself in: the gateway (the
// local stack only; no such route exists in AWS) hands it an admin token
// and the stream's origin (web.SessionHandler, which refuses outside
// CONVEYOR_ENV=local).
func (s *Stack) serveDashboardSession(mux *http.ServeMux) {
	streams := s.StreamURL
	if streams == s.APIURL {
		streams = "" // the page's own origin
	}
	mux.Handle("GET "+web.SessionPath, web.SessionHandler(web.LocalSession{Env: s.Config.Env, Secret: s.Config.JWTSecret, StreamURL: streams}))
}

// serveStreams serves the stream function's URL: its own origin in binary
// mode, as in AWS; in process the gateway's origin, still through the
// stream function's handler (handler.StreamHandler).
func (s *Stack) serveStreams(mux *http.ServeMux, def resources.Definition, opts Options) error {
	concurrency := opts.StreamConcurrency
	if concurrency == 0 {
		concurrency = resources.FunctionSizes[resources.FuncStream].ReservedConcurrency
	}
	fu := &lambdaruntime.FunctionURL{Function: s.Functions.Stream, CORS: streamCORS(def), Timeout: opts.StreamTimeout,
		Concurrency: concurrency, Logger: opts.Logger}
	s.streamURL = fu
	if !opts.Binaries {
		for _, p := range []string{"/v1/events", "/v1/jobs/{id}/events", "/v1/admin/events", "/v1/admin/jobs/{id}/events"} {
			mux.Handle(p, fu) // every method: the function answers 405 with Allow, as its URL does in AWS
		}
		s.StreamURL = s.APIURL
		return nil
	}
	sln, err := net.Listen("tcp", opts.StreamAddr)
	if err != nil {
		return fmt.Errorf("listening on %s for the stream function (set CONVEYOR_STREAM_ADDR to use another address): %w", opts.StreamAddr, err)
	}
	s.streams = &http.Server{Handler: fu, ReadHeaderTimeout: 10 * time.Second}
	s.StreamURL = "http://" + sln.Addr().String()
	s.wg.Go(func() {
		if err := s.streams.Serve(sln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			opts.Logger.Error("stream function URL stopped", "error", err)
		}
	})
	return nil
}

// startPollers starts what triggers the queue and stream functions: a
// poller per tier queue (skipping paused tiers) and the table's stream
// feeding the relay, as the event source mapping does in AWS (whose
// polling of the stream costs no requests: uncounted).
func (s *Stack) startPollers(ctx context.Context, b *bringUp, opts Options) {
	res, fns := s.Provisioned, s.Functions
	for _, q := range b.def.Queues {
		p := &lambdaruntime.Poller{
			SQS: b.clients.SQS, QueueURL: res.QueueURLs[q.Tier], QueueARN: queueARN(q.Name), Region: awsenv.DefaultRegion,
			BatchSize: q.BatchSize, Concurrency: min(q.MaxConcurrency, opts.PollerConcurrency), MinPollers: opts.MinPollers,
			Timeout: resources.ConsumerTimeout, Function: fns.Invokers[q.Consumer], Logger: opts.Logger.With("tier", q.Tier),
			// A disabled mapping in AWS: Lambda stops receiving, and no
			// request of ours tells it. Locally the poller reads the flags
			// (uncounted: the product makes no such request).
			Paused: func(ctx context.Context) bool { return s.App.Admin.Paused(awsclient.Uncounted(ctx), q.Tier) },
		}
		s.wg.Go(func() { p.Run(ctx) })
	}
	sp := relayPoller(b.def, res, b.uncountedCfg, b.uncounted, fns.Invokers[b.def.EventStream.Function], opts.Logger)
	s.wg.Go(func() {
		if err := sp.Run(ctx); err != nil {
			opts.Logger.Error("the stream poller stopped", "error", err)
		}
	})
}

// startSchedules starts the S3 bridge (S3 invoking the confirm function:
// AWS makes no such requests of ours, so they are never counted), the
// tickers of the definition's schedules and the firer of the users'
// schedules; with the pollers disabled, tests fire the schedules
// themselves.
func (s *Stack) startSchedules(ctx context.Context, b *bringUp, opts Options) {
	fns := s.Functions
	bridge := &lambdaruntime.S3Bridge{SQS: b.uncounted.SQS, QueueURL: s.Provisioned.NotificationQueueURL, Function: fns.Invokers[b.def.Bucket.NotifyFunction], Logger: opts.Logger}
	s.wg.Go(func() { bridge.Run(ctx) })
	s.Schedules = &lambdaruntime.ScheduleFirer{Client: b.uncounted.Scheduler, Group: b.def.ScheduleGroup, Function: fns.Invokers[resources.FuncRecovery],
		Interval: ScheduleFirerInterval, Now: opts.Now, Logger: opts.Logger}
	if opts.DisablePollers {
		return
	}
	for _, sch := range b.def.Schedules {
		interval := s.Config.RecoveryInterval
		switch sch.Task {
		case resources.TaskRelease:
			interval = s.Config.ScheduleInterval
		case resources.TaskRetain:
			interval = s.Config.RetentionInterval
		}
		tk := &lambdaruntime.Ticker{Name: sch.Name, Interval: interval, Detail: sch.DetailJSON(), Function: fns.Invokers[sch.Function], Logger: opts.Logger}
		s.wg.Go(func() { tk.Run(ctx) })
	}
	s.wg.Go(func() { s.Schedules.Run(ctx) })
}

// startEmulators starts a moto and a DynamoDB Local of the stack's own,
// each logging to a temporary file.
func (s *Stack) startEmulators(ctx context.Context) error {
	motoLog, err := os.CreateTemp("", "conveyor-moto-*.log")
	if err != nil {
		return fmt.Errorf("creating the emulator log: %w", err)
	}
	ddbLog, err := os.CreateTemp("", "conveyor-dynamodb-local-*.log")
	if err != nil {
		_ = motoLog.Close()
		return fmt.Errorf("creating the emulator log: %w", err)
	}
	s.EmulatorLogs = []string{motoLog.Name(), ddbLog.Name()}
	s.logFiles = []*os.File{motoLog, ddbLog}
	opts := emulator.LogTo(motoLog, ddbLog)
	if s.dataDir != "" {
		opts.Moto.StateFile = filepath.Join(s.dataDir, "moto.state")
		opts.DynamoDB.DataDir = filepath.Join(s.dataDir, "dynamodb")
	}
	e, err := emulator.StartAll(ctx, opts)
	if err != nil {
		return fmt.Errorf("starting the emulators (logs: %s): %w", strings.Join(s.EmulatorLogs, ", "), err)
	}
	s.emulators, s.Endpoints = e, e.Endpoints()
	s.EmulatorStart, s.DynamoDBStart = e.Moto.Started, e.DynamoDB.Started
	return nil
}

// relayPoller is the local twin of the event stream mapping: the table's
// stream, filtered, batched and retried as resources.EventStream says.
func relayPoller(def resources.Definition, res emulator.Provisioned, cfg aws.Config, clients awsclient.Clients, fn lambdaruntime.Invoker, log *slog.Logger) *lambdaruntime.StreamPoller {
	m := def.EventStream
	return &lambdaruntime.StreamPoller{
		Streams: awsclient.Streams(cfg), StreamARN: res.TableStreamARN, Region: awsenv.DefaultRegion,
		FunctionARN: "arn:aws:lambda:" + awsenv.DefaultRegion + ":" + lambdaruntime.AccountID + ":function:" + def.Prefix + "-" + m.Function,
		BatchSize:   m.BatchSize, BatchingWindow: m.BatchingWindow, MaxRetries: m.MaxRetries, BisectOnError: m.BisectOnError,
		ParallelizationFactor: m.ParallelizationFactor, PartitionKey: def.Table.PartitionKey.Name,
		StartingPosition: m.StartingPosition, Filter: m.Filter, SQS: clients.SQS, FailureQueueURL: res.RelayFailureQueueURL,
		Function: fn, Timeout: resources.FunctionSizes[m.Function].Timeout, Logger: log.With("mapping", "event-stream"),
	}
}

// queueARN is the ARN moto gives a queue in the default account and region.
func queueARN(name string) string {
	return "arn:aws:sqs:" + awsenv.DefaultRegion + ":123456789012:" + name
}

func waitHealthy(ctx context.Context, base string) error {
	deadline := time.Now().Add(10 * time.Second)
	api := apiclient.New(base)
	for {
		err := api.Health(ctx)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the local API at %s did not become healthy: %v", base, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Env is what .local/env holds: the stack's URLs, secrets and names.
func (s *Stack) Env() map[string]string {
	m := s.Config.Environ()
	m["CONVEYOR_API_URL"] = s.APIURL
	m["CONVEYOR_STREAM_URL"] = s.StreamURL
	m["CONVEYOR_SIMULATOR_URL"] = s.SimulatorURL
	m[config.VarJWTSecret] = string(s.Config.JWTSecret)
	m[config.VarDeviantArtClientID] = s.Config.DeviantArtClientID
	m[config.VarDeviantArtClientSecret] = s.Config.DeviantArtClientSecret
	m["AWS_ENDPOINT_URL"] = s.Endpoints.Default
	m["AWS_ENDPOINT_URL_DYNAMODB"] = s.Endpoints.DynamoDB
	m["AWS_REGION"] = awsenv.DefaultRegion
	m["AWS_ACCESS_KEY_ID"] = "test"
	m["AWS_SECRET_ACCESS_KEY"] = "test"
	return m
}

// WriteEnv writes Env to path as shell-sourceable `export K='v'` lines.
func (s *Stack) WriteEnv(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	env := s.Env()
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString("# Written by `make run`; source it: . .local/env\n")
	for _, k := range keys {
		fmt.Fprintf(&b, "export %s='%s'\n", k, strings.ReplaceAll(env[k], "'", `'\''`))
	}
	return os.WriteFile(path, []byte(b.String()), 0o600)
}

// PauseEmulator freezes the stack's own emulators, moto and DynamoDB Local
// together, for d (an outage); it does nothing when the stack uses
// emulators it did not start.
func (s *Stack) PauseEmulator(d time.Duration) {
	if s.emulators != nil {
		s.emulators.Pause(d)
	}
}

// Close stops everything the stack started, in reverse order.
func (s *Stack) Close() {
	s.closed.Do(func() {
		if s.streamURL != nil {
			// Streams run on after their clients leave, as in AWS: end
			// them first, or the servers' shutdown waits for them.
			s.streamURL.Close()
		}
		if s.server != nil {
			// Shutdown leaves a connection that has not sent its first
			// request for up to 5 s (net/http treats it as idle only
			// then): past the wait, Close cuts whatever is left, or its
			// goroutine outlives the stack.
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			if err := s.server.Shutdown(ctx); err != nil {
				_ = s.server.Close()
			}
			cancel()
		}
		if s.streams != nil {
			// Open streams never end by themselves: cut them.
			_ = s.streams.Close()
		}
		if s.cancel != nil {
			s.cancel()
		}
		if s.Functions != nil {
			s.Functions.close()
		}
		s.wg.Wait()
		if s.stopSim != nil {
			s.stopSim()
		}
		_ = s.emulators.Stop()
		for _, f := range s.logFiles {
			_ = f.Close()
		}
	})
}

// ScheduleFirerInterval is how often the local runtime looks for the users'
// schedules' ticks (a tick fires at most this late).
const ScheduleFirerInterval = 5 * time.Second

// observed reports every invocation's duration to observe.
type observed struct {
	name    string
	fn      lambdaruntime.Invoker
	observe func(string, time.Duration)
}

func (o observed) Invoke(ctx context.Context, payload []byte) ([]byte, error) {
	t0 := time.Now()
	out, err := o.fn.Invoke(ctx, payload)
	o.observe(o.name, time.Since(t0))
	return out, err
}
