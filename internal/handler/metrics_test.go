package handler_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/conveyor/conveyor/internal/clock"
	"github.com/conveyor/conveyor/internal/handler"
)

// emfLine is one Embedded Metric Format line as CloudWatch Logs reads it.
type emfLine struct {
	AWS struct {
		Timestamp         int64
		CloudWatchMetrics []struct {
			Namespace  string
			Dimensions [][]string
			Metrics    []struct{ Name, Unit string }
		}
	} `json:"_aws"`
	Values map[string]any `json:"-"`
}

func parse(t *testing.T, out string) []emfLine {
	t.Helper()
	var lines []emfLine
	for _, raw := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		var l emfLine
		if err := json.Unmarshal([]byte(raw), &l); err != nil {
			t.Fatalf("not JSON: %q: %v", raw, err)
		}
		if err := json.Unmarshal([]byte(raw), &l.Values); err != nil {
			t.Fatal(err)
		}
		delete(l.Values, "_aws")
		lines = append(lines, l)
	}
	return lines
}

// One Emit is one line: the values as Count metrics sorted by name, the
// Environment dimension first and the extra ones after it by name, each
// dimension and metric with its value at the top level, and the time of the
// injected clock in milliseconds.
func TestEmitWritesOneEMFLine(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 23, 17, 0, 0, 123_000_000, time.UTC)
	clk := clock.NewSimulated(at)
	var buf bytes.Buffer
	e := handler.NewEmitter(&buf, "prod-ru", clk.Now)

	e.Emit(map[string]float64{"Published": 3, "Failed": 1, "AWSRequests": 12.5}, map[string]string{"Tier": "high", "Function": "publisher"})

	lines := parse(t, buf.String())
	if len(lines) != 1 {
		t.Fatalf("%d lines, want 1: %s", len(lines), buf.String())
	}
	l := lines[0]
	if l.AWS.Timestamp != at.UnixMilli() {
		t.Errorf("Timestamp = %d, want %d (the injected clock)", l.AWS.Timestamp, at.UnixMilli())
	}
	if len(l.AWS.CloudWatchMetrics) != 1 {
		t.Fatalf("directives = %d, want 1", len(l.AWS.CloudWatchMetrics))
	}
	d := l.AWS.CloudWatchMetrics[0]
	if d.Namespace != handler.MetricsNamespace || handler.MetricsNamespace != "Conveyor" {
		t.Errorf("Namespace = %q", d.Namespace)
	}
	if diff := cmp.Diff([][]string{{"Environment", "Function", "Tier"}}, d.Dimensions); diff != "" {
		t.Errorf("Dimensions (-want +got)\n%s", diff)
	}
	wantDefs := []struct{ Name, Unit string }{{"AWSRequests", "Count"}, {"Failed", "Count"}, {"Published", "Count"}}
	if diff := cmp.Diff(wantDefs, d.Metrics); diff != "" {
		t.Errorf("Metrics (-want +got)\n%s", diff)
	}
	wantValues := map[string]any{"Environment": "prod-ru", "Function": "publisher", "Tier": "high", "AWSRequests": 12.5, "Failed": 1.0, "Published": 3.0}
	if diff := cmp.Diff(wantValues, l.Values); diff != "" {
		t.Errorf("values (-want +got)\n%s", diff)
	}
}

// The time is read at each Emit, not at construction.
func TestEmitReadsTheClockAtEachLine(t *testing.T) {
	t.Parallel()
	clk := clock.NewSimulated(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	var buf bytes.Buffer
	e := handler.NewEmitter(&buf, "staging", clk.Now)
	e.Emit(map[string]float64{"A": 1}, nil)
	clk.Advance(90 * time.Second)
	e.Emit(map[string]float64{"A": 2}, nil)
	lines := parse(t, buf.String())
	if len(lines) != 2 {
		t.Fatalf("%d lines, want 2", len(lines))
	}
	if got := lines[1].AWS.Timestamp - lines[0].AWS.Timestamp; got != 90_000 {
		t.Errorf("second line is %d ms after the first, want 90000", got)
	}
	if diff := cmp.Diff([][]string{{"Environment"}}, lines[0].AWS.CloudWatchMetrics[0].Dimensions); diff != "" {
		t.Errorf("without extra dimensions (-want +got)\n%s", diff)
	}
}

// Lines are the same bytes whatever the maps' iteration order, and an
// extra dimension named Environment neither replaces the emitter's value
// nor repeats the name in the dimension set.
func TestEmitIsDeterministicAndKeepsTheEnvironment(t *testing.T) {
	t.Parallel()
	clk := clock.NewSimulated(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	values := map[string]float64{"a": 1, "b": 2, "c": 3, "d": 4, "e": 5, "f": 6}
	dims := map[string]string{"Z": "z", "Y": "y", "X": "x", "W": "w", "Environment": "forged"}
	var first string
	for i := range 20 {
		var buf bytes.Buffer
		handler.NewEmitter(&buf, "prod-en", clk.Now).Emit(values, dims)
		if i == 0 {
			first = buf.String()
			continue
		}
		if buf.String() != first {
			t.Fatalf("emit %d differs:\n%s\n%s", i, first, buf.String())
		}
	}
	l := parse(t, first)[0]
	if l.Values["Environment"] != "prod-en" {
		t.Errorf("Environment = %v, want the emitter's prod-en", l.Values["Environment"])
	}
	if diff := cmp.Diff([][]string{{"Environment", "W", "X", "Y", "Z"}}, l.AWS.CloudWatchMetrics[0].Dimensions); diff != "" {
		t.Errorf("Dimensions (-want +got)\n%s", diff)
	}
}

// Concurrent emits never interleave inside a line (CloudWatch would drop a
// torn line and its data points).
func TestConcurrentEmitsWriteWholeLines(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	e := handler.NewEmitter(&buf, "local", nil)
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Go(func() {
			e.Emit(map[string]float64{"N": float64(i)}, map[string]string{"Worker": strings.Repeat("w", i)})
		})
	}
	wg.Wait()
	lines := parse(t, buf.String())
	seen := map[float64]bool{}
	for _, l := range lines {
		seen[l.Values["N"].(float64)] = true
	}
	if len(lines) != 50 || len(seen) != 50 {
		t.Errorf("%d lines with %d distinct values, want 50 and 50", len(lines), len(seen))
	}
}
