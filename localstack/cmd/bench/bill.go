package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/resources"
	"github.com/conveyor/conveyor/localstack/lambdaruntime"
)

// Prices of what the bill adds beyond requests: logs, traces, the event
// archive and storage (us-east-1 list prices, the page named, the day the
// figure was entered). GB is 2³⁰ bytes, a month 730 hours, as AWS bills.
var storagePrices = map[string]price{
	"Logs.ingest":      {0.50 / gb, "aws.amazon.com/cloudwatch/pricing, 2026-11-26: Logs, Standard log class: data ingestion $0.50 per GB (Lambda's logs, vended: $0.50 per GB for the first 10 TB)"},
	"Logs.store":       {0.03 / gb, "aws.amazon.com/cloudwatch/pricing, 2026-11-26: Logs, storage (archival) $0.03 per GB-month"},
	"XRay.trace":       {5.00 / 1e6, "aws.amazon.com/xray/pricing, 2026-11-26: traces recorded $5.00 per million (after 100,000 free a month)"},
	"Archive.ingest":   {0.10 / gb, "aws.amazon.com/eventbridge/pricing, 2026-11-26: archive, events processed $0.10 per GB"},
	"Archive.store":    {0.023 / gb, "aws.amazon.com/eventbridge/pricing, 2026-11-26: archive storage $0.023 per GB-month"},
	"DynamoDB.storage": {0.25 / gb, "aws.amazon.com/dynamodb/pricing/on-demand, 2026-11-26: data storage, Standard table class, $0.25 per GB-month (after the first 25 GB)"},
	"DynamoDB.pitr":    {0.20 / gb, "aws.amazon.com/dynamodb/pricing/on-demand, 2026-11-26: continuous backups (PITR) $0.20 per GB-month of table size"},
	"S3.storage":       {0.023 / gb, "aws.amazon.com/s3/pricing, 2026-11-26: S3 Standard storage $0.023 per GB-month (first 50 TB)"},
}

const (
	gb    = 1 << 30
	month = 730 * time.Hour
)

// months is d in billed months.
func months(d time.Duration) float64 { return d.Hours() / month.Hours() }

// billEnv is what the bill reads of a cloud environment's configuration
// (infra/env/<env>.json, the file `cdk deploy` reads): the logs' retention
// and the tracing sampling; the resource definition gives the rest (the
// archive's retention, PITR).
type billEnv struct {
	Env              job.Env `json:"-"`
	LogRetentionDays int     `json:"logRetentionDays"`
	Tracing          struct {
		Enabled      bool    `json:"enabled"`
		SamplingRate float64 `json:"samplingRate"`
	} `json:"tracing"`
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
// per invocation, in the text log format the stacks use: the START, END
// and REPORT lines (a sampled trace adds an XRAY line to REPORT, left out).
var platformLogBytes = func() int {
	id := "8f507cfc-2f32-4697-b07a-ac58fc914c95"
	return len("START RequestId: "+id+" Version: $LATEST\n") + len("END RequestId: "+id+"\n") +
		len("REPORT RequestId: "+id+"\tDuration: 31.52 ms\tBilled Duration: 32 ms\tMemory Size: 256 MB\tMax Memory Used: 48 MB\t\n")
}()

// accessLogBytes is one line of the HTTP API's access log
// (resources.AccessLogFields) with the values a browser's submit gives it.
var accessLogBytes = func() int {
	sample := map[string]string{
		"$context.requestId": "Jx1AbcdEfGhIjKA=", "$context.identity.sourceIp": "203.0.113.27",
		"$context.requestTime": "26/Nov/2026:18:50:00 +0000", "$context.httpMethod": "POST", "$context.routeKey": "$default",
		"$context.path": "/v1/jobs/job_3f9a1c2e7b4d4e0f9a8b7c6d5e4f3a2b", "$context.status": "201", "$context.protocol": "HTTP/1.1",
		"$context.responseLength": "1184", "$context.responseLatency": "41", "$context.integrationLatency": "39",
		"$context.integrationErrorMessage": "-",
		"$context.identity.userAgent":      "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.1 Safari/605.1.15",
	}
	line := map[string]string{}
	for k, v := range resources.AccessLogFields {
		line[k] = sample[v]
	}
	b, _ := json.Marshal(line)
	return len(b) + 1
}()

// tracesPerMonth is how many traces X-Ray records in a month of
// invocations at the environment's sampling: the sampling rule's
// reservoir (one a second, account-wide, whenever a request comes) and
// its rate of the rest. Each invocation is taken as a trace of its own
// (an upper bound: an SQS message or an event that carries its sender's
// trace joins it).
func tracesPerMonth(invocations, rate float64) float64 {
	seconds := month.Seconds()
	reservoir := math.Min(invocations, seconds) // 1 a second while invocations come at least that often
	return reservoir + rate*(invocations-reservoir)
}

// storedBytes is what DynamoDB bills as storage for the items of table
// def: each item's size plus 100 bytes, and again for each index it is in
// (its keys and projected attributes, plus 100 bytes).
func storedBytes(def resources.Table, items []map[string]ddbtypes.AttributeValue) float64 {
	total := 0.0
	for _, it := range items {
		total += float64(itemSize(it)) + 100
		for _, ix := range def.Indexes {
			if it[ix.PartitionKey.Name] == nil || (ix.SortKey.Name != "" && it[ix.SortKey.Name] == nil) {
				continue // not in this (sparse) index
			}
			p := it
			if ix.Include != nil {
				p = map[string]ddbtypes.AttributeValue{}
				for _, k := range append([]string{def.PartitionKey.Name, def.SortKey.Name, ix.PartitionKey.Name, ix.SortKey.Name}, ix.Include...) {
					if v, ok := it[k]; ok {
						p[k] = v
					}
				}
			}
			total += float64(itemSize(p)) + 100
		}
	}
	return total
}

// itemSize is an item's size as DynamoDB counts it: the UTF-8 bytes of
// each attribute's name plus its value's (docs: "Item sizes and formats").
func itemSize(it map[string]ddbtypes.AttributeValue) int {
	n := 0
	for k, v := range it {
		n += len(k) + valueSize(v)
	}
	return n
}

func valueSize(v ddbtypes.AttributeValue) int {
	switch v := v.(type) {
	case *ddbtypes.AttributeValueMemberS:
		return len(v.Value)
	case *ddbtypes.AttributeValueMemberN:
		digits := len(strings.TrimLeft(strings.NewReplacer("-", "", ".", "").Replace(v.Value), "0"))
		return (digits+1)/2 + 1
	case *ddbtypes.AttributeValueMemberB:
		return len(v.Value)
	case *ddbtypes.AttributeValueMemberBOOL, *ddbtypes.AttributeValueMemberNULL:
		return 1
	case *ddbtypes.AttributeValueMemberSS:
		n := 0
		for _, s := range v.Value {
			n += len(s)
		}
		return n
	case *ddbtypes.AttributeValueMemberNS:
		n := 0
		for _, s := range v.Value {
			n += valueSize(&ddbtypes.AttributeValueMemberN{Value: s})
		}
		return n
	case *ddbtypes.AttributeValueMemberL:
		n := 3
		for _, e := range v.Value {
			n += 1 + valueSize(e)
		}
		return n
	case *ddbtypes.AttributeValueMemberM:
		return 3 + len(v.Value) + itemSize(v.Value)
	}
	return 0
}

// tableBytesPerJob scans the bench's table (uncounted: the bench's own
// reading) and returns the storage it bills per job: every item, in the
// table and its indexes, divided by the jobs it holds.
func tableBytesPerJob(ctx context.Context, db *dynamodb.Client, def resources.Table) (float64, error) {
	var items []map[string]ddbtypes.AttributeValue
	jobs := 0
	p := dynamodb.NewScanPaginator(db, &dynamodb.ScanInput{TableName: aws.String(def.Name)})
	for p.HasMorePages() {
		out, err := p.NextPage(ctx)
		if err != nil {
			return 0, fmt.Errorf("scanning the bench's table for its size: %w", err)
		}
		for _, it := range out.Items {
			if e, ok := it[resources.AttrEntity].(*ddbtypes.AttributeValueMemberS); ok && e.Value == resources.EntityJob {
				jobs++
			}
		}
		items = append(items, out.Items...)
	}
	if jobs == 0 {
		return 0, fmt.Errorf("the bench's table %s holds no job", def.Name)
	}
	return storedBytes(def, items) / float64(jobs), nil
}
