package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/conveyor/conveyor/internal/aws/awsclient"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/resources"
	"github.com/conveyor/conveyor/localstack/lambdaruntime"
)

// Prices of what the bill adds beyond requests: logs, traces, the event
// archive and storage (us-east-1 list prices, the page named, the day the
// figure was checked). GB is 2³⁰ bytes, a month 730 hours, as AWS bills.
// Free tiers are left out: an account's other workloads may use them.
var storagePrices = map[string]price{
	"Logs.ingest":      {0.50 / gb, "aws.amazon.com/cloudwatch/pricing, 2026-11-28: Logs, Standard log class: data ingestion $0.50 per GB (Lambda's logs, vended: $0.50 per GB for the first 10 TB; the HTTP API's access log, custom: $0.50 per GB)"},
	"Logs.store":       {0.03 / gb, "aws.amazon.com/cloudwatch/pricing, 2026-11-28: Logs, storage (archival) $0.03 per GB-month"},
	"XRay.trace":       {5.00 / 1e6, "aws.amazon.com/xray/pricing, 2026-11-28: traces recorded $5.00 per million (after 100,000 free a month); Lambda's active tracing samples one invocation a second and 5 % of the rest, not configurable (docs.aws.amazon.com/lambda/latest/dg/services-xray.html)"},
	"Archive.ingest":   {0.10 / gb, "aws.amazon.com/eventbridge/pricing, 2026-11-28: archive, events processed $0.10 per GB"},
	"Archive.store":    {0.023 / gb, "aws.amazon.com/eventbridge/pricing, 2026-11-28: archive storage $0.023 per GB-month"},
	"DynamoDB.storage": {0.25 / gb, "aws.amazon.com/dynamodb/pricing/on-demand, 2026-11-28: data storage, Standard table class, $0.25 per GB-month (after the first 25 GB)"},
	"DynamoDB.pitr":    {0.20 / gb, "aws.amazon.com/dynamodb/pricing/on-demand, 2026-11-28: continuous backups (PITR) $0.20 per GB-month of the table's size, its data and local secondary indexes (not its global ones: docs.aws.amazon.com/amazondynamodb/latest/developerguide/PointInTimeRecovery_Howitworks.html)"},
	"S3.storage":       {0.023 / gb, "aws.amazon.com/s3/pricing, 2026-11-28: S3 Standard storage $0.023 per GB-month (first 50 TB)"},
}

const (
	gb    = 1 << 30
	month = 730 * time.Hour
)

// months is d in billed months.
func months(d time.Duration) float64 { return d.Hours() / month.Hours() }

// billEnv is what the bill reads of a cloud environment's configuration
// (infra/env/<env>.json, the file `cdk deploy` reads): the logs' retention,
// the level of Lambda's own log lines and whether functions trace; the
// resource definition gives the rest (the archive's retention, PITR).
type billEnv struct {
	Env              job.Env `json:"-"`
	LogRetentionDays int     `json:"logRetentionDays"`
	Tracing          struct {
		Enabled bool `json:"enabled"`
	} `json:"tracing"`
	SystemLogLevel string `json:"systemLogLevel"`
}

// systemLevel is the environment's system log level, WARN when unset (as
// the CDK stack applies it: infra/stack, Config.SystemLevel).
func (e billEnv) systemLevel() string {
	if e.SystemLogLevel == "" {
		return "WARN"
	}
	return e.SystemLogLevel
}

// readBillEnv reads env's deploy configuration from infra/env.
func readBillEnv(env job.Env) (billEnv, error) {
	root, err := lambdaruntime.ModuleRoot()
	if err != nil {
		return billEnv{}, err
	}
	path := filepath.Join(root, "infra", "env", string(env)+".json")
	b, err := os.ReadFile(path)
	if err != nil {
		return billEnv{}, fmt.Errorf("the bill's environment: %w", err)
	}
	var c billEnv
	if err := json.Unmarshal(b, &c); err != nil {
		return billEnv{}, fmt.Errorf("%s: %w", path, err)
	}
	c.Env = env
	return c, nil
}

// logBytes counts the bytes each function writes to its output, its
// CloudWatch log group: the log lines at Info and above and the EMF metric
// lines (stack.Options.FunctionOutputs).
type logBytes struct {
	mu sync.Mutex
	by map[string]int64
}

func newLogBytes() *logBytes { return &logBytes{by: map[string]int64{}} }

// writer is function fn's output.
func (l *logBytes) writer(fn string) io.Writer { return logWriter{l: l, fn: fn} }

// take returns the bytes written since the last take, by function.
func (l *logBytes) take() map[string]int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.by
	l.by = map[string]int64{}
	return out
}

type logWriter struct {
	l  *logBytes
	fn string
}

func (w logWriter) Write(p []byte) (int, error) {
	w.l.mu.Lock()
	w.l.by[w.fn] += int64(len(p))
	w.l.mu.Unlock()
	return len(p), nil
}

// platformLogBytes is what Lambda itself writes to a function's log group
// per invocation that succeeds, in the JSON log format the stacks use, at
// system log level level: nothing at WARN; the platform.start and
// platform.report lines at INFO; platform.runtimeDone too at DEBUG. (A
// cold start adds its init lines at INFO, and an active trace a tracing
// object to each line: both left out.)
func platformLogBytes(level string) int {
	id := "8f507cfc-2f32-4697-b07a-ac58fc914c95"
	start := `{"time":"2026-11-28T18:50:00.000Z","type":"platform.start","record":{"requestId":"` + id + `","version":"$LATEST"}}` + "\n"
	report := `{"time":"2026-11-28T18:50:00.032Z","type":"platform.report","record":{"requestId":"` + id +
		`","metrics":{"durationMs":31.52,"billedDurationMs":32,"memorySizeMB":256,"maxMemoryUsedMB":48},"status":"success"}}` + "\n"
	done := `{"time":"2026-11-28T18:50:00.031Z","type":"platform.runtimeDone","record":{"requestId":"` + id +
		`","status":"success","metrics":{"durationMs":31.2,"producedBytes":512}}}` + "\n"
	switch level {
	case "WARN":
		return 0
	case "INFO":
		return len(start) + len(report)
	}
	return len(start) + len(report) + len(done)
}

// accessLogSample is a browser's submit as each API Gateway context
// variable of resources.AccessLogFields shows it.
var accessLogSample = map[string]string{
	"$context.requestId": "Jx1AbcdEfGhIjKA=", "$context.requestTimeEpoch": "1795887000000",
	"$context.identity.sourceIp": "203.0.113.27", "$context.httpMethod": "POST", "$context.path": "/v1/jobs",
	"$context.status": "201", "$context.responseLatency": "41", "$context.integrationErrorMessage": "-",
}

// accessLogBytes is one line of the HTTP API's access log
// (resources.AccessLogFields) with the values a browser's submit gives it.
var accessLogBytes = func() int {
	line := map[string]string{}
	for k, v := range resources.AccessLogFields {
		line[k] = accessLogSample[v]
	}
	b, _ := json.Marshal(line)
	return len(b) + 1
}()

// lambdaSampleRate is Lambda's active tracing beyond its reservoir of one
// invocation a second.
const lambdaSampleRate = 0.05

// tracesPerMonth is how many traces X-Ray records in a month when every
// function traces actively, from each function's invocations a month:
// Lambda samples the first invocation of each second and 5 % of the rest,
// a rate no X-Ray sampling rule changes. Each function is taken to sample
// on its own, its invocations arriving at random (Poisson): the seconds
// with at least one are 1 − e^−λ of the month. An upper bound: one
// reservoir for the whole account would trace fewer, and an invocation
// whose caller passed an unsampled trace header is not traced.
func tracesPerMonth(invocations map[string]float64) float64 {
	seconds := month.Seconds()
	total := 0.0
	for _, n := range invocations {
		reservoir := seconds * (1 - math.Exp(-n/seconds))
		total += reservoir + lambdaSampleRate*(n-reservoir)
	}
	return total
}

// storedBytes is what DynamoDB bills as storage for the items of table
// def: each item's size plus 100 bytes (base), and again for each index it
// is in (its keys and projected attributes, the whole item for ALL, plus
// 100 bytes): all.
func storedBytes(def resources.Table, items []map[string]ddbtypes.AttributeValue) (all, base float64) {
	for _, it := range items {
		base += float64(awsclient.ItemSize(it)) + 100
		for _, ix := range def.Indexes {
			if it[ix.PartitionKey.Name] == nil || (ix.SortKey.Name != "" && it[ix.SortKey.Name] == nil) {
				continue // not in this (sparse) index
			}
			p := it
			if ix.Include != nil || ix.KeysOnly {
				p = map[string]ddbtypes.AttributeValue{}
				for _, k := range append([]string{def.PartitionKey.Name, def.SortKey.Name, ix.PartitionKey.Name, ix.SortKey.Name}, ix.Include...) {
					if v, ok := it[k]; ok {
						p[k] = v
					}
				}
			}
			all += float64(awsclient.ItemSize(p)) + 100
		}
	}
	return all + base, base
}

// tableBytesPerJob scans the bench's table (uncounted: the bench's own
// reading) and returns the storage it bills per job: every item, in the
// table and its indexes (all), and in the table alone (base), divided by
// the jobs it holds.
func tableBytesPerJob(ctx context.Context, db *dynamodb.Client, def resources.Table) (all, base float64, err error) {
	var items []map[string]ddbtypes.AttributeValue
	jobs := 0
	p := dynamodb.NewScanPaginator(db, &dynamodb.ScanInput{TableName: aws.String(def.Name)})
	for p.HasMorePages() {
		out, err := p.NextPage(ctx)
		if err != nil {
			return 0, 0, fmt.Errorf("scanning the bench's table for its size: %w", err)
		}
		for _, it := range out.Items {
			if e, ok := it[resources.AttrEntity].(*ddbtypes.AttributeValueMemberS); ok && e.Value == resources.EntityJob {
				jobs++
			}
		}
		items = append(items, out.Items...)
	}
	if jobs == 0 {
		return 0, 0, fmt.Errorf("the bench's table %s holds no job", def.Name)
	}
	all, base = storedBytes(def, items)
	return all / float64(jobs), base / float64(jobs), nil
}
