package breaker_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/conveyor/conveyor/internal/breaker"
	"github.com/conveyor/conveyor/internal/clock"
	"github.com/conveyor/conveyor/internal/handler"
)

// datapoint is one metric value of an EMF line with its dimensions.
type datapoint struct {
	Metric string
	Value  float64
	Dims   map[string]string
}

// datapoints parses EMF lines as CloudWatch would: every metric a line
// declares, with the values of the dimensions it declares.
func datapoints(t *testing.T, out []byte) []datapoint {
	t.Helper()
	var got []datapoint
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		var line map[string]any
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("EMF line %q: %v", sc.Text(), err)
		}
		var meta struct {
			CloudWatchMetrics []struct {
				Namespace  string
				Dimensions [][]string
				Metrics    []struct{ Name string }
			}
		}
		raw, _ := json.Marshal(line["_aws"])
		if err := json.Unmarshal(raw, &meta); err != nil || len(meta.CloudWatchMetrics) != 1 {
			t.Fatalf("EMF line without one metric directive: %s", sc.Text())
		}
		d := meta.CloudWatchMetrics[0]
		if d.Namespace != handler.MetricsNamespace || len(d.Dimensions) != 1 {
			t.Fatalf("EMF directive %+v", d)
		}
		dims := map[string]string{}
		for _, name := range d.Dimensions[0] {
			v, ok := line[name].(string)
			if !ok {
				t.Fatalf("dimension %s has no string value in %s", name, sc.Text())
			}
			dims[name] = v
		}
		for _, m := range d.Metrics {
			got = append(got, datapoint{m.Name, line[m.Name].(float64), dims})
		}
	}
	return got
}

func env(extra ...string) map[string]string {
	m := map[string]string{"Environment": "prod-en"}
	for i := 0; i+1 < len(extra); i += 2 {
		m[extra[i]] = extra[i+1]
	}
	return m
}

// A host circuit reports BreakerOpen by Host, the metric the alarms watch;
// a token circuit (one user's 429) reports another metric with no Host, so
// it never pages anyone.
func TestTransitionsReportOpenByHostAndTokensApart(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	emf := handler.NewEmitter(&buf, "prod-en", nil)
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	breaker.ReportTransition(emf, breaker.Transition{Key: breaker.Key("host", "www.deviantart.com"), From: breaker.Closed, To: breaker.Open, At: now})
	breaker.ReportTransition(emf, breaker.Transition{Key: breaker.TokenKey("acc-1"), From: breaker.Closed, To: breaker.Open, At: now})
	breaker.ReportTransition(emf, breaker.Transition{Key: breaker.Key("host", "www.deviantart.com"), From: breaker.HalfOpen, To: breaker.Closed, At: now})
	want := []datapoint{
		{"BreakerOpen", 1, env("Host", "www.deviantart.com")},
		{"BreakerTransition", 1, env("To", "open")},
		{"TokenBreakerOpen", 1, env()},
		{"BreakerTransition", 1, env("To", "open")},
		{"BreakerOpen", 0, env("Host", "www.deviantart.com")},
		{"BreakerTransition", 1, env("To", "closed")},
	}
	if diff := cmp.Diff(want, datapoints(t, buf.Bytes())); diff != "" {
		t.Errorf("datapoints (-want +got):\n%s", diff)
	}
}

// The gauge sends 1 for every host circuit still open (half-open counts:
// calls still fail fast), 0 for a host with a closed record, and the
// number of open token circuits, so an alarm on BreakerOpen stays up for
// as long as the circuit is open, not for the minute after it opened.
func TestGaugeReportsEveryOpenHostCircuit(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	emf := handler.NewEmitter(&buf, "prod-en", func() time.Time { return now })
	records := []breaker.Record{
		{Key: "host:a.example", State: breaker.Open, OpenUntil: now.Add(time.Minute)},
		{Key: "host:b.example", State: breaker.Open, OpenUntil: now.Add(-time.Minute)}, // half-open
		{Key: "host:c.example", State: breaker.Closed, Failures: 2},
		{Key: breaker.TokenKey("acc-1"), State: breaker.Open, OpenUntil: now.Add(time.Hour)},
		{Key: breaker.TokenKey("acc-2"), State: breaker.Open, OpenUntil: now.Add(time.Hour)},
		{Key: breaker.TokenKey("acc-3"), State: breaker.Closed, Failures: 1},
	}
	if n := breaker.ReportOpen(emf, records, now); n != 2 {
		t.Errorf("open host circuits = %d, want 2", n)
	}
	want := []datapoint{
		{"BreakerOpen", 1, env("Host", "a.example")},
		{"BreakerOpen", 1, env("Host", "b.example")},
		{"BreakerOpen", 0, env("Host", "c.example")},
		{"TokenBreakerOpen", 2, env()},
	}
	if diff := cmp.Diff(want, datapoints(t, buf.Bytes())); diff != "" {
		t.Errorf("datapoints (-want +got):\n%s", diff)
	}
}

// Breaker.ReportOpen reads the shared records from DynamoDB: a host circuit
// opened by three tokens' failures on one instance shows up in the gauge another
// instance sends, and keeps showing while it stays open.
func TestReportOpenReadsTheSharedRecords(t *testing.T) {
	t.Parallel()
	clk := clock.NewSimulated(time.Now().UTC())
	bs := instances(t, 2, clk, nil)
	ctx := context.Background()
	// Five failures of one token open its circuit; two more tokens' make
	// three for the host.
	for _, acc := range []string{"acc-9", "acc-9", "acc-9", "acc-9", "acc-9", "acc-1", "acc-2"} {
		_ = bs[0].Do(ctx, func(context.Context) error { return apiErr{503} }, "host:api.example", breaker.TokenKey(acc))
	}
	for _, at := range []time.Duration{0, 4 * time.Minute} {
		clk.Advance(at)
		var buf bytes.Buffer
		n, err := bs[1].ReportOpen(ctx, handler.NewEmitter(&buf, "prod-en", clk.Now))
		if err != nil || n != 1 {
			t.Fatalf("ReportOpen = %d, %v; want 1 open host circuit", n, err)
		}
		want := []datapoint{{"BreakerOpen", 1, env("Host", "api.example")}, {"TokenBreakerOpen", 1, env()}}
		if diff := cmp.Diff(want, datapoints(t, buf.Bytes())); diff != "" {
			t.Errorf("after %s: datapoints (-want +got):\n%s", at, diff)
		}
	}
}
