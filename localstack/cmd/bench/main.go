// Command bench measures Conveyor end to end on this machine: it starts
// its own emulators (moto and DynamoDB Local), simulator and local stack on free ports (safe beside a
// running `make run`), pushes N jobs through the real handlers and runtime,
// counts every AWS request by service and operation, and prints AWS
// requests per job, $ per million jobs, submit and end-to-end latency
// percentiles, throughput, the emulator's own floor, and the size of every
// bootstrap — a table, then one JSON line.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"runtime/pprof"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/conveyor/conveyor/internal/accounts"
	"github.com/conveyor/conveyor/internal/apiclient"
	"github.com/conveyor/conveyor/internal/aws/awsclient"
	"github.com/conveyor/conveyor/internal/aws/awsenv"
	"github.com/conveyor/conveyor/internal/aws/store"
	"github.com/conveyor/conveyor/internal/config"
	"github.com/conveyor/conveyor/internal/httpapi"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/publish"
	"github.com/conveyor/conveyor/internal/recovery"
	"github.com/conveyor/conveyor/internal/relay"
	"github.com/conveyor/conveyor/internal/resources"
	"github.com/conveyor/conveyor/internal/stream"
	"github.com/conveyor/conveyor/internal/uploads"
	"github.com/conveyor/conveyor/internal/webhook"
	"github.com/conveyor/conveyor/localstack/emulator"
	"github.com/conveyor/conveyor/localstack/lambdaruntime"
	"github.com/conveyor/conveyor/localstack/simulator"
	"github.com/conveyor/conveyor/localstack/stack"
)

// price is the list price of one request in USD, us-east-1, with its source
// and the day it was read. DynamoDB prices assume each request consumes one
// capacity unit (items ≤ 1 KB write / 4 KB read; a transaction counts its items twice, their index entries once);
// Conveyor's job items are 2–4 KB, so writes are undercounted by that factor.
type price struct {
	usd    float64
	source string
}

var prices = map[string]price{
	"DynamoDB.write": {0.625 / 1e6, "aws.amazon.com/dynamodb/pricing/on-demand, 2026-11-28: $0.625 per million write request units"},
	"DynamoDB.read":  {0.125 / 1e6, "aws.amazon.com/dynamodb/pricing/on-demand, 2026-11-28: $0.125 per million read request units"},
	"SQS":            {0.50 / 1e6, "aws.amazon.com/sqs/pricing, 2026-11-28: FIFO $0.50 per million requests"},
	"S3.write":       {0.005 / 1e3, "aws.amazon.com/s3/pricing, 2026-11-28: PUT/COPY/POST/LIST $0.005 per 1,000"},
	"S3.read":        {0.0004 / 1e3, "aws.amazon.com/s3/pricing, 2026-11-28: GET/HEAD $0.0004 per 1,000"},
	"KMS":            {0.03 / 1e4, "aws.amazon.com/kms/pricing, 2026-11-28: $0.03 per 10,000 requests"},
	"EventBridge":    {1.00 / 1e6, "aws.amazon.com/eventbridge/pricing, 2026-11-28: $1.00 per million events"},
	"Lambda":         {0.20 / 1e6, "aws.amazon.com/lambda/pricing, 2026-11-28: $0.20 per million requests"},
	"Lambda.GBs":     {0.0000133334, "aws.amazon.com/lambda/pricing, 2026-11-28: arm64 $0.0000133334 per GB-second (first 7.5 billion GB-s a month)"},
	"APIGateway":     {1.00 / 1e6, "aws.amazon.com/api-gateway/pricing, 2026-11-28: HTTP API $1.00 per million requests (first 300 million a month)"},
	"Scheduler":      {1.00 / 1e6, "aws.amazon.com/eventbridge/pricing, 2026-11-28: Scheduler $1.00 per million invocations (after 14 million free a month)"},
}

// dynamoDBUSD prices the capacity units DynamoDB reported (per job when
// divided by per), in USD per million.
func dynamoDBUSD(units map[string]float64, per float64) float64 {
	return (units["read"]*prices["DynamoDB.read"].usd + units["write"]*prices["DynamoDB.write"].usd) / per * 1e6
}

// priceOf maps "Service.Operation" to its price class and units (for
// DynamoDB a stand-in only: its bill uses the measured capacity units).
func priceOf(op string) (string, float64) {
	svc, name, _ := strings.Cut(op, ".")
	switch svc {
	case "DynamoDB":
		switch name {
		case "GetItem", "Query", "BatchGetItem", "Scan", "DescribeTable":
			return "DynamoDB.read", 1
		case "TransactWriteItems":
			return "DynamoDB.write", 4 // two items, transactional: 2 units each
		case "TransactGetItems":
			return "DynamoDB.read", 2
		default:
			return "DynamoDB.write", 1
		}
	case "SQS":
		return "SQS", 1
	case "S3":
		if name == "PutObject" || name == "CopyObject" || name == "ListObjectsV2" {
			return "S3.write", 1
		}
		return "S3.read", 1
	case "KMS":
		return "KMS", 1
	case "EventBridge":
		// Billed per event, priced from the events per job (bill).
		return "", 0
	}
	return "", 0
}

type result struct {
	Jobs               int                `json:"jobs"`
	RequestsPerJob     map[string]float64 `json:"requests_per_job"`
	RequestsTotal      float64            `json:"requests_per_job_total"`
	USDPerMillion      float64            `json:"usd_per_million_jobs"`
	SubmitP50          float64            `json:"submit_p50_ms"`
	SubmitP95          float64            `json:"submit_p95_ms"`
	E2EP50             float64            `json:"e2e_p50_ms"`
	E2EP95             float64            `json:"e2e_p95_ms"`
	Throughput         float64            `json:"throughput_jobs_per_s"`
	OfferedRate        float64            `json:"offered_jobs_per_s,omitempty"`
	BootstrapBytes     map[string]int64   `json:"bootstrap_bytes"`
	FloorPutItemP50    float64            `json:"floor_putitem_p50_ms"`
	FloorSendP50       float64            `json:"floor_sendmessage_p50_ms"`
	FloorReceiveP50    float64            `json:"floor_receivemessage_p50_ms"`
	SubmitP95OverFloor float64            `json:"submit_p95_over_floor_putitem_p50"`
	// FloorSubmitTxP50 is a submission-shaped TransactWriteItems alone on
	// the idle emulator; SubmitP95OverOwnFloor is submit p95 ÷ (that +
	// SendMessage's floor): the floor of the requests a submission makes.
	FloorSubmitTxP50      float64 `json:"floor_submit_tx_p50_ms"`
	SubmitP95OverOwnFloor float64 `json:"submit_p95_over_own_floor"`
	EmulatorStartMs       float64 `json:"emulator_start_ms"`
	DynamoDBStartMs       float64 `json:"dynamodb_local_start_ms"`
	// WebhookLagP50/P95: the job.succeeded transition (the event's time)
	// to its signed delivery at a local receiver (a per-user endpoint).
	WebhookLagP50 float64 `json:"event_lag_webhook_ms_p50"`
	WebhookLagP95 float64 `json:"event_lag_webhook_ms_p95"`
	// SSEReadsPerIdleClientPerMin: DynamoDB reads an idle SSE stream
	// makes, counted on a stream server of its own.
	SSEReadsPerIdleClientPerMin float64 `json:"sse_reads_per_idle_client_per_min"`
	// EventLagBusP50/P95: an event's time (the transition) to its put on
	// the bus by the relay, as a queue subscribed to the bus sees it.
	EventLagBusP50 float64 `json:"event_lag_bus_ms_p50"`
	EventLagBusP95 float64 `json:"event_lag_bus_ms_p95"`
	// EventArchive: the bus's archive was in place (-event-archive); moto
	// makes each archived event cost about 4 ms of its one process.
	EventArchive bool `json:"event_archive"`
	// The whole bill (requests, Lambda GB-seconds, API Gateway, events,
	// the upload each job needs, fixed schedules amortised), at the
	// simulator latency of -sim-latency and at zero latency.
	USDPerMillionTotal     float64 `json:"usd_per_million_jobs_total"`
	USDPerMillionTotalZero float64 `json:"usd_per_million_jobs_total_zero_latency"`
	USDPerMillionTotalAWS  float64 `json:"usd_per_million_jobs_total_at_aws_latencies"`
	// USDPerMillionPipelineAWS is the same without the client's own calls
	// (its status reads, its explicit confirm): what every job costs.
	USDPerMillionPipelineAWS float64            `json:"usd_per_million_jobs_pipeline_at_aws_latencies"`
	Bill                     map[string]float64 `json:"bill_usd_per_million_jobs"`
	// BillSources is the price source and date behind each line of the
	// bill; BillEnv the environment whose configuration it prices
	// (-bill-env: log retention, tracing, archive retention, PITR).
	BillSources map[string]string `json:"bill_sources"`
	BillEnv     string            `json:"bill_env"`
	// RequestsByFunction is RequestsPerJob by "<function> Service.Operation"
	// (the function whose invocation made each request; " …" none: the
	// local runtime's own, such as the pollers' receives and deletes,
	// which Lambda's event source mappings make in AWS).
	RequestsByFunction map[string]float64 `json:"requests_per_job_by_function"`
	// ESMPollers is -esm-pollers: the workers per tier queue that
	// long-poll while it is idle.
	ESMPollers   int                `json:"esm_pollers"`
	BillZero     map[string]float64 `json:"bill_usd_per_million_jobs_zero_latency"`
	SimLatencyMs float64            `json:"sim_latency_ms"`
	InitMs       map[string]float64 `json:"init_ms,omitempty"`
	// ColdFirstResponseMs: process start → the first invocation's answer
	// posted (medians), per function and hello world. What a cold request
	// waits for: work deferred past init (the JWT key's background read)
	// moves from init_ms to here, it is not saved.
	ColdFirstResponseMs map[string]float64 `json:"cold_first_response_ms,omitempty"`
	CapacityJobsPerS    float64            `json:"capacity_jobs_per_s"`
	CapacityBottleneck  string             `json:"capacity_bottleneck"`
	Capacity            []limit            `json:"capacity"`
	LoadAverage         string             `json:"load_average"`
	// IdleReceivesPerJob: receives that found their queue empty, per job
	// (left out of RequestsPerJob; an event source mapping's idle long
	// polls, billed as a fixed cost).
	IdleReceivesPerJob float64 `json:"idle_receives_per_job"`
	// LateEvents: the event lags that were cut at the bench's limit (the
	// relay fell behind); their percentiles are lower bounds.
	LateEvents []string `json:"late_events,omitempty"`
	// ClientReadsPerJob: the requests the client's -reads-per-job status
	// reads made, per job (left out of RequestsPerJob, priced in the bill).
	ClientReadsPerJob map[string]float64 `json:"client_reads_requests_per_job"`
	// DynamoDBUnitsPerJob: the capacity units the pipeline's requests
	// consumed per job, as DynamoDB reported them (ReturnConsumedCapacity
	// INDEXES): "read", "write", and the write units by "write table" and
	// "write <index>". The bill prices these, not requests.
	DynamoDBUnitsPerJob map[string]float64 `json:"dynamodb_units_per_job"`
	// CPUMsPerJob: the processor time each part of the local stack spent per
	// job while the jobs ran (DynamoDB Local, moto, and this Go process: the
	// gateway, every function's handler in process, the simulator and the
	// bench's clients), from /proc and getrusage; empty where unreadable.
	CPUMsPerJob map[string]float64 `json:"cpu_ms_per_job,omitempty"`
	// Backlog*: -backlog jobs submitted to paused tiers, then resumed at
	// once: the requests per job of a backlog draining (receive and
	// delete batches full), its drain rate from the resume.
	BacklogJobs          int                `json:"backlog_jobs,omitempty"`
	BacklogRequests      map[string]float64 `json:"backlog_requests_per_job,omitempty"`
	BacklogRequestsTotal float64            `json:"backlog_requests_per_job_total,omitempty"`
	BacklogDrainPerS     float64            `json:"backlog_drain_jobs_per_s,omitempty"`
	BacklogFirstStartMs  float64            `json:"backlog_first_start_ms,omitempty"`
	// Noisy is the noisy-neighbour figure (-noisy jobs; 0: skipped).
	Noisy *noisyResult `json:"noisy_neighbour,omitempty"`
	// RateCheck is the per-owner rate check's cost (docs/limits.md).
	RateCheck *rateResult `json:"rate_check,omitempty"`
}

// cpuSample is the processor time used so far by each part of the stack.
type cpuSample map[string]time.Duration

// cpuNow samples the emulators' processes and this one.
func cpuNow(emu *emulator.Emulators) cpuSample {
	c := cpuSample{}
	if d, err := emu.DynamoDB.CPUTime(); err == nil {
		c["dynamodb_local"] = d
	}
	if d, err := emu.Moto.CPUTime(); err == nil {
		c["moto"] = d
	}
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		c["go"] = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	return c
}

// perJob is the processor time per job, in ms, spent between before and c.
func (c cpuSample) perJob(before cpuSample, n int) map[string]float64 {
	out := map[string]float64{}
	for k, d := range c {
		if b, ok := before[k]; ok {
			out[k] = float64(d-b) / float64(time.Millisecond) / float64(n)
		}
	}
	return out
}

func main() {
	n := flag.Int("jobs", 1000, "jobs to push through")
	conc := flag.Int("concurrency", 16, "concurrent submitters")
	rate := flag.Float64("rate", 0, "offered load in jobs/s, submitted open loop whatever the answers' latency (0: as fast as -concurrency submitters go)")
	users := flag.Int("users", 20, "distinct users (each with a connected account and one upload)")
	skipBuild := flag.Bool("skip-build", false, "do not build the bootstraps (sizes and cold starts)")
	simLatency := flag.Duration("sim-latency", 300*time.Millisecond, "external-API latency for the bill's second run (the simulator's latencyMs)")
	latencyJobs := flag.Int("latency-jobs", 200, "jobs pushed through with -sim-latency for its bill")
	reads := flag.Int("reads-per-job", 2, "GET /v1/jobs/{id} a client makes per job (priced in the bill)")
	coldRuns := flag.Int("coldstart-runs", 15, "interleaved cold starts per function and for the hello world")
	coldBase := flag.String("coldstart-baseline", "", "a git revision whose functions are built too and started in the same interleaved cold-start runs, reported as <name>@<revision> (before/after on one machine in one run)")
	archive := flag.Bool("event-archive", true, "keep the bus's event archive, as deployed (false: delete it from the bench's emulator before the jobs, to measure the event lag without moto's cost of archiving)")
	noisy := flag.Int("noisy", 100, "noisy-neighbour phase: jobs a free owner queues at once while another free owner's 10 jobs are timed (0: skip)")
	backlog := flag.Int("backlog", 200, "jobs submitted while the job tiers are paused, then drained at once: a backlog's requests per job (full receive and delete batches), printed apart (0: skip)")
	warmup := flag.Bool("warmup", true, "push one unmeasured job per user first (each account's token refreshed, as in a running system)")
	pollers := flag.Int("esm-pollers", 5, "workers per tier queue that long-poll even while it is idle (Lambda's event source mapping keeps five; 1: the local runtime's default, whose receives gather more messages than AWS's)")
	billEnvName := flag.String("bill-env", string(job.ProdEN), "the cloud environment whose deploy configuration (infra/env/<env>.json: log retention, tracing sampling) and resource definition (archive retention, PITR) the bill prices")
	rateOnly := flag.Bool("rate-check-only", false, "measure the per-owner rate check alone (write units and time a request) and stop")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the bench process (the stack's handlers, pollers and gateway run in it) to this file")
	flag.Parse()
	be, err := job.ParseEnv(*billEnvName)
	var bc billEnv
	if err == nil {
		bc, err = readBillEnv(be)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench: -bill-env: %v\n", err)
		os.Exit(2)
	}
	o := opts{billEnv: bc, pollers: *pollers, n: *n, conc: *conc, rate: *rate, users: *users, skipBuild: *skipBuild, simLatency: *simLatency, latencyJobs: *latencyJobs, reads: *reads, coldRuns: *coldRuns, coldBase: *coldBase, warmup: *warmup, archive: *archive, backlog: *backlog, noisy: *noisy, rateOnly: *rateOnly}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			fmt.Fprintf(os.Stderr, "bench: %v\n", err)
			os.Exit(1)
		}
		goruntime.SetMutexProfileFraction(5)
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintf(os.Stderr, "bench: %v\n", err)
			os.Exit(1)
		}
		defer func() {
			pprof.StopCPUProfile()
			f.Close()
			if m, err := os.Create(*cpuProfile + ".mutex"); err == nil {
				pprof.Lookup("mutex").WriteTo(m, 0)
				m.Close()
			}
		}()
	}
	if err := run(o); err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		pprof.StopCPUProfile()
		os.Exit(1)
	}
}

type opts struct {
	n, conc, users     int
	skipBuild          bool
	simLatency         time.Duration
	latencyJobs, reads int
	coldRuns           int
	coldBase           string
	warmup             bool
	archive            bool
	rate               float64
	backlog            int
	noisy              int
	// billEnv is the environment the bill prices (-bill-env).
	billEnv billEnv
	// pollers is -esm-pollers.
	pollers int
	// rateOnly is -rate-check-only.
	rateOnly bool
}

// uploadSide is the side in pixels of the PNG each bench user uploads.
const uploadSide = 64

func progress(format string, args ...any) { fmt.Fprintf(os.Stderr, "bench: "+format+"\n", args...) }

// durations records every invocation's duration by function.
type durations struct {
	mu sync.Mutex
	by map[string][]time.Duration
}

func (d *durations) observe(fn string, took time.Duration) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.by[fn] = append(d.by[fn], took)
}

// take returns what was recorded since the last take.
func (d *durations) take() map[string][]time.Duration {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := d.by
	d.by = map[string][]time.Duration{}
	return out
}

// phase is one batch of jobs pushed through and what it cost.
type phase struct {
	n      int
	jobIDs []string
	// pipeline is every request the jobs made, from submit until the
	// requests stop after the last finish (the relay's last events), the
	// bill's requests: without the receives that found the queue empty
	// (the event source mappings' idle long polls: time-bound, billed as
	// a fixed cost).
	pipeline map[string]int
	// byFunction is pipeline by "<function> Service.Operation" (the
	// function whose invocation made the request; "" for none).
	byFunction map[string]int
	// pipelineUnits are the DynamoDB capacity units of pipeline
	// (awsclient.Counter.Units).
	pipelineUnits map[string]float64
	// idle is the empty receives the pipeline's counts leave out.
	idle      int
	durations map[string][]time.Duration
	// logs is the bytes each function wrote to its log group; items the
	// billed items of the requests (awsclient.Counter.Items: the events
	// put on the bus).
	logs       map[string]int64
	items      map[string]int
	submitLat  []time.Duration
	e2e        []time.Duration
	throughput float64
	events     float64 // events per job
	tiers      map[string]int
	calls      float64 // external API calls per job
	latency    time.Duration
	// drainRate is the jobs a second from the moment the tiers were
	// resumed (a backlog phase: env.held set) to the last finish.
	drainRate float64
	// firstStart is how long after the resume the first job started.
	firstStart time.Duration
}

// env is the running bench: stack, users, counters.
type env struct {
	s       *stack.Stack
	counter *awsclient.Counter
	durs    *durations
	logs    *logBytes
	poll    *store.Store
	tokens  []string
	uploads []string
	conc    int
	// rate, when above 0, submits that many jobs a second (open loop)
	// instead of as fast as conc submitters go.
	rate float64
	// held, when set, holds the submitted jobs back (the tiers paused) and
	// is called once all are submitted to let them go; push measures the
	// drain from then.
	held func(context.Context) error
}

// bench is one run of the benchmark: its options, the result it fills, the
// stack's emulators and the bench's own clients, and the phases measured.
type bench struct {
	o   opts
	res result
	emu *emulator.Emulators
	// floorCfg and plain are the bench's own clients, which no counter
	// counts.
	floorCfg aws.Config
	plain    awsclient.Clients
	e        *env
	// hostBins are the host binaries the cold starts run (nil: not built).
	hostBins map[string]string
	// hooks and tap receive the measured jobs' webhooks and bus events.
	hooks *hookReceiver
	tap   *busTap
	// upload and confirm are the users' uploads and the client's explicit
	// confirms of them; main the jobs at simulator latency 0, reads the
	// client's status reads of them, slow the jobs at -sim-latency.
	upload, confirm, main, reads, slow phase
	// bi is what the bill prices beside a phase's requests.
	bi billInputs
}

// run builds the bootstraps, starts the emulators and the stack, measures
// every phase in turn and prints the report.
func run(o opts) error {
	ctx := context.Background()
	b := &bench{o: o}
	b.res.Jobs = o.n
	b.res.ESMPollers = o.pollers
	b.res.LoadAverage = loadAverage()
	if !o.skipBuild {
		remove, err := b.buildBinaries()
		if err != nil {
			return err
		}
		defer remove()
	}
	progress("starting private emulators (moto, DynamoDB Local), simulator and stack")
	emu, err := emulator.StartAll(ctx, emulator.AllOptions{})
	if err != nil {
		return err
	}
	defer emu.Stop()
	s, err := b.startStack(ctx, emu)
	if err != nil {
		return err
	}
	defer s.Close()

	res := &b.res
	if res.RateCheck, err = b.rateCheck(ctx, s.Config.Table); err != nil {
		return err
	}
	if o.rateOnly {
		w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
		res.RateCheck.print(w)
		return w.Flush()
	}
	progress("measuring the emulator's floor")
	if res.FloorPutItemP50, res.FloorSendP50, res.FloorReceiveP50, res.FloorSubmitTxP50, err = floor(ctx, b.plain, s); err != nil {
		return err
	}
	if err := b.prepareUsers(ctx); err != nil {
		return err
	}
	if err := b.measureUploads(ctx); err != nil {
		return err
	}

	b.hooks = newHookReceiver()
	hookSrv := httptest.NewServer(b.hooks)
	defer hookSrv.Close()
	if err := b.subscribeWebhook(ctx, hookSrv.URL); err != nil {
		return err
	}
	stopTap, err := b.startTap(ctx)
	if err != nil {
		return err
	}
	defer stopTap()

	if err := b.measureJobs(ctx); err != nil {
		return err
	}
	if err := b.measureLaterPhases(ctx); err != nil {
		return err
	}
	b.sizeCapacity()
	if err := b.measureColdStarts(ctx); err != nil {
		return err
	}
	report(b.res, b.main.pipeline, o.n, b.main, b.slow, b.upload)
	return nil
}

// buildBinaries builds the bootstraps (their sizes in the result), the
// host binaries the cold starts run and, with -coldstart-baseline, the
// baseline revision's functions; remove deletes the host binaries.
func (b *bench) buildBinaries() (remove func(), err error) {
	progress("building the bootstraps (linux/arm64)")
	sizes, err := buildBootstraps()
	if err != nil {
		return nil, err
	}
	b.res.BootstrapBytes = sizes
	hostBins, err := buildHostBinaries()
	if err != nil {
		return nil, err
	}
	hostDir := filepath.Dir(filepath.Dir(hostBins["hello"]))
	remove = func() { os.RemoveAll(hostDir) }
	if o := b.o; o.coldBase != "" && o.coldRuns > 0 {
		progress("building the functions of %s for the cold-start baseline", o.coldBase)
		base, err := buildBaseline(o.coldBase)
		if err != nil {
			remove()
			return nil, err
		}
		for name, bin := range base.bins {
			hostBins[name+"@"+o.coldBase] = bin
		}
		remove = func() {
			os.RemoveAll(base.dir)
			os.RemoveAll(hostDir)
		}
	}
	b.hostBins = hostBins
	return remove, nil
}

// startStack makes the bench's own clients and the counters and starts
// the local stack on emu, every AWS request it makes counted.
func (b *bench) startStack(ctx context.Context, emu *emulator.Emulators) (*stack.Stack, error) {
	b.emu = emu
	b.res.EmulatorStartMs, b.res.DynamoDBStartMs = ms(emu.Moto.Started), ms(emu.DynamoDB.Started)
	// The bench's own clients, which no counter counts.
	b.floorCfg = awsclient.ForEndpoint(emu.Endpoints(), awsenv.DefaultRegion)
	b.plain = awsclient.New(b.floorCfg)
	counter := awsclient.NewCounter()
	counter.LabelWith(lambdaruntime.FunctionOf)
	// DynamoDB Local counts a transaction's items of equal size once: each
	// transaction is priced item by item, by DynamoDB's rules, instead.
	counter.PriceTransactions(awsclient.NewTxPricer(b.plain.DynamoDB))
	durs := &durations{by: map[string][]time.Duration{}}
	logs := newLogBytes()
	// The per-owner rate is measured apart (ratePhase): the pipeline's
	// figures are those of owners under it.
	cfgEnv := map[string]string{"CONVEYOR_HEARTBEAT_INTERVAL": "30s", config.VarRateLimits: stack.RateLimitsForLoad}
	s, err := stack.Start(ctx, stack.Options{
		Endpoints: emu.Endpoints(), APIAddr: "127.0.0.1:0", Prefix: "bench",
		Getenv: func(k string) string { return cfgEnv[k] }, Counter: counter, PollerConcurrency: 8, MinPollers: b.o.pollers, Observe: durs.observe, FunctionOutputs: logs.writer,
		Logger: slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})), Metrics: io.Discard,
	})
	if err != nil {
		return nil, err
	}
	b.e = &env{s: s, counter: counter, durs: durs, logs: logs, conc: b.o.conc, rate: b.o.rate,
		poll: store.New(b.plain.DynamoDB, s.Config.Table, nil)}
	return s, nil
}

// prepareUsers mints each bench user's token and connects its account.
func (b *bench) prepareUsers(ctx context.Context) error {
	e, s := b.e, b.e.s
	progress("preparing %d users", b.o.users)
	e.tokens = make([]string, b.o.users)
	e.uploads = make([]string, b.o.users)
	for i := range b.o.users {
		tok, err := httpapi.Mint(s.Config.JWTSecret, httpapi.Claims{Subject: fmt.Sprintf("bench-u%d", i), Role: httpapi.RoleUser, Plan: []string{"free", "pro", "enterprise"}[i%3], ExpiresAt: time.Now().Add(2 * time.Hour)})
		if err != nil {
			return err
		}
		e.tokens[i] = tok
		if err := apiclient.New(s.APIURL, apiclient.WithToken(tok)).Connect(ctx, accounts.ConnectRequest{Provider: "deviantart", RefreshToken: fmt.Sprintf("rt-bench-%d-%d", i, time.Now().UnixNano())}); err != nil {
			return err
		}
	}
	return nil
}

// measureUploads gives each user one upload, measured: a real job needs
// its own. The pipeline's part is the sign, the PUT and the S3 event's
// confirm; the client's explicit confirm (POST /v1/uploads/{id}/confirm)
// is the client's choice, measured apart: whichever of the two comes first
// checks the object, the other finds the upload settled.
func (b *bench) measureUploads(ctx context.Context) error {
	e, s, counter := b.e, b.e.s, b.e.counter
	counter.Reset()
	e.durs.take()
	e.logs.take()
	for i := range b.o.users {
		c := apiclient.New(s.APIURL, apiclient.WithToken(e.tokens[i]))
		data := simulator.PNG(uploadSide)
		sg, err := c.SignUpload(ctx, uploads.SignRequest{Filename: "image.png", ContentType: "image/png", Size: int64(len(data))})
		if err != nil {
			return err
		}
		if err := c.PutObject(ctx, sg, data); err != nil {
			return err
		}
		e.uploads[i] = sg.UploadID
	}
	for _, id := range e.uploads {
		if err := e.confirmed(ctx, id); err != nil {
			return err
		}
	}
	e.settle()
	b.upload = phase{n: b.o.users, pipeline: counter.Snapshot(), pipelineUnits: counter.Units(), items: counter.Items(), durations: e.durs.take(), logs: e.logs.take()}
	for op, c := range counter.Empty() {
		b.upload.pipeline[op] -= c
	}
	var err error
	b.confirm, err = e.client(b.o.users, resources.FuncUploads, func() error {
		for i, id := range e.uploads {
			if _, err := apiclient.New(s.APIURL, apiclient.WithToken(e.tokens[i])).ConfirmUpload(ctx, id); err != nil {
				return err
			}
		}
		return nil
	})
	return err
}

// subscribeWebhook subscribes url as the first user's endpoint for
// job.succeeded: its jobs measure the webhook lag, and the request mix
// stays mostly that of jobs whose owner has no endpoint (a delivery adds a
// system-tier message and its writes).
func (b *bench) subscribeWebhook(ctx context.Context, url string) error {
	if _, err := apiclient.New(b.e.s.APIURL, apiclient.WithToken(b.e.tokens[0])).CreateWebhook(ctx, webhook.CreateRequest{URL: url, Events: []string{"job.succeeded"}}); err != nil {
		return fmt.Errorf("registering a webhook endpoint: %w", err)
	}
	return nil
}

// startTap subscribes a tap queue to the bus, deletes the bus's archive
// without -event-archive, and drains the tap until stop. The tap is
// drained while the jobs run, by several readers: left to fill, the
// emulator's delivery into it slows with its depth (moto's SQS send is
// O(queue)), which would be measured as the relay's lag — one reader (ten
// messages a receive) fell behind a relay that keeps up.
func (b *bench) startTap(ctx context.Context) (stop func(), err error) {
	s := b.e.s
	tapURL, err := tapBus(ctx, b.plain, s)
	if err != nil {
		return nil, err
	}
	b.res.EventArchive = b.o.archive
	if !b.o.archive {
		name := s.Provisioned.Definition.EventArchive.Name
		if _, err := b.plain.EventBridge.DeleteArchive(ctx, &eventbridge.DeleteArchiveInput{ArchiveName: aws.String(name)}); err != nil {
			return nil, fmt.Errorf("deleting the event archive %s: %w", name, err)
		}
	}
	b.tap = newBusTap()
	tapCtx, stop := context.WithCancel(ctx)
	for range tapReaders {
		go b.tap.drain(tapCtx, b.plain, tapURL)
	}
	return stop, nil
}

// measureJobs pushes the measured jobs at simulator latency 0 (after the
// warm-up), then measures their status reads, event lags, requests and
// bill.
func (b *bench) measureJobs(ctx context.Context) error {
	if err := b.warmUp(ctx); err != nil {
		return err
	}
	if err := b.pushMain(ctx); err != nil {
		return err
	}
	if err := b.readStatuses(ctx); err != nil {
		return err
	}
	if err := b.measureEventLags(ctx); err != nil {
		return err
	}
	b.priceRequests()
	return b.billAtZeroLatency(ctx)
}

// measureLaterPhases runs the phases after the measured jobs, each when its
// flag asks: a backlog, a noisy neighbour, the jobs at -sim-latency.
func (b *bench) measureLaterPhases(ctx context.Context) error {
	if b.o.backlog > 0 {
		if err := b.e.backlogPhase(ctx, b.o.backlog, &b.res); err != nil {
			return err
		}
	}
	if b.o.noisy > 0 {
		nr, err := b.e.noisyPhase(ctx, b.o.noisy, 10, 100*time.Millisecond)
		if err != nil {
			return err
		}
		aged, err := b.agedNoisyPhase(ctx, 3*b.o.noisy, 10, 100*time.Millisecond, 2*time.Second)
		if err != nil {
			return err
		}
		nr.Aged = &aged
		b.res.Noisy = &nr
	}
	return b.pushSlow(ctx)
}

// warmUp, with -warmup, pushes one unmeasured job per user. Steady state:
// each user's access token is refreshed once an hour, not once per bench.
// Without this, the first jobs of every user wait together for one refresh
// (re-reading the account while they wait), a cost a long-running system
// pays once per user per token lifetime.
func (b *bench) warmUp(ctx context.Context) error {
	if !b.o.warmup {
		return nil
	}
	progress("warming up: one job per user (not measured)")
	_, err := b.e.push(ctx, b.o.users, "bench warm-up")
	return err
}

// pushMain pushes the -jobs measured jobs at simulator latency 0 and
// records their processor time, idle receives, throughput and latencies.
func (b *bench) pushMain(ctx context.Context) error {
	o, e, res := b.o, b.e, &b.res
	e.counter.Reset()
	e.durs.take()
	e.logs.take()
	if o.rate > 0 {
		progress("submitting %d jobs at %.1f jobs/s, open loop (simulator latency 0)", o.n, o.rate)
	} else {
		progress("submitting %d jobs with %d submitters (simulator latency 0)", o.n, o.conc)
	}
	cpu0 := cpuNow(b.emu)
	main, err := e.push(ctx, o.n, "bench job")
	if err != nil {
		return err
	}
	b.main = main
	res.CPUMsPerJob = cpuNow(b.emu).perJob(cpu0, o.n)
	res.IdleReceivesPerJob = float64(main.idle) / float64(o.n)
	res.Throughput = main.throughput
	res.OfferedRate = o.rate
	res.SubmitP50, res.SubmitP95 = pct(main.submitLat, 50), pct(main.submitLat, 95)
	res.E2EP50, res.E2EP95 = pct(main.e2e, 50), pct(main.e2e, 95)
	return nil
}

// readStatuses makes the client's status reads of the measured jobs,
// measured apart and priced in the bill as the client's (whatever the
// external API's latency, a read costs the same).
func (b *bench) readStatuses(ctx context.Context) error {
	reads, err := b.e.statusReads(ctx, b.main.jobIDs, b.o.reads)
	if err != nil {
		return err
	}
	b.reads = reads
	b.res.ClientReadsPerJob = map[string]float64{}
	for op, c := range reads.pipeline {
		b.res.ClientReadsPerJob[op] = float64(c) / float64(b.o.n)
	}
	return nil
}

// measureEventLags waits for the measured jobs' webhooks, counts the reads
// of idle SSE streams and reads the events the bus delivered. A late
// webhook or event is the relay's lag, not the jobs': it is reported and
// counts as the limit (its p95 then a lower bound).
func (b *bench) measureEventLags(ctx context.Context) error {
	res := &b.res
	progress("waiting for every job.succeeded webhook")
	var hooked []string
	for i, id := range b.main.jobIDs {
		if i%b.o.users == 0 {
			hooked = append(hooked, id)
		}
	}
	lags, err := b.hooks.wait(hooked, 3*time.Minute)
	if err != nil {
		// The relay's lag, not the jobs': report it and go on (the
		// missing ones count as the limit, so the p95 is a lower bound).
		progress("%v: their lag counts as the limit", err)
		res.LateEvents = append(res.LateEvents, err.Error())
	}
	res.WebhookLagP50, res.WebhookLagP95 = pct(lags, 50), pct(lags, 95)
	progress("counting the reads of idle SSE streams")
	if res.SSEReadsPerIdleClientPerMin, err = idleStreamReads(ctx, b.floorCfg, b.e.s, b.main.jobIDs[0], 0); err != nil {
		return err
	}
	progress("reading the events the bus delivered")
	lags, err = b.tap.wait(b.main.jobIDs, 3*time.Minute)
	// The tap stays drained through the later phases (until run returns):
	// left to fill, moto's deliveries into it slow the whole emulator, the
	// backlog's and the latency phase's jobs with it.
	if err != nil {
		progress("%v: their lag counts as the limit", err)
		res.LateEvents = append(res.LateEvents, err.Error())
	}
	res.EventLagBusP50, res.EventLagBusP95 = pct(lags, 50), pct(lags, 95)
	return nil
}

// priceRequests turns the measured jobs' requests into requests and
// capacity units per job, their request charges per million jobs, and
// submit p95 over the emulator's floors.
func (b *bench) priceRequests() {
	n, main, res := float64(b.o.n), b.main, &b.res
	res.RequestsPerJob = map[string]float64{}
	res.RequestsByFunction = map[string]float64{}
	for k, c := range main.byFunction {
		res.RequestsByFunction[k] = float64(c) / n
	}
	res.DynamoDBUnitsPerJob = map[string]float64{}
	for k, u := range main.pipelineUnits {
		res.DynamoDBUnitsPerJob[k] = u / n
	}
	usd := dynamoDBUSD(main.pipelineUnits, n)
	for op, c := range main.pipeline {
		if c <= 0 {
			continue
		}
		per := float64(c) / n
		svc, _, _ := strings.Cut(op, ".")
		res.RequestsPerJob[svc] += per
		res.RequestsTotal += per
		if class, units := priceOf(op); !strings.HasPrefix(class, "DynamoDB") {
			usd += per * units * prices[class].usd * 1e6
		}
	}
	// Lambda invocations: one API call per submit, publisher batches.
	usd += 2 * prices["Lambda"].usd * 1e6
	res.USDPerMillion = usd
	if res.FloorPutItemP50 > 0 {
		res.SubmitP95OverFloor = res.SubmitP95 / res.FloorPutItemP50
	}
	if own := res.FloorSubmitTxP50 + res.FloorSendP50; own > 0 {
		res.SubmitP95OverOwnFloor = res.SubmitP95 / own
	}
}

// billAtZeroLatency measures the table's storage per job and prices the
// measured jobs' whole bill (simulator latency 0).
func (b *bench) billAtZeroLatency(ctx context.Context) error {
	progress("measuring the table's storage per job")
	b.bi = billInputs{env: b.o.billEnv, objectBytes: float64(len(simulator.PNG(uploadSide))), reads: b.reads, readsPerJob: b.o.reads, confirm: b.confirm}
	var err error
	if b.bi.tableBytesPerJob, b.bi.baseTableBytesPerJob, err = tableBytesPerJob(ctx, b.plain.DynamoDB, b.e.s.Provisioned.Definition.Table); err != nil {
		return err
	}
	res := &b.res
	res.BillZero = bill(b.main, b.upload, b.bi)
	res.BillSources = billSources()
	res.BillEnv = string(b.o.billEnv.Env)
	res.USDPerMillionTotalZero = res.BillZero["total"]
	return nil
}

// pushSlow, with -latency-jobs, pushes that many jobs with the simulator's
// latency at -sim-latency and prices their bill; without, the bill is the
// zero-latency one.
func (b *bench) pushSlow(ctx context.Context) error {
	o, e, res := b.o, b.e, &b.res
	if o.latencyJobs <= 0 {
		res.Bill, res.USDPerMillionTotal = res.BillZero, res.USDPerMillionTotalZero
		return nil
	}
	res.SimLatencyMs = ms(o.simLatency)
	set := e.s.Simulator.Settings()
	set.LatencyMs = int(o.simLatency / time.Millisecond)
	if !e.s.Simulator.SetSettings(set) {
		return fmt.Errorf("the simulator refused latency %s", o.simLatency)
	}
	e.counter.Reset()
	e.durs.take()
	e.logs.take()
	progress("submitting %d jobs with the simulator's latency at %s", o.latencyJobs, o.simLatency)
	var err error
	if b.slow, err = e.push(ctx, o.latencyJobs, "bench slow job"); err != nil {
		return err
	}
	set.LatencyMs = 0
	e.s.Simulator.SetSettings(set)
	res.Bill = bill(b.slow, b.upload, b.bi)
	res.USDPerMillionTotal = res.Bill["total"]
	res.USDPerMillionTotalAWS = res.Bill["total at aws latencies"]
	res.USDPerMillionPipelineAWS = res.Bill["total at aws latencies without the client's calls"]
	return nil
}

// sizeCapacity estimates the deployed design's capacity from the slow
// jobs' request mix (the measured jobs' without a latency phase).
func (b *bench) sizeCapacity() {
	model := b.slow
	if model.n == 0 {
		model = b.main
	}
	b.res.Capacity = capacity(mixOf(model, b.upload, b.reads, b.confirm), currentDesign())
	if len(b.res.Capacity) > 0 {
		b.res.CapacityJobsPerS, b.res.CapacityBottleneck = b.res.Capacity[0].JobsPerS, b.res.Capacity[0].Name
	}
}

// measureColdStarts, with the host binaries built and -coldstart-runs,
// times interleaved cold starts of every function and a hello world.
func (b *bench) measureColdStarts(ctx context.Context) error {
	if b.hostBins == nil || b.o.coldRuns <= 0 {
		return nil
	}
	progress("cold starts: %d interleaved runs of every function and a hello world", b.o.coldRuns)
	var err error
	b.res.InitMs, b.res.ColdFirstResponseMs, err = coldStarts(ctx, b.emu.Endpoints(), b.hostBins, b.o.coldRuns)
	return err
}

// backlogPhase pauses the job tiers through the admin API, submits n
// jobs, resumes the tiers and measures the drain: the event source
// mappings then receive full batches, as they do in AWS whenever a queue
// holds a backlog (after a pause, an outage of the external API, a burst).
func (e *env) backlogPhase(ctx context.Context, n int, res *result) error {
	tok, err := httpapi.Mint(e.s.Config.JWTSecret, httpapi.Claims{Subject: "bench-ops", Role: httpapi.RoleAdmin, ExpiresAt: time.Now().Add(time.Hour)})
	if err != nil {
		return err
	}
	ops := apiclient.New(e.s.APIURL, apiclient.WithToken(tok))
	tiers := []job.Tier{job.High, job.Medium, job.Low}
	for _, t := range tiers {
		if _, err := ops.PauseTier(ctx, string(t)); err != nil {
			return fmt.Errorf("pausing the %s tier: %w", t, err)
		}
	}
	e.counter.Reset()
	e.durs.take()
	e.logs.take()
	e.held = func(ctx context.Context) error {
		progress("resuming the tiers: %d jobs wait", n)
		for _, t := range tiers {
			if _, err := ops.ResumeTier(ctx, string(t)); err != nil {
				return fmt.Errorf("resuming the %s tier: %w", t, err)
			}
		}
		return nil
	}
	defer func() { e.held = nil }()
	progress("submitting %d jobs to paused tiers (a backlog)", n)
	ph, err := e.push(ctx, n, "bench backlog job")
	if err != nil {
		return err
	}
	res.BacklogJobs, res.BacklogDrainPerS, res.BacklogFirstStartMs = n, ph.drainRate, ms(ph.firstStart)
	res.BacklogRequests = map[string]float64{}
	for op, c := range ph.pipeline {
		if c > 0 {
			res.BacklogRequests[op] = float64(c) / float64(n)
			res.BacklogRequestsTotal += float64(c) / float64(n)
		}
	}
	return nil
}

// push submits n jobs, waits for all, reads each reads times through the
// API as a client would, and returns what it cost.
func (e *env) push(ctx context.Context, n int, title string) (phase, error) {
	ph := phase{n: n, submitLat: make([]time.Duration, n), tiers: map[string]int{}}
	start := time.Now()
	stamp := time.Now().UnixNano()
	callsBefore := simCalls(e.s)
	jobIDs, err := e.submitAll(ctx, &ph, fmt.Sprintf("%s %d", title, stamp), start)
	if err != nil {
		return ph, err
	}
	released := start
	if e.held != nil {
		// The release begins with the first tier's resume: a job of the
		// first tier may start before the last tier is resumed.
		released = time.Now()
		if err := e.held(ctx); err != nil {
			return ph, err
		}
	}
	progress("waiting for every job to finish")
	first, last, events, err := e.waitFinished(ctx, &ph, jobIDs)
	if err != nil {
		return ph, err
	}
	ph.throughput = float64(n) / last.Sub(start).Seconds()
	ph.drainRate = float64(n) / last.Sub(released).Seconds()
	ph.firstStart = first.Sub(released)
	ph.calls = float64(simCalls(e.s)-callsBefore) / float64(n)
	ph.latency = time.Duration(e.s.Simulator.Settings().LatencyMs) * time.Millisecond
	ph.events = float64(events) / float64(n)
	// The relay puts the last jobs' events on the bus after they finish:
	// the phase ends when the pipeline's requests stop.
	e.settle()
	e.takeCounts(&ph)
	ph.jobIDs = jobIDs
	return ph, nil
}

// submitAll submits ph.n jobs titled "<prefix> <i>", job i as user i mod
// users, recording each submit's latency in ph.submitLat: from start on,
// open loop at e.rate if set, else by e.conc submitters as fast as they
// go. It returns the jobs' IDs or the first error.
func (e *env) submitAll(ctx context.Context, ph *phase, prefix string, start time.Time) ([]string, error) {
	n, users := ph.n, len(e.tokens)
	jobIDs := make([]string, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	var firstErr error
	var errOnce sync.Once
	submit := func(i int) bool {
		u := i % users
		t0 := time.Now()
		j, _, err := apiclient.New(e.s.APIURL, apiclient.WithToken(e.tokens[u])).SubmitJob(ctx,
			apiclient.PublishRequest(publish.Params{Title: fmt.Sprintf("%s %d", prefix, i)}, e.uploads[u]))
		ph.submitLat[i] = time.Since(t0)
		if err != nil {
			errOnce.Do(func() { firstErr = err })
			return false
		}
		jobIDs[i] = j.ID
		if (i+1)%(max(n/10, 1)) == 0 {
			progress("submitted %d/%d", i+1, n)
		}
		return true
	}
	if e.rate > 0 {
		// Open loop: job i is submitted at start + i/rate whatever the
		// earlier ones' answers, as independent clients would.
		for i := range n {
			if wait := time.Until(start.Add(time.Duration(float64(i) / e.rate * float64(time.Second)))); wait > 0 {
				time.Sleep(wait)
			}
			wg.Go(func() { submit(i) })
		}
	} else {
		for range e.conc {
			wg.Go(func() {
				for {
					i := int(next.Add(1) - 1)
					if i >= n || !submit(i) {
						return
					}
				}
			})
		}
	}
	wg.Wait()
	return jobIDs, firstErr
}

// waitFinished polls each of jobIDs until it has succeeded, at most 10
// minutes in all, recording its submit→finish time and tier in ph. It
// returns the first start and the last finish among them and their events
// in all; a failed job is an error.
func (e *env) waitFinished(ctx context.Context, ph *phase, jobIDs []string) (first, last time.Time, events int64, err error) {
	n := len(jobIDs)
	deadline := time.Now().Add(10 * time.Minute)
	for i, id := range jobIDs {
		for {
			j, err := e.poll.GetJob(ctx, id)
			if err != nil {
				return first, last, events, err
			}
			if j.Status == "succeeded" || j.Status == "failed" {
				if j.Status == "failed" {
					return first, last, events, fmt.Errorf("job %s failed: %+v", id, j.Error)
				}
				ph.e2e = append(ph.e2e, j.FinishedAt.Sub(j.CreatedAt))
				if j.FinishedAt.After(last) {
					last = *j.FinishedAt
				}
				if j.StartedAt != nil && (first.IsZero() || j.StartedAt.Before(first)) {
					first = *j.StartedAt
				}
				events += j.EventSeq
				ph.tiers[string(j.Tier)]++
				break
			}
			if time.Now().After(deadline) {
				return first, last, events, fmt.Errorf("job %s still %s after 10 minutes", id, j.Status)
			}
			time.Sleep(100 * time.Millisecond)
		}
		if (i+1)%(max(n/10, 1)) == 0 {
			progress("finished %d/%d", i+1, n)
		}
	}
	return first, last, events, nil
}

// takeCounts records in ph what the counters hold since their last reset:
// the pipeline's requests without the empty receives (counted apart as
// idle), by function, DynamoDB's units and the billed items, and every
// function's durations and log bytes.
func (e *env) takeCounts(ph *phase) {
	ph.pipeline, ph.pipelineUnits = e.counter.Snapshot(), e.counter.Units()
	ph.byFunction = e.counter.Labeled()
	for op, c := range e.counter.Empty() {
		ph.pipeline[op] -= c
		ph.idle += c
	}
	ph.durations = e.durs.take()
	ph.logs = e.logs.take()
	ph.items = e.counter.Items()
}

// settle waits until the requests stop (the idle pollers' receives
// aside), at most 30 s: the relay's batching window is a second.
func (e *env) settle() {
	busy := func() int {
		n := 0
		for op, c := range e.counter.Snapshot() {
			if op != "SQS.ReceiveMessage" {
				n += c
			}
		}
		return n
	}
	last := busy()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
		time.Sleep(1500 * time.Millisecond)
		now := busy()
		if now == last {
			return
		}
		last = now
	}
}

// client measures what a client's own calls cost beyond the pipeline's
// (its status reads, its explicit confirm of an upload): the requests
// function fn's invocations made while do ran (by the counter's labels),
// their durations and log lines, for n jobs. DynamoDB's units are all the
// window's (the counter does not label them): the recovery function's idle
// queries, should a tick fall in the window, are counted with them.
func (e *env) client(n int, fn string, do func() error) (phase, error) {
	e.counter.Reset()
	e.durs.take()
	e.logs.take()
	if err := do(); err != nil {
		return phase{}, err
	}
	ph := phase{n: n, pipeline: map[string]int{}, pipelineUnits: e.counter.Units()}
	for k, c := range e.counter.Labeled() {
		if op, ok := strings.CutPrefix(k, fn+" "); ok {
			ph.pipeline[op] += c
		}
	}
	ph.durations = map[string][]time.Duration{fn: e.durs.take()[fn]}
	ph.logs = map[string]int64{fn: e.logs.take()[fn]}
	return ph, nil
}

// confirmed waits until upload id is settled confirmed (read uncounted).
func (e *env) confirmed(ctx context.Context, id string) error {
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		u, err := e.poll.GetUpload(ctx, id)
		if err != nil {
			return err
		}
		switch {
		case u.Status == uploads.Confirmed:
			return nil
		case u.Status != uploads.Pending:
			return fmt.Errorf("upload %s %s: %s", id, u.Status, u.Reason)
		case time.Now().After(deadline):
			return fmt.Errorf("upload %s not confirmed by its S3 event within a minute", id)
		}
	}
}

// statusReads is the client's status reads: each of jobs read reads times
// (GET /v1/jobs/{id}), as their owners.
func (e *env) statusReads(ctx context.Context, jobs []string, reads int) (phase, error) {
	return e.client(len(jobs), resources.FuncAPI, func() error {
		var next atomic.Int64
		var wg sync.WaitGroup
		var firstErr error
		var once sync.Once
		for range e.conc {
			wg.Go(func() {
				for {
					i := int(next.Add(1) - 1)
					if i >= len(jobs)*reads {
						return
					}
					j := i % len(jobs)
					// push submits job i as user i mod users.
					if _, err := apiclient.New(e.s.APIURL, apiclient.WithToken(e.tokens[j%len(e.tokens)])).GetJob(ctx, jobs[j]); err != nil {
						once.Do(func() { firstErr = err })
					}
				}
			})
		}
		wg.Wait()
		return firstErr
	})
}

// billed is the GB-seconds function fn's invocations cost (each rounded
// up to the millisecond, as Lambda bills).
func billed(fn string, ds []time.Duration) float64 {
	var msTotal float64
	for _, d := range ds {
		msTotal += math.Ceil(float64(d.Microseconds()) / 1000)
	}
	return msTotal / 1000 * float64(resources.FunctionSizes[fn].MemoryMB) / 1024
}

// httpFunctions are the functions behind the HTTP API: the api and the
// route table's (resources.HTTPRoutes).
func httpFunctions() []string {
	fns := []string{resources.FuncAPI}
	for _, r := range resources.HTTPRoutes {
		if !slices.Contains(fns, r.Function) {
			fns = append(fns, r.Function)
		}
	}
	return fns
}

// httpCalls counts the invocations of the functions behind the HTTP API
// in durs: each is one API Gateway request.
func httpCalls(durs map[string][]time.Duration) float64 {
	n := 0
	for _, fn := range httpFunctions() {
		n += len(durs[fn])
	}
	return float64(n)
}

// httpGBs is the GB of memory the HTTP API's invocations in durs hold,
// each at its function's memory (times a duration: GB-seconds).
func httpGBs(durs map[string][]time.Duration) float64 {
	gb := 0.0
	for _, fn := range httpFunctions() {
		gb += float64(len(durs[fn])) * float64(resources.FunctionSizes[fn].MemoryMB) / 1024
	}
	return gb
}

// billInputs is what the bill needs beyond the phases: the environment it
// prices, the storage the bench measured and the client's own calls.
type billInputs struct {
	env billEnv
	// tableBytesPerJob is the table's billed storage per job, its global
	// secondary indexes included; baseTableBytesPerJob the table's alone,
	// what PITR bills (table data and local secondary indexes).
	tableBytesPerJob, baseTableBytesPerJob float64
	// objectBytes is the size of the job's uploaded object.
	objectBytes float64
	// reads is the client's status reads, readsPerJob a job; confirm its
	// explicit confirm of the job's upload (env.client; n 0: none).
	reads       phase
	readsPerJob int
	confirm     phase
}

// The lines of the bill that are not a request class ("requests <svc>").
const (
	lineLambdaRequests = "lambda requests"
	lineLambdaGBs      = "lambda gb-seconds"
	lineAPIGateway     = "api gateway"
	lineEvents         = "eventbridge events"
	lineLogs           = "cloudwatch logs"
	lineTraces         = "x-ray traces"
	lineArchive        = "eventbridge archive"
	lineStorage        = "dynamodb storage"
	linePITR           = "dynamodb pitr"
	lineS3Storage      = "s3 storage"
	lineSchedules      = "scheduler + recovery (fixed, per 1M jobs/month)"
	lineIdlePolls      = "idle esm polls (fixed, per 1M jobs/month)"
	lineRetention      = "retention, days later (job.stale on the bus, its archive, relay, sweep time)"
	lineRetentionDDB   = "requests dynamodb, retention days later (staling, the upload's expiry; table and indexes)"
	lineClientReads    = "client: status reads"
	lineClientConfirm  = "client: explicit upload confirm"
)

// clientPrices are the prices behind a line of the client's calls: an API
// request, its invocation and time, its reads, its log lines.
var clientPrices = []string{"APIGateway", "Lambda", "Lambda.GBs", "DynamoDB.read", "DynamoDB.write", "S3.read", "Logs.ingest", "Logs.store"}

// billLineSources names the price (prices, storagePrices) behind each line
// of the bill that is not a request class.
var billLineSources = map[string][]string{
	lineLambdaRequests: {"Lambda"},
	lineLambdaGBs:      {"Lambda.GBs"},
	lineAPIGateway:     {"APIGateway"},
	lineEvents:         {"EventBridge"},
	lineLogs:           {"Logs.ingest", "Logs.store"},
	lineTraces:         {"XRay.trace"},
	lineArchive:        {"Archive.ingest", "Archive.store"},
	lineStorage:        {"DynamoDB.storage"},
	linePITR:           {"DynamoDB.pitr"},
	lineS3Storage:      {"S3.storage"},
	lineSchedules:      {"Scheduler", "Lambda", "Lambda.GBs", "Logs.ingest"},
	lineIdlePolls:      {"SQS"},
	lineRetention:      {"EventBridge", "Archive.ingest", "Archive.store", "Lambda", "Lambda.GBs"},
	lineRetentionDDB:   {"DynamoDB.write"},
	lineClientReads:    clientPrices,
	lineClientConfirm:  clientPrices,
}

// billSources is each line of the bill with the price sources behind it.
func billSources() map[string]string {
	out := map[string]string{}
	for line, keys := range billLineSources {
		var src []string
		for _, k := range keys {
			if p, ok := prices[k]; ok {
				src = append(src, p.source)
			} else {
				src = append(src, storagePrices[k].source)
			}
		}
		out[line] = strings.Join(src, "; ")
	}
	for class, p := range prices {
		svc, _, _ := strings.Cut(class, ".")
		if _, ok := out["requests "+strings.ToLower(svc)]; !ok && class != "Lambda.GBs" && class != "Scheduler" {
			out["requests "+strings.ToLower(svc)] = p.source
		}
	}
	// DynamoDB's requests are billed by both read and write units.
	out["requests dynamodb"] = prices["DynamoDB.write"].source + "; " + prices["DynamoDB.read"].source
	return out
}

// requestsUSD prices counts (by "Service.Operation") and DynamoDB's units,
// per job over per, into b's "requests <svc>" lines.
func requestsUSD(b map[string]float64, counts map[string]int, units map[string]float64, per float64) {
	for op, c := range counts {
		class, n := priceOf(op)
		if class == "" || strings.HasPrefix(class, "DynamoDB") {
			continue
		}
		svc, _, _ := strings.Cut(class, ".")
		b["requests "+strings.ToLower(svc)] += float64(c) / per * n * prices[class].usd * 1e6
	}
	// DynamoDB bills the capacity units each request consumed, its
	// indexes' included, not the requests.
	b["requests dynamodb"] += dynamoDBUSD(units, per)
}

// bill prices one job: its measured requests and Lambda time, one upload
// (measured in up), API Gateway requests, events, the logs each function
// wrote, traces, the event archive, storage, the fixed costs spread over a
// million jobs a month, and the client's own calls (in.reads, in.confirm)
// on lines of their own. USD per million jobs.
func bill(ph, up phase, in billInputs) map[string]float64 {
	d := newBillDraft(ph, up, in)
	requestsUSD(d.b, ph.pipeline, ph.pipelineUnits, d.n)
	requestsUSD(d.b, up.pipeline, up.pipelineUnits, d.un)
	// The browser's presigned PUT is in up.pipeline: the counter's
	// middleware sees PresignPutObject as an S3.PutObject, one per upload,
	// as the PUT.
	d.lambda()
	d.apiAndEvents()
	d.logs()
	d.client(lineClientReads, in.reads)
	d.client(lineClientConfirm, in.confirm)
	d.fixed()
	d.traces()
	d.retention()
	d.storage()
	d.totals()
	return d.b
}

// billDraft is a bill being drawn up (bill): its lines so far, what it
// prices, and the figures a line works out that later lines reuse.
type billDraft struct {
	// b is the bill's lines.
	b      map[string]float64
	ph, up phase
	in     billInputs
	def    resources.Definition
	// n and un are ph's and up's jobs.
	n, un float64
	// platform is Lambda's own log bytes per invocation at the
	// environment's system log level.
	platform float64
	// invocations and gbs are Lambda's per job, invByFn the invocations
	// per job by function, recoveryRuns and recoveryLogs the recovery
	// function's scheduled runs and their log bytes (lambda).
	invocations, gbs float64
	invByFn          map[string]float64
	recoveryRuns     int
	recoveryLogs     int64
	// apiCalls is the HTTP API's requests per job, busEvents and busBytes
	// the events put on the bus per job and their bytes (apiAndEvents).
	apiCalls, busEvents, busBytes float64
	// clientCalls is the client's calls per job by function (client).
	clientCalls map[string]float64
	// fixedRuns is the scheduled runs a month by function (fixed).
	fixedRuns map[string]float64
}

// newBillDraft starts an empty bill of ph and up in in's environment.
func newBillDraft(ph, up phase, in billInputs) *billDraft {
	return &billDraft{
		b: map[string]float64{}, ph: ph, up: up, in: in, def: resources.For(in.env.Env),
		n: float64(ph.n), un: float64(up.n),
		platform:    float64(platformLogBytes(in.env.systemLevel())),
		clientCalls: map[string]float64{}, fixedRuns: map[string]float64{},
	}
}

// logUSD prices bytes of logs per job: ingested, then stored for the
// environment's retention.
func (d *billDraft) logUSD(bytes float64) float64 {
	retention := time.Duration(d.in.env.LogRetentionDays) * 24 * time.Hour
	return bytes * (storagePrices["Logs.ingest"].usd + months(retention)*storagePrices["Logs.store"].usd) * 1e6
}

// lambda prices every invocation and its measured duration, per job. The
// recovery function's scheduled runs during a phase are left out: the
// fixed line (fixed) prices every run.
func (d *billDraft) lambda() {
	b := d.b
	perFn := map[string]float64{}
	d.invByFn = map[string]float64{}
	for _, p := range []phase{d.ph, d.up} {
		per := float64(p.n)
		for fn, ds := range p.durations {
			if fn == resources.FuncRecovery {
				d.recoveryRuns += len(ds)
				d.recoveryLogs += p.logs[fn]
				continue
			}
			d.invocations += float64(len(ds)) / per
			d.invByFn[fn] += float64(len(ds)) / per
			d.gbs += billed(fn, ds) / per
			perFn[fn] += billed(fn, ds) / per
		}
	}
	for fn, v := range perFn {
		b["lambda gb-seconds per job "+fn] = v
	}
	b[lineLambdaRequests] = d.invocations * prices["Lambda"].usd * 1e6
	b[lineLambdaGBs] = d.gbs * prices["Lambda.GBs"].usd * 1e6
}

// apiAndEvents prices the HTTP API's requests and the events put on the
// bus (EventBridge bills each: the relay's PutEvents entries).
func (d *billDraft) apiAndEvents() {
	b := d.b
	d.apiCalls = httpCalls(d.ph.durations)/d.n + httpCalls(d.up.durations)/d.un
	b[lineAPIGateway] = d.apiCalls * prices["APIGateway"].usd * 1e6
	d.busEvents = float64(d.ph.items["EventBridge.PutEvents"]) / d.n
	d.busBytes = float64(d.ph.items["EventBridge.PutEvents bytes"]) / d.n
	b[lineEvents] = d.busEvents * prices["EventBridge"].usd * 1e6
	// A delivery's AWS requests and its system invocation are in the lines
	// above (one user in 20 has an endpoint): nothing else to add.
	b["webhook deliveries"] = 0
}

// logs prices CloudWatch Logs: what each function wrote (its log lines at
// Info and above, its EMF lines), Lambda's own lines per invocation at the
// environment's system log level, and the HTTP API's access log line per
// request; stored for the environment's retention (raw size: an upper
// bound, CloudWatch bills storage compressed).
func (d *billDraft) logs() {
	b := d.b
	logBytes := d.platform*d.invocations + float64(accessLogBytes)*d.apiCalls
	b["log bytes per job lambda's own lines"] = d.platform * d.invocations
	b["log bytes per job http api access log"] = float64(accessLogBytes) * d.apiCalls
	for _, p := range []phase{d.ph, d.up} {
		for fn, v := range p.logs {
			if fn == resources.FuncRecovery {
				continue
			}
			b["log bytes per job "+fn] += float64(v) / float64(p.n)
			logBytes += float64(v) / float64(p.n)
		}
	}
	b[lineLogs] = d.logUSD(logBytes)
	b["log bytes per job"] = logBytes
}

// client prices the client's own calls c on line, a line of their own: the
// API request, its invocation at AWS latencies (apiInvocation) whatever
// the emulators took, the requests it made, its log lines and access log
// line. They are what the bench's client does, not what a job needs.
func (d *billDraft) client(line string, c phase) {
	b := d.b
	if c.n == 0 {
		b[line] = 0
		return
	}
	per := float64(c.n)
	lines := map[string]float64{}
	requestsUSD(lines, c.pipeline, c.pipelineUnits, per)
	usd := 0.0
	for _, v := range lines {
		usd += v
	}
	calls := httpCalls(c.durations) / per
	usd += calls * (prices["APIGateway"].usd + prices["Lambda"].usd) * 1e6
	usd += httpGBs(c.durations) / per * apiInvocation.Seconds() * prices["Lambda.GBs"].usd * 1e6
	bytes := calls * (d.platform + float64(accessLogBytes))
	for _, v := range c.logs {
		bytes += float64(v) / per
	}
	usd += d.logUSD(bytes)
	b[line] = usd
	b[line+" calls per job"] = calls
	b[line+" log bytes per job"] = bytes
	for fn, ds := range c.durations {
		d.clientCalls[fn] += float64(len(ds)) / per
	}
}

// fixed prices the fixed costs. The definition's schedules (release and
// retention every minute, recovery every 5 minutes): an idle run of about
// 100 ms each at its function's memory with its log lines (as the phases'
// runs wrote them) and Lambda's own, spread over 1M jobs a month. The
// event source mappings' idle long polls: about 5 pollers per queue each
// receiving every 20 s, four queues.
func (d *billDraft) fixed() {
	fixed := 0.0
	perRunLogs := float64(d.platform)
	if d.recoveryRuns > 0 {
		perRunLogs += float64(d.recoveryLogs) / float64(d.recoveryRuns)
	}
	for _, sc := range d.def.Schedules {
		perMonth := float64(30*24*time.Hour) / float64(sc.Interval)
		d.fixedRuns[sc.Function] += perMonth
		gb := float64(resources.FunctionSizes[sc.Function].MemoryMB) / 1024
		fixed += perMonth * (prices["Scheduler"].usd + prices["Lambda"].usd + 0.1*gb*prices["Lambda.GBs"].usd)
		fixed += d.logUSD(perMonth*perRunLogs) / 1e6
	}
	d.b[lineSchedules] = fixed
	d.b[lineIdlePolls] = 4 * 5 * 3 * 60 * 24 * 30 * prices["SQS"].usd
}

// traces prices X-Ray: with active tracing, Lambda samples each function's
// invocations at its fixed rate (tracesPerMonth); without, nothing is
// traced (PassThrough: no trigger of ours sends a sampled header).
func (d *billDraft) traces() {
	b := d.b
	b[lineTraces] = 0
	if !d.in.env.Tracing.Enabled {
		return
	}
	perMonth := map[string]float64{}
	for fn, v := range d.invByFn {
		perMonth[fn] += v * 1e6
	}
	for fn, v := range d.clientCalls {
		perMonth[fn] += v * 1e6
	}
	for fn, v := range d.fixedRuns {
		perMonth[fn] += v
	}
	traces := tracesPerMonth(perMonth)
	b[lineTraces] = traces * storagePrices["XRay.trace"].usd
	b["x-ray traces per job"] = traces / 1e6
}

// retention prices what happens days after the job: the stale sweep marks
// it stale (its job.stale event goes on the bus and into the archive,
// relayed with others: a PutEvents per ten, an invocation per stream
// batch) and the media sweep expires its upload (S3's DELETE is free).
// Their time is the drain test's (sweepsMeasured, at AWS latencies), their
// write units, the table's and every index's, the units test's; TTL
// deletes the items later for nothing. It prices the bus's archive too,
// which keeps every event put for the definition's retention.
func (d *billDraft) retention() {
	b, def := d.b, d.def
	stale, media := sweepsMeasured[recovery.SweepStale], sweepsMeasured[recovery.SweepMedia]
	eventBytes := 0.0
	if d.busEvents > 0 {
		eventBytes = d.busBytes / d.busEvents
	}
	relayGB := float64(resources.FunctionSizes[def.EventStream.Function].MemoryMB) / 1024
	recoveryGB := float64(resources.FunctionSizes[resources.FuncRecovery].MemoryMB) / 1024
	retainGBs := (1/stale.ItemsPerS+1/media.ItemsPerS)*recoveryGB + (0.1*relayRequestLatency.Seconds()+awsRequestLatency.Seconds()/float64(def.EventStream.BatchSize))*relayGB
	b[lineRetention] = (prices["EventBridge"].usd + prices["Lambda"].usd/float64(def.EventStream.BatchSize) + retainGBs*prices["Lambda.GBs"].usd +
		eventBytes*(storagePrices["Archive.ingest"].usd+months(def.EventArchive.Retention)*storagePrices["Archive.store"].usd)) * 1e6
	b[lineRetentionDDB] = (max(stale.WCUPerItem, stale.TableWCUPerItem) + max(media.WCUPerItem, media.TableWCUPerItem)) * prices["DynamoDB.write"].usd * 1e6

	b[lineArchive] = d.busBytes * (storagePrices["Archive.ingest"].usd + months(def.EventArchive.Retention)*storagePrices["Archive.store"].usd) * 1e6
	b["eventbridge events per job"] = d.busEvents
}

// storage prices what the job keeps stored. The table holds a job (with
// its events, dedupe record and index entries) until TTL deletes it,
// CONVEYOR_DELETE_AFTER after it finished: at a million jobs a month, that
// many months of jobs. PITR bills the table's size without its global
// secondary indexes. The job's object stays until no job may use it: its
// use window, or until its job goes stale, then the retention sweep
// deletes it.
func (d *billDraft) storage() {
	b, in := d.b, d.in
	held := months(resources.DeleteAfterDefault)
	b[lineStorage] = in.tableBytesPerJob * held * storagePrices["DynamoDB.storage"].usd * 1e6
	b[linePITR] = 0
	if d.def.Table.PointInTimeRecovery {
		b[linePITR] = in.baseTableBytesPerJob * held * storagePrices["DynamoDB.pitr"].usd * 1e6
	}
	b["dynamodb bytes stored per job"] = in.tableBytesPerJob
	b["dynamodb bytes stored per job, table alone"] = in.baseTableBytesPerJob
	kept := max(resources.UploadUseWindow, resources.StaleAfterDefault)
	b[lineS3Storage] = in.objectBytes * months(kept) * storagePrices["S3.storage"].usd * 1e6
	b["s3 bytes stored per job"] = in.objectBytes
}

// totals sums the bill's priced lines ("per job" lines are figures, not
// charges), then the same bill with Lambda's duration at AWS latencies
// instead of the emulators' (awsGBsPerJob), with and without the client's
// calls, and the per-job figures the report prints.
func (d *billDraft) totals() {
	b := d.b
	sum, client0 := 0.0, b[lineClientReads]+b[lineClientConfirm]
	for k, v := range b {
		if !strings.Contains(k, "per job") {
			sum += v
		}
	}
	b["total"] = sum
	aws := awsGBsPerJob(d.ph, d.up)
	awsGBs := 0.0
	for fn, v := range aws {
		b["lambda gb-seconds per job at aws latencies "+fn] = v
		awsGBs += v
	}
	b["total at aws latencies"] = b["total"] - b[lineLambdaGBs] + awsGBs*prices["Lambda.GBs"].usd*1e6
	b["total at aws latencies without the client's calls"] = b["total at aws latencies"] - client0
	b["lambda gb-seconds per job at aws latencies"] = awsGBs
	b["api gateway requests per job"] = d.apiCalls
	b["lambda gb-seconds per job"] = d.gbs
	b["lambda invocations per job"] = d.invocations
	b["events per job"] = d.ph.events
	b["dynamodb write units per job"] = d.ph.pipelineUnits["write"] / d.n
	b["dynamodb read units per job"] = d.ph.pipelineUnits["read"] / d.n
}

// awsGBsPerJob is each function's GB-seconds per job with its durations at
// AWS latencies instead of the emulators' (see mixOf): the publisher's
// requests at awsRequestLatency plus its external calls, a job per
// invocation; an HTTP or confirm invocation at apiInvocation; the relay's
// PutEvents and sends at relayRequestLatency; a webhook delivery at
// apiInvocation plus awsRequestLatency per request; each at its
// function's memory.
func awsGBsPerJob(ph, up phase) map[string]float64 {
	n, un := float64(ph.n), float64(up.n)
	gb := func(fn string) float64 { return float64(resources.FunctionSizes[fn].MemoryMB) / 1024 }
	total := 0
	for _, c := range ph.pipeline {
		total += c
	}
	relayReqs := float64(ph.pipeline["EventBridge.PutEvents"]+ph.pipeline["SQS.SendMessageBatch"]) / n
	// The submit's two requests (its transaction, its send) are the api's;
	// the relay's and the webhook deliveries' are theirs.
	system := float64(len(ph.durations[resources.FuncSystem])) / n
	pubReqs := math.Max(float64(total)/n-2-relayReqs-3*system, 1)
	job := time.Duration(pubReqs*float64(awsRequestLatency)) + time.Duration(ph.calls*float64(ph.latency))
	out := map[string]float64{
		resources.FuncPublisher: job.Seconds() * gb(resources.FuncPublisher),
		resources.FuncConfirm:   apiInvocation.Seconds() * gb(resources.FuncConfirm),
		resources.FuncRelay: (float64(len(ph.durations[resources.FuncRelay]))/n*awsRequestLatency.Seconds() +
			relayReqs*relayRequestLatency.Seconds()) * gb(resources.FuncRelay),
		resources.FuncSystem: system * (apiInvocation + 3*awsRequestLatency).Seconds() * gb(resources.FuncSystem),
	}
	for _, fn := range httpFunctions() {
		calls := float64(len(ph.durations[fn]))/n + float64(len(up.durations[fn]))/un
		out[fn] = calls * apiInvocation.Seconds() * gb(fn)
	}
	return out
}

// simCalls is how many calls the simulated external API has answered.
func simCalls(s *stack.Stack) int {
	n := 0
	for _, by := range s.Simulator.Stats().Calls {
		for _, c := range by {
			n += c
		}
	}
	return n
}

// Request latencies the capacity model assumes in AWS (same region, warm
// connections): the local emulators on a shared 2-core machine are one to
// two orders of magnitude slower, so the measured durations would make
// the model describe the emulator.
const (
	awsRequestLatency = 8 * time.Millisecond // DynamoDB, SQS, S3 first byte, KMS: typical single-digit ms
	// relayRequestLatency is a PutEvents of up to ten entries or a
	// SendMessageBatch: EventBridge answers in tens of ms.
	relayRequestLatency = 25 * time.Millisecond
	apiInvocation       = 30 * time.Millisecond // an API function invocation: a few AWS requests
)

// mixOf turns a phase into the capacity model's input: the measured
// request mix and external calls per job, priced in time with the AWS
// latencies above and the phase's simulator latency; batches full (the
// model is about saturation, when the queues have a backlog).
func mixOf(ph, up, reads, confirm phase) mix {
	n := float64(ph.n)
	m := mix{TierShare: map[job.Tier]float64{}, ClaimsPerJob: 1, SweepWCUPerJob: 6, EventsPerJob: ph.events,
		WriteUnitsPerJob: map[string]float64{}, Sweeps: sweepsMeasured}
	for k, u := range ph.pipelineUnits {
		if where, ok := strings.CutPrefix(k, "write "); ok {
			m.WriteUnitsPerJob[where] = u / n
		}
	}
	if u := m.WriteUnitsPerJob[resources.IndexBySweep]; u > 0 {
		m.SweepWCUPerJob = u / 3 // queued, running, finished: a partition each
	}
	for t, c := range ph.tiers {
		m.TierShare[job.Tier(t)] = float64(c) / n
	}
	total := 0
	for _, c := range ph.pipeline {
		total += c
	}
	// The submit's two requests (its transaction, its send) are the API's.
	pubReqs := math.Max(float64(total)/n-2, 1)
	job := time.Duration(pubReqs*float64(awsRequestLatency)) + time.Duration(ph.calls*float64(ph.latency))
	const batch = 10 // resources' BatchSize; a batch's jobs run in parallel
	m.PublisherBatchSeconds = job.Seconds()
	m.JobsPerBatch = batch
	m.PublisherSecondsPerJob = job.Seconds() / batch
	m.StatsWritesPerJob = 1 // an Update in each finishing transaction
	// The API's requests: the pipeline's and the client's own.
	m.APIRequestsPerJob = httpCalls(ph.durations)/n + httpCalls(up.durations)/float64(up.n)
	if reads.n > 0 {
		m.APIRequestsPerJob += httpCalls(reads.durations) / float64(reads.n)
	}
	if confirm.n > 0 {
		m.APIRequestsPerJob += httpCalls(confirm.durations) / float64(confirm.n)
	}
	m.APISecondsPerJob = m.APIRequestsPerJob * apiInvocation.Seconds()
	return m
}

// loadAverage is the machine's load when the bench started.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func pct(ds []time.Duration, p int) float64 {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := (len(s)*p + 99) / 100
	return ms(s[max(i-1, 0)])
}

// floor times bare emulator calls: the least any request can cost here.
// floor measures, one request at a time on an idle stack, the emulators'
// p50 for PutItem, SendMessage, ReceiveMessage and a TransactWriteItems
// shaped like a submission's (three conditional Puts and a conditional
// Update: job, idempotency record, event, upload reference) — the floor of
// what a submission itself asks of AWS is tx + send.
func floor(ctx context.Context, c awsclient.Clients, s *stack.Stack) (put, send, recv, tx float64, err error) {
	const k = 200
	var lp, ls, lr, lt []time.Duration
	// A queue of its own, so no consumer of the stack sees these messages.
	created, err := c.SQS.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("bench-floor.fifo"),
		Attributes: map[string]string{"FifoQueue": "true"}})
	if err != nil {
		return 0, 0, 0, 0, err
	}
	q := aws.ToString(created.QueueUrl)
	for i := range k {
		t0 := time.Now()
		if _, err = c.DynamoDB.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.Config.Table), Item: map[string]ddbtypes.AttributeValue{
			"pk": &ddbtypes.AttributeValueMemberS{Value: fmt.Sprintf("FLOOR#%d", i)}, "sk": &ddbtypes.AttributeValueMemberS{Value: "x"},
		}}); err != nil {
			return
		}
		lp = append(lp, time.Since(t0))
		t0 = time.Now()
		if _, err = c.DynamoDB.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: floorTx(s.Config.Table, i)}); err != nil {
			return
		}
		lt = append(lt, time.Since(t0))
		t0 = time.Now()
		if _, err = c.SQS.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(q), MessageBody: aws.String("floor"),
			MessageGroupId: aws.String(fmt.Sprint(i)), MessageDeduplicationId: aws.String(fmt.Sprintf("floor-%d", i))}); err != nil {
			return
		}
		ls = append(ls, time.Since(t0))
		t0 = time.Now()
		out, rerr := c.SQS.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(q), MaxNumberOfMessages: 1})
		if rerr != nil {
			return 0, 0, 0, 0, rerr
		}
		lr = append(lr, time.Since(t0))
		for _, m := range out.Messages {
			_, _ = c.SQS.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(q), ReceiptHandle: m.ReceiptHandle})
		}
	}
	return pct(lp, 50), pct(ls, 50), pct(lr, 50), pct(lt, 50), nil
}

// floorTx is the i-th submission-shaped transaction of floor: three new
// items and a reference added to the item PutItem just wrote.
func floorTx(table string, i int) []ddbtypes.TransactWriteItem {
	str := func(v string) *ddbtypes.AttributeValueMemberS { return &ddbtypes.AttributeValueMemberS{Value: v} }
	isNew := aws.String("attribute_not_exists(pk)")
	var tx []ddbtypes.TransactWriteItem
	for _, sk := range []string{"job", "idem", "event"} {
		tx = append(tx, ddbtypes.TransactWriteItem{Put: &ddbtypes.Put{TableName: aws.String(table), ConditionExpression: isNew,
			Item: map[string]ddbtypes.AttributeValue{"pk": str(fmt.Sprintf("FLOORTX#%d", i)), "sk": str(sk)}}})
	}
	return append(tx, ddbtypes.TransactWriteItem{Update: &ddbtypes.Update{TableName: aws.String(table),
		Key:                 map[string]ddbtypes.AttributeValue{"pk": str(fmt.Sprintf("FLOOR#%d", i)), "sk": str("x")},
		ConditionExpression: aws.String("attribute_exists(pk)"), UpdateExpression: aws.String("ADD refs :one"),
		ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":one": &ddbtypes.AttributeValueMemberN{Value: "1"}}}})
}

func buildBootstraps() (map[string]int64, error) {
	dir, err := os.MkdirTemp("", "conveyor-bench-bin")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	entries, err := os.ReadDir("functions")
	if err != nil {
		return nil, fmt.Errorf("run from the repository root: %w", err)
	}
	sizes := map[string]int64{}
	for _, e := range entries {
		out := filepath.Join(dir, e.Name(), "bootstrap")
		cmd := exec.Command("go", "build", "-tags", resources.LambdaBuildTags, "-trimpath", "-ldflags=-s -w", "-o", out, "./functions/"+e.Name())
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=arm64")
		if b, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("building %s: %v\n%s", e.Name(), err, b)
		}
		st, err := os.Stat(out)
		if err != nil {
			return nil, err
		}
		sizes[e.Name()] = st.Size()
	}
	return sizes, nil
}

func report(r result, counts map[string]int, n int, main, slow, up phase) {
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(w, "Conveyor bench — %d jobs, one item each, through the local gateway, pollers and simulator\n\n", n)
	printRequests(w, r, counts, n)
	if r.Noisy != nil {
		r.Noisy.print(w)
	}
	printBacklog(w, r)
	printUnits(w, r.DynamoDBUnitsPerJob)
	if r.RateCheck != nil {
		r.RateCheck.print(w)
	}
	printCPU(w, r.CPUMsPerJob)
	printLatencies(w, r)
	printEmulator(w, r)
	printUploads(w, up)
	printBill(w, r, "the whole bill, simulator at zero latency", r.BillZero)
	if slow.n > 0 {
		printBill(w, r, fmt.Sprintf("the whole bill, simulator at %.0f ms per call (%d jobs)", r.SimLatencyMs, slow.n), r.Bill)
	}
	printColdStarts(w, r.InitMs, r.ColdFirstResponseMs)
	printCapacity(w, r)
	fmt.Fprintf(w, "\nload average at start\t%s\n", r.LoadAverage)
	printPrices(w)
	w.Flush()
	printJSON(r)
}

// printRequests prints the AWS requests per job by operation (counts over
// n jobs), what they leave out (idle receives, the client's status reads),
// and the same by the function whose invocation made them.
func printRequests(w io.Writer, r result, counts map[string]int, n int) {
	fmt.Fprintln(w, "AWS requests per job\tcount")
	for _, op := range slices.Sorted(maps.Keys(counts)) {
		if counts[op] > 0 {
			fmt.Fprintf(w, "  %s\t%.3f\n", op, float64(counts[op])/float64(n))
		}
	}
	fmt.Fprintf(w, "  total\t%.3f\n", r.RequestsTotal)
	fmt.Fprintf(w, "  (left out: %.3f receives that found the queue empty — idle long polls, a fixed cost in the bill", r.IdleReceivesPerJob)
	for _, op := range slices.Sorted(maps.Keys(r.ClientReadsPerJob)) {
		fmt.Fprintf(w, "; client status reads %s %.3f", op, r.ClientReadsPerJob[op])
	}
	fmt.Fprintf(w, ")\n")
	fmt.Fprintln(w, "  by the function whose invocation made them (\"runtime\": the event source mappings' receives and deletes, idle ones included)")
	byFn := slices.Sorted(maps.Keys(r.RequestsByFunction))
	for _, k := range byFn {
		fn, op, _ := strings.Cut(k, " ")
		if fn == "" {
			fn = "runtime"
		}
		fmt.Fprintf(w, "    %s %s\t%.3f\n", fn, op, r.RequestsByFunction[k])
	}
	fmt.Fprintln(w)
}

// printBacklog prints the backlog phase's requests per job and drain, if
// it ran.
func printBacklog(w io.Writer, r result) {
	if r.BacklogJobs <= 0 {
		return
	}
	fmt.Fprintf(w, "A backlog: %d jobs submitted to paused tiers, then resumed (the mappings receive full batches)\n", r.BacklogJobs)
	fmt.Fprintf(w, "  AWS requests per job\t%.3f (receive %.3f, delete %.3f, PutEvents %.3f)\n", r.BacklogRequestsTotal,
		r.BacklogRequests["SQS.ReceiveMessage"], r.BacklogRequests["SQS.DeleteMessageBatch"], r.BacklogRequests["EventBridge.PutEvents"])
	fmt.Fprintf(w, "  drained at\t%.1f jobs/s from the resume (the first job started %.0f ms after it)\n\n", r.BacklogDrainPerS, r.BacklogFirstStartMs)
}

// printCPU prints the processor time per job of each part of the stack and
// the jobs a second this machine's cores could hold at that cost, if
// measured.
func printCPU(w io.Writer, c map[string]float64) {
	if len(c) == 0 {
		return
	}
	all := c["dynamodb_local"] + c["moto"] + c["go"]
	fmt.Fprintf(w, "CPU per job: DynamoDB Local / moto / Go (gateway, functions, simulator, bench)\t%.1f / %.1f / %.1f ms\n", c["dynamodb_local"], c["moto"], c["go"])
	if all > 0 {
		fmt.Fprintf(w, "  → on %d cores, at most\t%.0f jobs/s (the emulators' share: %.0f%%)\n\n", goruntime.NumCPU(), float64(goruntime.NumCPU())*1000/all, 100*(c["dynamodb_local"]+c["moto"])/all)
	}
}

// printLatencies prints the request charges per million jobs, the submit
// and end-to-end latencies, the throughput and the event lags.
func printLatencies(w io.Writer, r result) {
	fmt.Fprintf(w, "$ per million jobs (request charges; DynamoDB by capacity units)\t%.2f\n", r.USDPerMillion)
	fmt.Fprintf(w, "submit p50 / p95\t%.1f / %.1f ms\n", r.SubmitP50, r.SubmitP95)
	fmt.Fprintf(w, "end-to-end p50 / p95\t%.1f / %.1f ms\n", r.E2EP50, r.E2EP95)
	fmt.Fprintf(w, "throughput\t%.1f jobs/s\n", r.Throughput)
	if r.OfferedRate > 0 {
		fmt.Fprintf(w, "offered load (open loop, -rate)\t%.1f jobs/s\n", r.OfferedRate)
	}
	fmt.Fprintf(w, "event lag, transition → webhook received p50 / p95\t%.1f / %.1f ms\n", r.WebhookLagP50, r.WebhookLagP95)
	fmt.Fprintf(w, "SSE reads per idle client per minute\t%.1f\n", r.SSEReadsPerIdleClientPerMin)
	fmt.Fprintf(w, "event lag, transition → bus, p50 / p95\t%.1f / %.1f ms\n", r.EventLagBusP50, r.EventLagBusP95)
	for _, l := range r.LateEvents {
		fmt.Fprintf(w, "  (late: %s — the lag percentiles above are lower bounds)\n", l)
	}
	if !r.EventArchive {
		fmt.Fprintf(w, "  (measured without the bus's event archive: -event-archive=false)\n")
	}
}

// printEmulator prints the emulator's floors, submit p95 over them, the
// emulators' start times and the bootstraps' sizes.
func printEmulator(w io.Writer, r result) {
	fmt.Fprintf(w, "emulator floor p50: PutItem / SendMessage / ReceiveMessage\t%.2f / %.2f / %.2f ms\n", r.FloorPutItemP50, r.FloorSendP50, r.FloorReceiveP50)
	fmt.Fprintf(w, "emulator floor p50: submission's TransactWriteItems (4 items)\t%.2f ms\n", r.FloorSubmitTxP50)
	fmt.Fprintf(w, "submit p95 ÷ PutItem floor\t%.1f×\n", r.SubmitP95OverFloor)
	fmt.Fprintf(w, "submit p95 ÷ floor of its own requests (TransactWriteItems + SendMessage)\t%.1f×\n", r.SubmitP95OverOwnFloor)
	fmt.Fprintf(w, "emulator start: moto / DynamoDB Local\t%.0f / %.0f ms\n", r.EmulatorStartMs, r.DynamoDBStartMs)
	names := slices.Sorted(maps.Keys(r.BootstrapBytes))
	for _, k := range names {
		fmt.Fprintf(w, "bootstrap %s\t%.1f MB\n", k, float64(r.BootstrapBytes[k])/1e6)
	}
}

// printUploads prints the AWS requests per upload, if there were uploads.
func printUploads(w io.Writer, up phase) {
	if up.n <= 0 {
		return
	}
	fmt.Fprintf(w, "\nAWS requests per upload (sign, PUT, the S3 event's confirm; %d uploads)\tcount\n", up.n)
	ops := slices.Sorted(maps.Keys(up.pipeline))
	for _, op := range ops {
		if up.pipeline[op] > 0 {
			fmt.Fprintf(w, "  %s\t%.3f\n", op, float64(up.pipeline[op])/float64(up.n))
		}
	}
}

// printBill prints bill b under title, if there is one: its priced lines
// with their sources, its totals, its figures per job and per function.
func printBill(w io.Writer, r result, title string, b map[string]float64) {
	if b == nil {
		return
	}
	fmt.Fprintf(w, "\n%s (%s's configuration)\tUSD per million jobs\tprice source\n", title, r.BillEnv)
	keys := make([]string, 0, len(b))
	for k := range b {
		if !strings.HasPrefix(k, "total") && !strings.Contains(k, "per job") {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(w, "  %s\t%.2f\t%s\n", k, b[k], r.BillSources[k])
	}
	fmt.Fprintf(w, "  total\t%.2f\n", b["total"])
	fmt.Fprintf(w, "  total with Lambda durations at AWS latencies (%.4f GB-s per job)\t%.2f\n", b["lambda gb-seconds per job at aws latencies"], b["total at aws latencies"])
	fmt.Fprintf(w, "  the same without the client's calls (the pipeline's: sign, PUT, the S3 event's confirm, submit, the work)\t%.2f\n", b["total at aws latencies without the client's calls"])
	fmt.Fprintf(w, "  (per job: %.2f API Gateway requests, %.2f invocations, %.4f Lambda GB-s, %.1f events in the table, %.2f on the bus, %.0f log bytes (Lambda's own %.0f, access log %.0f), %.0f bytes stored in DynamoDB (%.0f in the table alone), %.3f traces)\n",
		b["api gateway requests per job"], b["lambda invocations per job"], b["lambda gb-seconds per job"], b["events per job"], b["eventbridge events per job"],
		b["log bytes per job"], b["log bytes per job lambda's own lines"], b["log bytes per job http api access log"],
		b["dynamodb bytes stored per job"], b["dynamodb bytes stored per job, table alone"], b["x-ray traces per job"])
	fmt.Fprintf(w, "  (the client's: %.0f status reads and %.0f explicit confirm a job, %.0f and %.0f log bytes)\n",
		b[lineClientReads+" calls per job"], b[lineClientConfirm+" calls per job"], b[lineClientReads+" log bytes per job"], b[lineClientConfirm+" log bytes per job"])
	fmt.Fprintf(w, "  per function\tMB\tGB-s per job measured | at AWS latencies\tlog bytes per job\n")
	for _, fn := range resources.For(job.Local).Functions {
		fmt.Fprintf(w, "    %s\t%d\t%.5f | %.5f\t%.0f\n", fn, resources.FunctionSizes[fn].MemoryMB,
			b["lambda gb-seconds per job "+fn], b["lambda gb-seconds per job at aws latencies "+fn], b["log bytes per job "+fn])
	}
	if v := b["log bytes per job "]; v > 0 {
		fmt.Fprintf(w, "    (outside any invocation)\t\t\t%.0f\n", v)
	}
}

// printColdStarts prints the cold starts' medians by binary, if measured.
func printColdStarts(w io.Writer, initMs, firstMs map[string]float64) {
	if len(initMs) == 0 {
		return
	}
	fmt.Fprintln(w, "\ncold start, medians: process start → first invocation/next (init) | → first answer posted\tms")
	for _, k := range slices.Sorted(maps.Keys(initMs)) {
		fmt.Fprintf(w, "  %s\t%.1f | %.1f\n", k, initMs[k], firstMs[k])
	}
}

// printCapacity prints the capacity model's limits and its first
// bottleneck, if it has limits.
func printCapacity(w io.Writer, r result) {
	if len(r.Capacity) == 0 {
		return
	}
	fmt.Fprintln(w, "\ncapacity model (sustained jobs/s at which each limit saturates)\tjobs/s")
	for _, l := range r.Capacity {
		v := "unbounded"
		if !math.IsInf(l.JobsPerS, 1) {
			v = fmt.Sprintf("%.0f", l.JobsPerS)
		}
		fmt.Fprintf(w, "  %s\t%s\t%s\n", l.Name, v, l.Reasoning)
	}
	fmt.Fprintf(w, "  first bottleneck\t%s at %.0f jobs/s\n", r.CapacityBottleneck, r.CapacityJobsPerS)
}

// printPrices prints every price class's source.
func printPrices(w io.Writer) {
	fmt.Fprintln(w, "\nprices (us-east-1):")
	classes := slices.Sorted(maps.Keys(prices))
	for _, k := range classes {
		fmt.Fprintf(w, "  %s\t%s\n", k, prices[k].source)
	}
}

// printJSON prints r as one JSON line, an unbounded limit's jobs a second
// as -1 (JSON has no infinity).
func printJSON(r result) {
	for i := range r.Capacity {
		if math.IsInf(r.Capacity[i].JobsPerS, 1) {
			r.Capacity[i].JobsPerS = -1 // unbounded: not job-bound
		}
	}
	b, _ := json.Marshal(r)
	fmt.Println(string(b))
}

// hookReceiver is a local webhook endpoint: it notes when each job's
// job.succeeded delivery arrives, against the event's own time.
type hookReceiver struct {
	mu  sync.Mutex
	lag map[string]time.Duration
}

func newHookReceiver() *hookReceiver { return &hookReceiver{lag: map[string]time.Duration{}} }

func (h *hookReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	now := time.Now()
	var ev struct {
		Type  string    `json:"type"`
		At    time.Time `json:"at"`
		JobID string    `json:"jobId"`
	}
	if err := json.NewDecoder(r.Body).Decode(&ev); err != nil || r.Header.Get("webhook-signature") == "" {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	h.mu.Lock()
	if _, dup := h.lag[ev.JobID]; !dup {
		h.lag[ev.JobID] = now.Sub(ev.At)
	}
	h.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

func (h *hookReceiver) wait(ids []string, limit time.Duration) ([]time.Duration, error) {
	deadline := time.Now().Add(limit)
	for {
		h.mu.Lock()
		got := len(h.lag)
		h.mu.Unlock()
		if got >= len(ids) {
			break
		}
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]time.Duration, 0, len(ids))
	for _, id := range ids {
		if lag, ok := h.lag[id]; ok {
			out = append(out, lag)
		} else {
			out = append(out, limit) // a lower bound
		}
	}
	if len(h.lag) < len(ids) {
		return out, fmt.Errorf("%d of %d webhooks arrived within %s", len(h.lag), len(ids), limit)
	}
	return out, nil
}

// buildHostBinaries builds every function and the hello world for this
// host with the deployment's flags (static, stripped, resources.LambdaBuildTags), for
// the cold-start runs.
func buildHostBinaries() (map[string]string, error) {
	dir, err := os.MkdirTemp("", "conveyor-bench-host")
	if err != nil {
		return nil, err
	}
	entries, err := os.ReadDir("functions")
	if err != nil {
		return nil, fmt.Errorf("run from the repository root: %w", err)
	}
	pkgs := map[string]string{"hello": "./localstack/cmd/hello"}
	for _, e := range entries {
		pkgs[e.Name()] = "./functions/" + e.Name()
	}
	out := map[string]string{}
	for name, pkg := range pkgs {
		bin := filepath.Join(dir, "fn", name, "bootstrap")
		cmd := exec.Command("go", "build", "-tags", resources.LambdaBuildTags, "-trimpath", "-ldflags=-s -w", "-o", bin, pkg)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if b, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("building %s: %v\n%s", name, err, b)
		}
		out[name] = bin
	}
	return out, nil
}

// baseline is the functions of another revision, built for this host.
type baseline struct {
	dir  string            // the revision's source; remove when done
	bins map[string]string // function → bootstrap
}

// buildBaseline builds the functions of git revision rev (exported with
// git archive into a temporary directory) with buildHostBinaries' flags.
func buildBaseline(rev string) (baseline, error) {
	dir, err := os.MkdirTemp("", "conveyor-bench-base")
	if err != nil {
		return baseline{}, err
	}
	archive := exec.Command("sh", "-c", `git archive "$1" | tar -x -C "$2"`, "sh", rev, dir)
	if b, err := archive.CombinedOutput(); err != nil {
		_ = os.RemoveAll(dir)
		return baseline{}, fmt.Errorf("exporting %s: %v\n%s", rev, err, b)
	}
	entries, err := os.ReadDir(filepath.Join(dir, "functions"))
	if err != nil {
		_ = os.RemoveAll(dir)
		return baseline{}, err
	}
	b := baseline{dir: dir, bins: map[string]string{}}
	for _, e := range entries {
		bin := filepath.Join(dir, "bin", e.Name(), "bootstrap")
		cmd := exec.Command("go", "build", "-tags", resources.LambdaBuildTags, "-trimpath", "-ldflags=-s -w", "-o", bin, "./functions/"+e.Name())
		cmd.Dir, cmd.Env = dir, append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			_ = os.RemoveAll(dir)
			return baseline{}, fmt.Errorf("building %s at %s: %v\n%s", e.Name(), rev, err, out)
		}
		b.bins[e.Name()] = bin
	}
	return b, nil
}

// idleStreamReads runs idle streams (a finished job's, and all of its
// owner's jobs) on a stream server whose DynamoDB client counts its own
// requests, and returns the reads per stream per minute.
func idleStreamReads(ctx context.Context, cfg aws.Config, s *stack.Stack, jobID string, owner int) (float64, error) {
	c := awsclient.NewCounter()
	ddb := awsclient.New(c.Attach(cfg)).DynamoDB
	st := store.New(ddb, s.Config.Table, nil)
	srv, err := stream.New(stream.Config{Store: st, Slots: st,
		PingInterval: s.Config.StreamPing, PollInterval: s.Config.StreamPoll, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return 0, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	reqs := []stream.Request{{Caller: fmt.Sprintf("bench-u%d", owner), JobID: jobID}, {Caller: fmt.Sprintf("bench-u%d", owner)}}
	var wg sync.WaitGroup
	for _, r := range reqs {
		sess, err := srv.Open(ctx, r)
		if err != nil {
			return 0, err
		}
		wg.Go(func() { _ = sess.Run(ctx, io.Discard, nil) })
	}
	time.Sleep(2 * time.Second) // past the snapshots
	reads := func() int {
		return c.Get("DynamoDB.Query") + c.Get("DynamoDB.GetItem") + c.Get("DynamoDB.BatchGetItem") + c.Get("DynamoDB.Scan")
	}
	r0, t0 := reads(), time.Now()
	time.Sleep(20 * time.Second)
	r1, el := reads(), time.Since(t0)
	cancel()
	wg.Wait()
	return float64(r1-r0) / float64(len(reqs)) / el.Minutes(), nil
}

// tapBus subscribes a standard queue of its own to the stack's bus: every
// event the relay puts arrives there, stamped (SentTimestamp) when the bus
// delivered it.
func tapBus(ctx context.Context, c awsclient.Clients, s *stack.Stack) (string, error) {
	def := s.Provisioned.Definition
	name := def.Prefix + "-bench-bus-tap"
	q, err := c.SQS.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name)})
	if err != nil {
		return "", err
	}
	pattern, _ := json.Marshal(map[string]any{"source": []string{resources.EventSource(def.Env)}})
	if _, err := c.EventBridge.PutRule(ctx, &eventbridge.PutRuleInput{Name: aws.String("bench-tap"), EventBusName: aws.String(def.EventBus),
		EventPattern: aws.String(string(pattern))}); err != nil {
		return "", err
	}
	if _, err := c.EventBridge.PutTargets(ctx, &eventbridge.PutTargetsInput{Rule: aws.String("bench-tap"), EventBusName: aws.String(def.EventBus),
		Targets: []ebtypes.Target{{Id: aws.String("tap"), Arn: aws.String("arn:aws:sqs:" + awsenv.DefaultRegion + ":123456789012:" + name),
			// Only the detail: moto renders a target's input with a JSONPath
			// parse per path per event, eight for a target without a
			// transformer (about 4 ms of its one process an event, as much as
			// the archive), which would slow the relay being measured.
			InputTransformer: &ebtypes.InputTransformer{InputPathsMap: map[string]string{"detail": "$.detail"},
				InputTemplate: aws.String(`{"detail": <detail>}`)}}}}); err != nil {
		return "", err
	}
	return aws.ToString(q.QueueUrl), nil
}

// tapReaders is how many readers drain the bus tap at once.
const tapReaders = 4

// busTap drains the tap queue, noting each event's lag (its "at", the
// transition, to its delivery by the bus) and which jobs' job.succeeded
// arrived.
type busTap struct {
	mu        sync.Mutex
	lags      map[string][]time.Duration
	succeeded map[string]bool
	err       error
}

func newBusTap() *busTap {
	return &busTap{lags: map[string][]time.Duration{}, succeeded: map[string]bool{}}
}

func (t *busTap) drain(ctx context.Context, c awsclient.Clients, url string) {
	for ctx.Err() == nil {
		out, err := c.SQS.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 10, WaitTimeSeconds: 1,
			MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameSentTimestamp}})
		if err != nil {
			if ctx.Err() == nil {
				t.mu.Lock()
				t.err = err
				t.mu.Unlock()
			}
			return
		}
		var del []sqstypes.DeleteMessageBatchRequestEntry
		for i, m := range out.Messages {
			var ev struct {
				Detail relay.Body `json:"detail"`
			}
			if err := json.Unmarshal([]byte(aws.ToString(m.Body)), &ev); err == nil {
				at, aerr := time.Parse(time.RFC3339Nano, ev.Detail.At)
				sent, serr := strconv.ParseInt(m.Attributes[string(sqstypes.MessageSystemAttributeNameSentTimestamp)], 10, 64)
				t.mu.Lock()
				if aerr == nil && serr == nil {
					t.lags[ev.Detail.JobID] = append(t.lags[ev.Detail.JobID], time.UnixMilli(sent).Sub(at))
				}
				if ev.Detail.Type == job.EventSucceeded {
					t.succeeded[ev.Detail.JobID] = true
				}
				t.mu.Unlock()
			}
			del = append(del, sqstypes.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: m.ReceiptHandle})
		}
		if len(del) > 0 {
			_, _ = c.SQS.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(url), Entries: del})
		}
	}
}

// wait returns the lags of every event of jobIDs once each job's
// job.succeeded reached the bus.
func (t *busTap) wait(jobIDs []string, limit time.Duration) ([]time.Duration, error) {
	deadline := time.Now().Add(limit)
	for {
		t.mu.Lock()
		missing, err := 0, t.err
		for _, id := range jobIDs {
			if !t.succeeded[id] {
				missing++
			}
		}
		if err != nil || missing == 0 {
			var lags []time.Duration
			for _, id := range jobIDs {
				lags = append(lags, t.lags[id]...)
			}
			t.mu.Unlock()
			return lags, err
		}
		t.mu.Unlock()
		if time.Now().After(deadline) {
			t.mu.Lock()
			var lags []time.Duration
			for _, id := range jobIDs {
				lags = append(lags, t.lags[id]...)
				if !t.succeeded[id] {
					lags = append(lags, limit) // a lower bound
				}
			}
			t.mu.Unlock()
			return lags, fmt.Errorf("%d jobs' job.succeeded never reached the bus within %s", missing, limit)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// coldStarts starts every function (with the environment its CDK stack
// gives it, against the emulators) and the hello world, runs times each,
// interleaved, each start a fresh instance under the local Runtime API,
// and returns the medians of the time from process start to the first
// invocation/next (Lambda's Init Duration) and to the first invocation's
// answer, in ms. The functions that verify tokens get, as their first
// invocation, a request bearing one (coldRequest), so the answer waits
// for the key wherever the function reads it.
func coldStarts(ctx context.Context, ep awsclient.Endpoints, bins map[string]string, runs int) (initMs, firstMs map[string]float64, err error) {
	st, err := stack.Start(ctx, stack.Options{
		Endpoints: ep, APIAddr: "127.0.0.1:0", StreamAddr: "127.0.0.1:0", Prefix: "benchcold", Binaries: true, Bootstraps: bins,
		DisablePollers: true, Getenv: func(string) string { return "" }, Metrics: io.Discard, FunctionOutput: io.Discard,
		Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)),
	})
	if err != nil {
		return nil, nil, fmt.Errorf("starting the functions' binaries: %w", err)
	}
	defer st.Close()
	cfgs := map[string]lambdaruntime.FunctionConfig{}
	for name, fn := range st.Functions.Binaries {
		cfgs[name] = fn.Config()
	}
	for name, bin := range bins { // another revision's functions (-coldstart-baseline): name@rev
		if fn, rev, ok := strings.Cut(name, "@"); ok {
			if c, known := cfgs[fn]; known {
				c.Name, c.Bootstrap = fn+"-"+rev, bin
				cfgs[name] = c
			}
		}
	}
	cfgs["hello"] = lambdaruntime.FunctionConfig{Name: "hello", Bootstrap: bins["hello"], MemoryMB: 128, Timeout: 10 * time.Second, Output: io.Discard,
		Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))}
	names := slices.Sorted(maps.Keys(cfgs))
	samples, answers := map[string][]time.Duration{}, map[string][]time.Duration{}
	for r := range runs {
		for k := range names {
			name := names[(k+r)%len(names)] // rotate the order every run
			fn, err := lambdaruntime.NewFunction(cfgs[name])
			if err != nil {
				return nil, nil, err
			}
			payload, err := coldRequest(name)
			if err != nil {
				return nil, nil, err
			}
			ictx, cancel := context.WithTimeout(ctx, 10*time.Second)
			_, _ = fn.Invoke(ictx, payload) // the answer does not matter: it was posted
			cancel()
			if cs := fn.ColdStarts(); len(cs) > 0 {
				samples[name] = append(samples[name], cs[0])
			}
			if fa := fn.FirstAnswers(); len(fa) > 0 {
				answers[name] = append(answers[name], fa[0])
			}
			_ = fn.Close()
		}
	}
	initMs, firstMs = map[string]float64{}, map[string]float64{}
	for name, s := range samples {
		initMs[name] = pct(s, 50)
	}
	for name, s := range answers {
		firstMs[name] = pct(s, 50)
	}
	return initMs, firstMs, nil
}

// coldRequest is the first invocation a cold-start run sends name: for
// the functions that verify tokens, a request to a route of theirs with a
// bearer token signed by another key, which they can refuse (401) only
// once they hold the deployment's key; for the others (and hello world)
// an empty event.
func coldRequest(name string) ([]byte, error) {
	name, _, _ = strings.Cut(name, "@") // a baseline's function is asked the same
	if !resources.ReadsJWTSecret(name) {
		return []byte(`{}`), nil
	}
	tok, err := httpapi.Mint([]byte("cold-start-probe-not-the-deployment-key"), httpapi.Claims{
		Subject: "cold-start-probe", Role: httpapi.RoleAdmin, ExpiresAt: time.Now().Add(time.Hour)})
	if err != nil {
		return nil, err
	}
	path := "/v1/jobs"
	switch name {
	case resources.FuncAdmin:
		path = resources.AdminPathPrefix + "overview"
	case resources.FuncUploads:
		path = resources.UploadsPathPrefix + "upl_coldstartprobe"
	case resources.FuncSchedules:
		path = resources.SchedulesPath
	case resources.FuncStream:
		path = "/v1/events"
	}
	headers := map[string]string{"authorization": "Bearer " + tok}
	if name == resources.FuncStream {
		return json.Marshal(events.LambdaFunctionURLRequest{RawPath: path, Headers: headers,
			RequestContext: events.LambdaFunctionURLRequestContext{HTTP: events.LambdaFunctionURLRequestContextHTTPDescription{Method: http.MethodGet, Path: path}}})
	}
	return json.Marshal(events.APIGatewayV2HTTPRequest{RawPath: path, Headers: headers,
		RequestContext: events.APIGatewayV2HTTPRequestContext{HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: http.MethodGet, Path: path}}})
}

// printUnits prints the DynamoDB capacity units per job: read, write, and
// where the write units went (the table, each index), largest first.
func printUnits(w io.Writer, u map[string]float64) {
	if len(u) == 0 {
		return
	}
	fmt.Fprintf(w, "DynamoDB capacity units per job (as reported)\t\n  read\t%.1f\n  write\t%.1f\n", u["read"], u["write"])
	var where []string
	for k := range u {
		if strings.HasPrefix(k, "write ") {
			where = append(where, k)
		}
	}
	sort.Slice(where, func(i, j int) bool { return u[where[i]] > u[where[j]] })
	for _, k := range where {
		fmt.Fprintf(w, "    %s\t%.1f\n", strings.TrimPrefix(k, "write "), u[k])
	}
	fmt.Fprintln(w)
}
