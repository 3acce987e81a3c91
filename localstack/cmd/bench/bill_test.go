package main

import (
	"math"
	"strings"
	"testing"
	"time"

	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/conveyor/conveyor/internal/aws/awsclient"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/resources"
)

// Lambda's active tracing samples each function's first invocation of a
// second and 5 % of the rest: a function invoked far less than once a
// second is traced almost whole, one invoked far more at about one a
// second plus 5 %.
func TestTracesPerMonth(t *testing.T) {
	t.Parallel()
	seconds := month.Seconds()
	for _, c := range []struct {
		name        string
		invocations map[string]float64
		lo, hi      float64
	}{
		{"none", map[string]float64{}, 0, 0},
		{"a tenth of a second's worth", map[string]float64{"api": seconds / 10}, 0.95 * seconds / 10, seconds / 10},
		{"a hundred a second", map[string]float64{"api": 100 * seconds}, seconds + 0.05*99*seconds, seconds + 0.05*99.1*seconds},
		{"two functions apart", map[string]float64{"api": seconds / 10, "publisher": seconds / 10}, 1.9 * seconds / 10, 2 * seconds / 10},
	} {
		if got := tracesPerMonth(c.invocations); got < c.lo || got > c.hi {
			t.Errorf("%s: %.0f traces a month, want %.0f–%.0f", c.name, got, c.lo, c.hi)
		}
	}
}

// At WARN, Lambda writes no line of its own for an invocation that
// succeeds; INFO adds its start and report lines, DEBUG more.
func TestPlatformLogBytes(t *testing.T) {
	t.Parallel()
	warn, info, debug := platformLogBytes("WARN"), platformLogBytes("INFO"), platformLogBytes("DEBUG")
	if warn != 0 || info < 250 || debug <= info {
		t.Errorf("Lambda's own bytes per invocation: WARN %d, INFO %d, DEBUG %d; want 0, ≥ 250, more", warn, info, debug)
	}
}

// Every field of the HTTP API's access log has a sample value, so its
// priced line is the deployed line's length.
func TestAccessLogSampleCoversTheFormat(t *testing.T) {
	t.Parallel()
	for k, v := range resources.AccessLogFields {
		if accessLogSample[v] == "" {
			t.Errorf("access log field %s (%s) has no sample value", k, v)
		}
	}
	if accessLogBytes > 250 {
		t.Errorf("an access log line prices at %d bytes, want ≤ 250", accessLogBytes)
	}
}

// The table's storage counts each item and its index entries; PITR's
// base, the item alone.
func TestStoredBytes(t *testing.T) {
	t.Parallel()
	def := resources.For(job.ProdEN).Table
	item := map[string]ddbtypes.AttributeValue{
		def.PartitionKey.Name: &ddbtypes.AttributeValueMemberS{Value: "JOB#1"},
		def.SortKey.Name:      &ddbtypes.AttributeValueMemberS{Value: "JOB"},
		"payload":             &ddbtypes.AttributeValueMemberS{Value: strings.Repeat("x", 900)},
	}
	var indexed *resources.Index
	for i, ix := range def.Indexes {
		if ix.Include != nil || ix.KeysOnly {
			indexed = &def.Indexes[i]
			break
		}
	}
	if indexed == nil {
		t.Fatal("no index with a projection of its own (INCLUDE or KEYS_ONLY) to test with")
	}
	item[indexed.PartitionKey.Name] = &ddbtypes.AttributeValueMemberS{Value: "p"}
	if indexed.SortKey.Name != "" {
		item[indexed.SortKey.Name] = &ddbtypes.AttributeValueMemberS{Value: "s"}
	}
	all, base := storedBytes(def, []map[string]ddbtypes.AttributeValue{item})
	if want := float64(awsclient.ItemSize(item) + 100); base != want {
		t.Errorf("base %v, want the item and its 100 bytes, %v", base, want)
	}
	if all <= base+100 || all >= 2*base {
		t.Errorf("all %v: want the base %v and an index entry of keys and projection (over 100 bytes, under the item)", all, base)
	}
}

// The bill prices the environment's choices: no trace when tracing is
// off, Lambda's own lines by its level, PITR on the table alone, and the
// client's calls on lines of their own, in the total.
func TestBillPricesTheConfiguration(t *testing.T) {
	t.Parallel()
	ms := func(k int) []time.Duration { return repeat(k, 30*time.Millisecond) }
	ph := phase{n: 10, pipeline: map[string]int{"SQS.SendMessage": 10, "S3.GetObject": 10}, pipelineUnits: map[string]float64{"write": 100, "read": 20},
		durations: map[string][]time.Duration{resources.FuncAPI: ms(10), resources.FuncPublisher: ms(10), resources.FuncRecovery: ms(3)},
		logs:      map[string]int64{resources.FuncAPI: 4000, resources.FuncRecovery: 900}, items: map[string]int{"EventBridge.PutEvents": 30, "EventBridge.PutEvents bytes": 30000}}
	up := phase{n: 2, pipeline: map[string]int{"S3.PutObject": 2}, durations: map[string][]time.Duration{resources.FuncUploads: ms(2), resources.FuncConfirm: ms(2)}}
	reads := phase{n: 10, pipeline: map[string]int{"DynamoDB.GetItem": 20}, pipelineUnits: map[string]float64{"read": 20},
		durations: map[string][]time.Duration{resources.FuncAPI: ms(20)}, logs: map[string]int64{resources.FuncAPI: 4000}}
	in := billInputs{tableBytesPerJob: 10000, baseTableBytesPerJob: 4000, objectBytes: 100, reads: reads, readsPerJob: 2}
	in.env.Env, in.env.LogRetentionDays = job.ProdEN, 30

	off := bill(ph, up, in)
	if off[lineTraces] != 0 {
		t.Errorf("tracing off: x-ray %v, want 0", off[lineTraces])
	}
	if got := off["log bytes per job lambda's own lines"]; got != 0 {
		t.Errorf("system level WARN (unset): %v bytes of Lambda's own lines a job, want 0", got)
	}
	// Recovery's runs in a phase are the fixed line's, not the job's.
	if inv := off["lambda invocations per job"]; math.Abs(inv-4) > 1e-9 {
		t.Errorf("%v invocations a job, want 4 (api, publisher; uploads and confirm once an upload)", inv)
	}
	want := 4000.0 * months(resources.DeleteAfterDefault) * storagePrices["DynamoDB.pitr"].usd * 1e6
	if math.Abs(off[linePITR]-want) > 1e-9 {
		t.Errorf("PITR %v, want the table's own 4000 bytes a job: %v", off[linePITR], want)
	}
	if off[lineClientReads] <= 0 || off[lineClientReads+" calls per job"] != 2 {
		t.Errorf("client reads line %v, %v calls a job; want a price for 2", off[lineClientReads], off[lineClientReads+" calls per job"])
	}
	if d := off["total at aws latencies"] - off["total at aws latencies without the client's calls"]; math.Abs(d-off[lineClientReads]) > 1e-9 {
		t.Errorf("the client's calls are %v of the total, want their line, %v", d, off[lineClientReads])
	}

	// Every job goes stale days later: its job.stale event is on the bus.
	if r := off[lineRetention]; r < prices["EventBridge"].usd*1e6 || r > 2*prices["EventBridge"].usd*1e6 {
		t.Errorf("retention $%v a million jobs, want a bus event's $1 and a little more", r)
	}
	if off[lineRetentionDDB] <= 0 {
		t.Error("retention's table writes are not priced")
	}

	in.env.Tracing.Enabled, in.env.SystemLogLevel = true, "INFO"
	on := bill(ph, up, in)
	if on[lineTraces] <= 0 || on["x-ray traces per job"] > on["lambda invocations per job"]+off[lineClientReads+" calls per job"]+1 {
		t.Errorf("tracing on: $%v, %v traces a job; want some, at most one an invocation (and the fixed runs')", on[lineTraces], on["x-ray traces per job"])
	}
	if got, want := on["log bytes per job lambda's own lines"], float64(platformLogBytes("INFO"))*4; got != want {
		t.Errorf("system level INFO: %v bytes of Lambda's own lines a job, want %v", got, want)
	}
	if on[lineLogs] <= off[lineLogs] {
		t.Errorf("logs at INFO $%v, at WARN $%v: want more at INFO", on[lineLogs], off[lineLogs])
	}
}

func repeat(k int, d time.Duration) []time.Duration {
	out := make([]time.Duration, k)
	for i := range out {
		out[i] = d
	}
	return out
}

// The checked-in production environments trace nothing and keep
// Lambda's own lines at WARN; staging traces.
func TestBillReadsTheDeployConfiguration(t *testing.T) {
	t.Parallel()
	for env, want := range map[job.Env]struct {
		tracing bool
		level   string
	}{job.ProdEN: {false, "WARN"}, job.ProdRU: {false, "WARN"}, job.Staging: {true, "INFO"}} {
		c, err := readBillEnv(env)
		if err != nil {
			t.Fatal(err)
		}
		if c.Tracing.Enabled != want.tracing || c.systemLevel() != want.level {
			t.Errorf("%s: tracing %v, system log level %s; want %v, %s", env, c.Tracing.Enabled, c.systemLevel(), want.tracing, want.level)
		}
	}
}
