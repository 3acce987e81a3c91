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
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/conveyor/conveyor/internal/auth"
	"github.com/conveyor/conveyor/internal/awsclient"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/relay"
	"github.com/conveyor/conveyor/internal/resources"
	"github.com/conveyor/conveyor/internal/store"
	"github.com/conveyor/conveyor/internal/stream"
	"github.com/conveyor/conveyor/localstack/apiclient"
	"github.com/conveyor/conveyor/localstack/emulator"
	"github.com/conveyor/conveyor/localstack/stack"
)

// price is the list price of one request in USD, us-east-1, with its source
// and the day it was read. DynamoDB prices assume each request consumes one
// capacity unit (items ≤ 1 KB write / 4 KB read; transactions count double);
// Conveyor's job items are 2–4 KB, so writes are undercounted by that factor.
type price struct {
	usd    float64
	source string
}

var prices = map[string]price{
	"DynamoDB.write": {0.625 / 1e6, "aws.amazon.com/dynamodb/pricing/on-demand, 2026-11-22: $0.625 per million write request units"},
	"DynamoDB.read":  {0.125 / 1e6, "aws.amazon.com/dynamodb/pricing/on-demand, 2026-11-22: $0.125 per million read request units"},
	"SQS":            {0.50 / 1e6, "aws.amazon.com/sqs/pricing, 2026-11-22: FIFO $0.50 per million requests"},
	"S3.write":       {0.005 / 1e3, "aws.amazon.com/s3/pricing, 2026-11-22: PUT/COPY/POST/LIST $0.005 per 1,000"},
	"S3.read":        {0.0004 / 1e3, "aws.amazon.com/s3/pricing, 2026-11-22: GET/HEAD $0.0004 per 1,000"},
	"KMS":            {0.03 / 1e4, "aws.amazon.com/kms/pricing, 2026-11-22: $0.03 per 10,000 requests"},
	"EventBridge":    {1.00 / 1e6, "aws.amazon.com/eventbridge/pricing, 2026-11-22: $1.00 per million events"},
	"Lambda":         {0.20 / 1e6, "aws.amazon.com/lambda/pricing, 2026-11-22: $0.20 per million requests (duration not included)"},
}

// priceOf maps "Service.Operation" to its price class and units.
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
		return "EventBridge", 1
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
	BootstrapBytes     map[string]int64   `json:"bootstrap_bytes"`
	FloorPutItemP50    float64            `json:"floor_putitem_p50_ms"`
	FloorSendP50       float64            `json:"floor_sendmessage_p50_ms"`
	FloorReceiveP50    float64            `json:"floor_receivemessage_p50_ms"`
	SubmitP95OverFloor float64            `json:"submit_p95_over_floor_putitem_p50"`
	EmulatorStartMs    float64            `json:"emulator_start_ms"`
	DynamoDBStartMs    float64            `json:"dynamodb_local_start_ms"`
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
}

func main() {
	n := flag.Int("jobs", 1000, "jobs to push through")
	conc := flag.Int("concurrency", 16, "concurrent submitters")
	users := flag.Int("users", 20, "distinct users (each with a connected account and one upload)")
	skipBuild := flag.Bool("skip-build", false, "do not build the bootstraps")
	flag.Parse()
	if err := run(*n, *conc, *users, *skipBuild); err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		os.Exit(1)
	}
}

func progress(format string, args ...any) { fmt.Fprintf(os.Stderr, "bench: "+format+"\n", args...) }

func run(n, conc, users int, skipBuild bool) error {
	ctx := context.Background()
	var res result
	res.Jobs = n
	if !skipBuild {
		progress("building the bootstraps (linux/arm64)")
		sizes, err := buildBootstraps()
		if err != nil {
			return err
		}
		res.BootstrapBytes = sizes
	}
	progress("starting private emulators (moto, DynamoDB Local), simulator and stack")
	emu, err := emulator.StartAll(ctx, emulator.AllOptions{})
	if err != nil {
		return err
	}
	defer emu.Stop()
	res.EmulatorStartMs, res.DynamoDBStartMs = ms(emu.Moto.Started), ms(emu.DynamoDB.Started)
	counter := awsclient.NewCounter()
	env := map[string]string{"CONVEYOR_HEARTBEAT_INTERVAL": "30s"}
	s, err := stack.Start(ctx, stack.Options{
		Endpoints: emu.Endpoints(), APIAddr: "127.0.0.1:0", Prefix: "bench",
		Getenv: func(k string) string { return env[k] }, Counter: counter, PollerConcurrency: 8,
		Logger: slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})), Metrics: io.Discard,
	})
	if err != nil {
		return err
	}
	defer s.Close()

	progress("measuring the emulator's floor")
	floorCfg := awsclient.ForEndpoint(emu.Endpoints(), awsclient.DefaultRegion)
	res.FloorPutItemP50, res.FloorSendP50, res.FloorReceiveP50, err = floor(ctx, awsclient.New(floorCfg), s)
	if err != nil {
		return err
	}

	progress("preparing %d users", users)
	tokens := make([]string, users)
	uploads := make([]string, users)
	for i := range users {
		tok, err := auth.Mint(s.Config.JWTSecret, auth.Claims{Subject: fmt.Sprintf("bench-u%d", i), Role: auth.RoleUser, Plan: []string{"free", "pro", "enterprise"}[i%3], ExpiresAt: time.Now().Add(2 * time.Hour)})
		if err != nil {
			return err
		}
		tokens[i] = tok
		if _, err := apiclient.Call(s.APIURL, "PUT", "/v1/account/connection", tok, map[string]any{"provider": "deviantart", "refreshToken": fmt.Sprintf("rt-bench-%d-%d", i, time.Now().UnixNano())}); err != nil {
			return err
		}
		if uploads[i], err = apiclient.Upload(s.APIURL, tok, apiclient.PNG(64)); err != nil {
			return err
		}
	}

	hooks := newHookReceiver()
	hookSrv := httptest.NewServer(hooks)
	defer hookSrv.Close()
	for _, tok := range tokens {
		if _, err := apiclient.Call(s.APIURL, "POST", "/v1/webhooks", tok, map[string]any{"url": hookSrv.URL, "events": []string{"job.succeeded"}}); err != nil {
			return fmt.Errorf("registering a webhook endpoint: %w", err)
		}
	}

	tap, err := tapBus(ctx, awsclient.New(floorCfg), s)
	if err != nil {
		return err
	}
	counter.Reset()
	progress("submitting %d jobs with %d submitters", n, conc)
	submitLat := make([]time.Duration, n)
	jobIDs := make([]string, n)
	owner := make([]int, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	var firstErr error
	var errOnce sync.Once
	start := time.Now()
	for range conc {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				u := i % users
				t0 := time.Now()
				body, err := apiclient.Call(s.APIURL, "POST", "/v1/jobs", tokens[u], map[string]any{
					"items": []any{map[string]any{"uploadId": uploads[u]}}, "params": map[string]any{"title": fmt.Sprintf("bench job %d", i)},
				})
				submitLat[i] = time.Since(t0)
				if err != nil {
					errOnce.Do(func() { firstErr = err })
					return
				}
				jobIDs[i], owner[i] = body["id"].(string), u
				if (i+1)%(max(n/10, 1)) == 0 {
					progress("submitted %d/%d", i+1, n)
				}
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	progress("waiting for every job to finish")
	// Poll through a store of our own: the bench's reads are not the product's.
	poll := store.New(awsclient.New(floorCfg).DynamoDB, s.Config.Table, nil)
	e2e := make([]time.Duration, 0, n)
	var last time.Time
	deadline := time.Now().Add(10 * time.Minute)
	for i, id := range jobIDs {
		for {
			j, err := poll.GetJob(ctx, id)
			if err != nil {
				return err
			}
			if j.Status == "succeeded" || j.Status == "failed" {
				if j.Status == "failed" {
					return fmt.Errorf("job %s failed: %+v", id, j.Error)
				}
				e2e = append(e2e, j.FinishedAt.Sub(j.CreatedAt))
				if j.FinishedAt.After(last) {
					last = *j.FinishedAt
				}
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("job %s still %s after 10 minutes", id, j.Status)
			}
			time.Sleep(100 * time.Millisecond)
		}
		if (i+1)%(max(n/10, 1)) == 0 {
			progress("finished %d/%d", i+1, n)
		}
	}
	counts := counter.Snapshot()
	progress("waiting for every job.succeeded webhook")
	lags, err := hooks.wait(jobIDs, 3*time.Minute)
	if err != nil {
		return err
	}
	res.WebhookLagP50, res.WebhookLagP95 = pct(lags, 50), pct(lags, 95)
	progress("counting the reads of idle SSE streams")
	if res.SSEReadsPerIdleClientPerMin, err = idleStreamReads(ctx, floorCfg, s, jobIDs[0], owner[0]); err != nil {
		return err
	}
	progress("reading the events the bus delivered")
	lags, err = busLags(ctx, awsclient.New(floorCfg), tap, jobIDs)
	if err != nil {
		return err
	}
	res.EventLagBusP50, res.EventLagBusP95 = pct(lags, 50), pct(lags, 95)
	res.Throughput = float64(n) / last.Sub(start).Seconds()
	res.SubmitP50, res.SubmitP95 = pct(submitLat, 50), pct(submitLat, 95)
	res.E2EP50, res.E2EP95 = pct(e2e, 50), pct(e2e, 95)
	res.RequestsPerJob = map[string]float64{}
	var usd float64
	for op, c := range counts {
		if c <= 0 {
			continue
		}
		per := float64(c) / float64(n)
		svc, _, _ := strings.Cut(op, ".")
		res.RequestsPerJob[svc] += per
		res.RequestsTotal += per
		class, units := priceOf(op)
		usd += per * units * prices[class].usd * 1e6
	}
	// Lambda invocations: one API call per submit, publisher batches.
	usd += 2 * prices["Lambda"].usd * 1e6
	res.USDPerMillion = usd
	if res.FloorPutItemP50 > 0 {
		res.SubmitP95OverFloor = res.SubmitP95 / res.FloorPutItemP50
	}
	report(res, counts, n)
	return nil
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
func floor(ctx context.Context, c awsclient.Clients, s *stack.Stack) (put, send, recv float64, err error) {
	const k = 200
	var lp, ls, lr []time.Duration
	// A queue of its own, so no consumer of the stack sees these messages.
	created, err := c.SQS.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("bench-floor.fifo"),
		Attributes: map[string]string{"FifoQueue": "true"}})
	if err != nil {
		return 0, 0, 0, err
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
		if _, err = c.SQS.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(q), MessageBody: aws.String("floor"),
			MessageGroupId: aws.String(fmt.Sprint(i)), MessageDeduplicationId: aws.String(fmt.Sprintf("floor-%d", i))}); err != nil {
			return
		}
		ls = append(ls, time.Since(t0))
		t0 = time.Now()
		out, rerr := c.SQS.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(q), MaxNumberOfMessages: 1})
		if rerr != nil {
			return 0, 0, 0, rerr
		}
		lr = append(lr, time.Since(t0))
		for _, m := range out.Messages {
			_, _ = c.SQS.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(q), ReceiptHandle: m.ReceiptHandle})
		}
	}
	return pct(lp, 50), pct(ls, 50), pct(lr, 50), nil
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
		cmd := exec.Command("go", "build", "-tags", "lambda.norpc", "-trimpath", "-ldflags=-s -w", "-o", out, "./functions/"+e.Name())
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

func report(r result, counts map[string]int, n int) {
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(w, "Conveyor bench — %d jobs, one item each, through the local gateway, pollers and simulator\n\n", n)
	fmt.Fprintln(w, "AWS requests per job\tcount")
	ops := make([]string, 0, len(counts))
	for op := range counts {
		ops = append(ops, op)
	}
	sort.Strings(ops)
	for _, op := range ops {
		if counts[op] > 0 {
			fmt.Fprintf(w, "  %s\t%.3f\n", op, float64(counts[op])/float64(n))
		}
	}
	fmt.Fprintf(w, "  total\t%.3f\n\n", r.RequestsTotal)
	fmt.Fprintf(w, "$ per million jobs (request charges)\t%.2f\n", r.USDPerMillion)
	fmt.Fprintf(w, "submit p50 / p95\t%.1f / %.1f ms\n", r.SubmitP50, r.SubmitP95)
	fmt.Fprintf(w, "end-to-end p50 / p95\t%.1f / %.1f ms\n", r.E2EP50, r.E2EP95)
	fmt.Fprintf(w, "throughput\t%.1f jobs/s\n", r.Throughput)
	fmt.Fprintf(w, "event lag, transition → webhook received p50 / p95\t%.1f / %.1f ms\n", r.WebhookLagP50, r.WebhookLagP95)
	fmt.Fprintf(w, "SSE reads per idle client per minute\t%.1f\n", r.SSEReadsPerIdleClientPerMin)
	fmt.Fprintf(w, "event lag, transition → bus, p50 / p95\t%.1f / %.1f ms\n", r.EventLagBusP50, r.EventLagBusP95)
	fmt.Fprintf(w, "emulator floor p50: PutItem / SendMessage / ReceiveMessage\t%.2f / %.2f / %.2f ms\n", r.FloorPutItemP50, r.FloorSendP50, r.FloorReceiveP50)
	fmt.Fprintf(w, "submit p95 ÷ PutItem floor\t%.1f×\n", r.SubmitP95OverFloor)
	fmt.Fprintf(w, "emulator start: moto / DynamoDB Local\t%.0f / %.0f ms\n", r.EmulatorStartMs, r.DynamoDBStartMs)
	names := make([]string, 0, len(r.BootstrapBytes))
	for k := range r.BootstrapBytes {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		fmt.Fprintf(w, "bootstrap %s\t%.1f MB\n", k, float64(r.BootstrapBytes[k])/1e6)
	}
	fmt.Fprintln(w, "\nprices (us-east-1):")
	classes := make([]string, 0, len(prices))
	for k := range prices {
		classes = append(classes, k)
	}
	sort.Strings(classes)
	for _, k := range classes {
		fmt.Fprintf(w, "  %s\t%s\n", k, prices[k].source)
	}
	w.Flush()
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
			return nil, fmt.Errorf("%d of %d webhooks arrived within %s", got, len(ids), limit)
		}
		time.Sleep(200 * time.Millisecond)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]time.Duration, 0, len(ids))
	for _, id := range ids {
		out = append(out, h.lag[id])
	}
	return out, nil
}

// idleStreamReads runs idle streams (a finished job's, and all of its
// owner's jobs) on a stream server whose DynamoDB client counts its own
// requests, and returns the reads per stream per minute.
func idleStreamReads(ctx context.Context, cfg aws.Config, s *stack.Stack, jobID string, owner int) (float64, error) {
	c := awsclient.NewCounter()
	ddb := awsclient.New(c.Attach(cfg)).DynamoDB
	srv, err := stream.New(stream.Config{Store: store.New(ddb, s.Config.Table, nil), DB: ddb, Table: s.Config.Table,
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
		Targets: []ebtypes.Target{{Id: aws.String("tap"), Arn: aws.String("arn:aws:sqs:" + awsclient.DefaultRegion + ":123456789012:" + name)}}}); err != nil {
		return "", err
	}
	return aws.ToString(q.QueueUrl), nil
}

// busLags drains the tap until every job's job.succeeded arrived, and
// returns, per event, the time from the event (its "at", the transition)
// to its delivery by the bus.
func busLags(ctx context.Context, c awsclient.Clients, url string, jobIDs []string) ([]time.Duration, error) {
	waiting := map[string]bool{}
	for _, id := range jobIDs {
		waiting[id] = true
	}
	var lags []time.Duration
	deadline := time.Now().Add(10 * time.Minute)
	for len(waiting) > 0 {
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%d jobs' job.succeeded never reached the bus", len(waiting))
		}
		out, err := c.SQS.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 10, WaitTimeSeconds: 1,
			MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameSentTimestamp}})
		if err != nil {
			return nil, err
		}
		var del []sqstypes.DeleteMessageBatchRequestEntry
		for i, m := range out.Messages {
			var ev struct {
				Detail relay.Body `json:"detail"`
			}
			if err := json.Unmarshal([]byte(aws.ToString(m.Body)), &ev); err != nil {
				return nil, fmt.Errorf("a bus event that is not JSON: %w", err)
			}
			at, err := time.Parse(time.RFC3339Nano, ev.Detail.At)
			sent, serr := strconv.ParseInt(m.Attributes[string(sqstypes.MessageSystemAttributeNameSentTimestamp)], 10, 64)
			if err == nil && serr == nil {
				lags = append(lags, time.UnixMilli(sent).Sub(at))
			}
			if ev.Detail.Type == job.EventSucceeded {
				delete(waiting, ev.Detail.JobID)
			}
			del = append(del, sqstypes.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: m.ReceiptHandle})
		}
		if len(del) > 0 {
			if _, err := c.SQS.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(url), Entries: del}); err != nil {
				return nil, err
			}
		}
	}
	return lags, nil
}
