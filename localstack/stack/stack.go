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
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/conveyor/conveyor/internal/app"
	"github.com/conveyor/conveyor/internal/awsclient"
	"github.com/conveyor/conveyor/internal/config"
	"github.com/conveyor/conveyor/internal/handler"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/kind"
	"github.com/conveyor/conveyor/internal/resources"
	"github.com/conveyor/conveyor/localstack/emulator"
	"github.com/conveyor/conveyor/localstack/provision"
	"github.com/conveyor/conveyor/localstack/runtime"
	"github.com/conveyor/conveyor/localstack/simulator"
)

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
	// PollerConcurrency is how many invocations each tier's poller runs at
	// once (default 4).
	PollerConcurrency int
	// Now replaces the clock (tests).
	Now func() time.Time
	// DisablePollers leaves the queues alone, so a test can drive the
	// publisher itself.
	DisablePollers bool
	// Kinds are kinds of job added to the built-in ones (in-process mode:
	// the functions' binaries know only the built-in kinds).
	Kinds []kind.Kind
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
	// Observe, when set, is told each invocation's function and duration
	// (what Lambda bills: the bench prices GB-seconds from it). Streamed
	// invocations are not observed.
	Observe func(function string, took time.Duration)
	// StreamAddr is, in binary mode, the address of the stream function's
	// URL (default CONVEYOR_STREAM_ADDR, then a free port). In process the
	// streams are served by the gateway.
	StreamAddr string
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
	App       *app.App
	// Schedules fires the users' recurring schedules (polling every
	// ScheduleFirerInterval unless the pollers are disabled; tests call
	// RunOnce with their clock).
	Schedules   *runtime.ScheduleFirer
	Provisioned provision.Result
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
	emulators *emulator.Emulators
	stopSim   func()
	logFiles  []*os.File
	closed    sync.Once
}

// Start brings the stack up and returns once the API answers.
func Start(ctx context.Context, opts Options) (*Stack, error) {
	if opts.Getenv == nil {
		opts.Getenv = os.Getenv
	}
	if opts.Logger == nil {
		opts.Logger = handler.NewLogger()
	}
	if opts.Prefix == "" {
		opts.Prefix = "conveyor-" + string(resources.Local)
	}
	if opts.APIAddr == "" {
		opts.APIAddr = opts.Getenv(config.VarAPIAddr)
	}
	if opts.APIAddr == "" {
		opts.APIAddr = config.Lookup(config.VarAPIAddr).Default.(string)
	}
	if opts.SimulatorAddr == "" {
		opts.SimulatorAddr = opts.Getenv(config.VarSimulatorAddr)
	}
	if opts.SimulatorAddr == "" {
		opts.SimulatorAddr = "127.0.0.1:0"
	}
	if opts.PollerConcurrency == 0 {
		opts.PollerConcurrency = 4
	}
	s := &Stack{}
	ok := false
	defer func() {
		if !ok {
			s.Close()
		}
	}()

	// The emulators.
	s.Endpoints = opts.Endpoints
	if s.Endpoints.Default == "" {
		s.Endpoints = awsclient.Endpoints{Default: opts.Getenv("AWS_ENDPOINT_URL"), DynamoDB: opts.Getenv("AWS_ENDPOINT_URL_DYNAMODB")}
	}
	if s.Endpoints.Default == "" {
		if err := s.startEmulators(ctx); err != nil {
			return nil, err
		}
	}
	if s.Endpoints.DynamoDB == "" {
		s.Endpoints.DynamoDB = s.Endpoints.Default
	}
	awsCfg := awsclient.ForEndpoint(s.Endpoints, awsclient.DefaultRegion)
	def := resources.Named(resources.Local, opts.Prefix)
	res, err := provision.Apply(ctx, awsclient.New(awsCfg), def)
	if err != nil {
		return nil, err
	}
	s.Provisioned = res
	// The S3 bridge's queue stands in for S3 invoking the confirm function:
	// AWS makes no such requests, so they are never counted.
	uncounted := awsclient.New(awsCfg)
	awsCfgUncounted := awsCfg
	if opts.Counter != nil {
		awsCfg = opts.Counter.Attach(awsCfg)
	}
	clients := awsclient.New(awsCfg)

	// The configuration: the environment's timings, our resources.
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

	// The simulator.
	simOpts, err := simulator.OptionsFromEnv(getenv)
	if err != nil {
		return nil, err
	}
	sim, simURL, stopSim, err := simulator.Start(opts.SimulatorAddr, simOpts)
	if err != nil {
		return nil, fmt.Errorf("starting the simulator: %w", err)
	}
	s.Simulator, s.SimulatorURL, s.stopSim = sim, simURL, stopSim
	ln, err := net.Listen("tcp", opts.APIAddr)
	if err != nil {
		return nil, fmt.Errorf("listening on %s (set CONVEYOR_API_ADDR to use another address): %w", opts.APIAddr, err)
	}
	env[config.VarEnv] = string(resources.Local)
	env[config.VarTable] = def.Table.Name
	env[config.VarBucket] = def.Bucket.Name
	env[config.VarKMSKeyID] = res.KMSKeyID
	env[config.VarEventBus] = def.EventBus
	// The users' schedules live in the emulator's Scheduler; the local
	// runtime fires them at the recovery handler (ScheduleFirer).
	env[config.VarScheduleGroup] = def.ScheduleGroup
	env[config.VarScheduleTargetARN] = LocalFunctionARN(def.Prefix + "-" + resources.FuncRecovery)
	env[config.VarScheduleRoleARN] = "arn:aws:iam::123456789012:role/" + def.Prefix + "-scheduler"
	env[config.VarAPIAddr] = ln.Addr().String()
	env[config.VarDeviantArtURL] = simURL
	for _, name := range []string{config.VarJWTSecret} {
		if getenv(name) == "" {
			env[name] = randomHex(32)
		}
	}
	for t, u := range res.QueueURLs {
		env[config.VarQueueURL(t)] = u
	}
	for t, u := range res.DLQURLs {
		env[config.VarDLQURL(t)] = u
	}
	read := map[string]string{}
	cfg, err := config.From(recordingGetenv(getenv, read), def.Functions...)
	if err != nil {
		_ = ln.Close()
		return nil, err
	}
	s.Config = cfg
	a, err := app.New(cfg, awsCfg, app.Options{Logger: opts.Logger, Crash: opts.Crash, Now: opts.Now, Metrics: opts.Metrics, Kinds: opts.Kinds})
	if err != nil {
		_ = ln.Close()
		return nil, err
	}
	s.App = a

	// The functions: in process, or each its own binary.
	fns := inProcess(a)
	if opts.Binaries {
		fns, err = startBinaries(ctx, binaryConfig{
			def: def, config: read, aws: awsEnviron(s.Env()), awsCfg: awsCfg, dir: opts.FunctionsDir, built: opts.Bootstraps,
			output: defaultOutput(opts.FunctionOutput), logger: opts.Logger,
		})
		if err != nil {
			_ = ln.Close()
			return nil, err
		}
	}
	if opts.Observe != nil {
		for name, inv := range fns.Invokers {
			fns.Invokers[name] = observed{name: name, fn: inv, observe: opts.Observe}
		}
	}
	s.Functions = fns

	// The runtime.
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s.cancel = cancel
	mux := http.NewServeMux()
	mux.Handle("/", runtime.Gateway(fns.Invokers[resources.FuncAPI], opts.Logger))
	// The operations dashboard is one of the api function's routes
	// (api.RegisterDashboard), as in AWS.
	s.server = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	s.APIURL = "http://" + ln.Addr().String()
	s.wg.Go(func() {
		if err := s.server.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			opts.Logger.Error("gateway stopped", "error", err)
		}
	})
	if opts.Binaries {
		// The stream function's URL: its own origin, as in AWS.
		if opts.StreamAddr == "" {
			opts.StreamAddr = opts.Getenv(config.VarStreamAddr)
		}
		if opts.StreamAddr == "" {
			opts.StreamAddr = "127.0.0.1:0"
		}
		sln, err := net.Listen("tcp", opts.StreamAddr)
		if err != nil {
			return nil, fmt.Errorf("listening on %s for the stream function (set CONVEYOR_STREAM_ADDR to use another address): %w", opts.StreamAddr, err)
		}
		s.streams = &http.Server{Handler: &runtime.FunctionURL{Function: fns.Stream, CORS: streamCORS(def), Logger: opts.Logger}, ReadHeaderTimeout: 10 * time.Second}
		s.StreamURL = "http://" + sln.Addr().String()
		s.wg.Go(func() {
			if err := s.streams.Serve(sln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				opts.Logger.Error("stream function URL stopped", "error", err)
			}
		})
	} else {
		// In process the gateway serves the streams at its own origin, still
		// through the stream function's handler (streamfn.Handler).
		fu := &runtime.FunctionURL{Function: fns.Stream, CORS: streamCORS(def), Logger: opts.Logger}
		for _, p := range []string{"/v1/events", "/v1/jobs/{id}/events", "/v1/admin/events", "/v1/admin/jobs/{id}/events"} {
			mux.Handle("GET "+p, fu)
		}
		s.StreamURL = s.APIURL
	}
	for _, q := range def.Queues {
		if opts.DisablePollers {
			continue
		}
		arn := queueARN(q.Name)
		p := &runtime.Poller{
			SQS: clients.SQS, QueueURL: res.QueueURLs[q.Tier], QueueARN: arn, Region: awsclient.DefaultRegion,
			BatchSize: q.BatchSize, Concurrency: min(q.MaxConcurrency, opts.PollerConcurrency),
			Timeout: resources.ConsumerTimeout, Function: fns.Invokers[q.Consumer], Logger: opts.Logger.With("tier", q.Tier),
			Paused: a.Admin.PausedFunc(q.Tier),
		}
		s.wg.Go(func() { p.Run(rctx) })
	}
	// The table's stream feeds the relay, as the event source mapping does
	// in AWS (whose polling of the stream costs no requests: uncounted).
	if !opts.DisablePollers {
		sp := relayPoller(def, res, awsCfgUncounted, uncounted, fns.Invokers[def.EventStream.Function], opts.Logger)
		s.wg.Go(func() {
			if err := sp.Run(rctx); err != nil {
				opts.Logger.Error("the stream poller stopped", "error", err)
			}
		})
	}
	bridge := &runtime.S3Bridge{SQS: uncounted.SQS, QueueURL: res.NotificationQueueURL, Function: fns.Invokers[def.Bucket.NotifyFunction], Logger: opts.Logger}
	s.wg.Go(func() { bridge.Run(rctx) })

	for _, sch := range def.Schedules {
		interval := cfg.RecoveryInterval
		if sch.Task == resources.TaskRelease {
			interval = cfg.ScheduleInterval
		}
		tk := &runtime.Ticker{Name: sch.Name, Interval: interval, Detail: `{"task":"` + sch.Task + `"}`, Function: fns.Invokers[sch.Function], Logger: opts.Logger}
		if !opts.DisablePollers {
			s.wg.Go(func() { tk.Run(rctx) })
		}
	}
	s.Schedules = &runtime.ScheduleFirer{Client: uncounted.Scheduler, Group: def.ScheduleGroup, Function: fns.Invokers[resources.FuncRecovery],
		Interval: ScheduleFirerInterval, Now: opts.Now, Logger: opts.Logger}
	if !opts.DisablePollers {
		s.wg.Go(func() { s.Schedules.Run(rctx) })
	}
	if err := waitHealthy(ctx, s.APIURL); err != nil {
		return nil, err
	}
	ok = true
	return s, nil
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
	e, err := emulator.StartAll(ctx, emulator.LogTo(motoLog, ddbLog))
	if err != nil {
		return fmt.Errorf("starting the emulators (logs: %s): %w", strings.Join(s.EmulatorLogs, ", "), err)
	}
	s.emulators, s.Endpoints = e, e.Endpoints()
	s.EmulatorStart, s.DynamoDBStart = e.Moto.Started, e.DynamoDB.Started
	return nil
}

// relayPoller is the local twin of the event stream mapping: the table's
// stream, filtered, batched and retried as resources.EventStream says.
func relayPoller(def resources.Definition, res provision.Result, cfg aws.Config, clients awsclient.Clients, fn runtime.Invoker, log *slog.Logger) *runtime.StreamPoller {
	m := def.EventStream
	return &runtime.StreamPoller{
		Streams: awsclient.Streams(cfg), StreamARN: res.TableStreamARN, Region: awsclient.DefaultRegion,
		FunctionARN: "arn:aws:lambda:" + awsclient.DefaultRegion + ":" + runtime.AccountID + ":function:" + def.Prefix + "-" + m.Function,
		BatchSize:   m.BatchSize, BatchingWindow: m.BatchingWindow, MaxRetries: m.MaxRetries, BisectOnError: m.BisectOnError,
		StartingPosition: m.StartingPosition, Filter: m.Filter, SQS: clients.SQS, FailureQueueURL: res.RelayFailureQueueURL,
		Function: fn, Timeout: resources.FunctionSizes[m.Function].Timeout, Logger: log.With("mapping", "event-stream"),
	}
}

// queueARN is the ARN moto gives a queue in the default account and region.
func queueARN(name string) string {
	return "arn:aws:sqs:" + awsclient.DefaultRegion + ":123456789012:" + name
}

func waitHealthy(ctx context.Context, base string) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get(base + "/healthz")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
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
	m["AWS_REGION"] = awsclient.DefaultRegion
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
		if s.server != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_ = s.server.Shutdown(ctx)
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

// LocalFunctionARN is the ARN a function named name would have in the
// emulator's account (schedules name their target by it).
func LocalFunctionARN(name string) string {
	return "arn:aws:lambda:us-east-1:123456789012:function:" + name
}

// ScheduleFirerInterval is how often the local runtime looks for the users'
// schedules' ticks (a tick fires at most this late).
const ScheduleFirerInterval = 5 * time.Second

// observed reports every invocation's duration to observe.
type observed struct {
	name    string
	fn      runtime.Invoker
	observe func(string, time.Duration)
}

func (o observed) Invoke(ctx context.Context, payload []byte) ([]byte, error) {
	t0 := time.Now()
	out, err := o.fn.Invoke(ctx, payload)
	o.observe(o.name, time.Since(t0))
	return out, err
}
