package handler

import (
	"encoding/json"
	"io"
	"os"
	"sort"
	"sync"
	"time"
)

// MetricsNamespace is the CloudWatch namespace of every Conveyor metric.
const MetricsNamespace = "Conveyor"

// Emitter writes the functions' CloudWatch metrics as Embedded Metric
// Format log lines: in Lambda, CloudWatch Logs turns each line into metric
// data points with no API call; locally they are plain JSON on stdout.
type Emitter struct {
	mu  sync.Mutex
	w   io.Writer
	env string
	now func() time.Time
}

// NewEmitter returns an Emitter writing to w (default stdout) with the
// Environment dimension env.
func NewEmitter(w io.Writer, env string, now func() time.Time) *Emitter {
	if w == nil {
		w = os.Stdout
	}
	if now == nil {
		now = time.Now
	}
	return &Emitter{w: w, env: env, now: now}
}

// Emit writes one line with the given values (unit Count) and extra
// dimensions. A nil Emitter emits nothing.
func (e *Emitter) Emit(values map[string]float64, dims map[string]string) {
	if e == nil {
		return
	}
	names := make([]string, 0, len(values))
	for n := range values {
		names = append(names, n)
	}
	sort.Strings(names)
	// The dimension set is Environment then the extra names in order, so
	// one call's lines are identical whatever the map's order; an extra
	// dimension named Environment cannot replace the emitter's.
	extra := make([]string, 0, len(dims))
	for k := range dims {
		if k != "Environment" {
			extra = append(extra, k)
		}
	}
	sort.Strings(extra)
	dimNames := append([]string{"Environment"}, extra...)
	line := map[string]any{"Environment": e.env}
	for _, k := range extra {
		line[k] = dims[k]
	}
	var defs []map[string]string
	for _, n := range names {
		defs = append(defs, map[string]string{"Name": n, "Unit": "Count"})
		line[n] = values[n]
	}
	line["_aws"] = map[string]any{
		"Timestamp":         e.now().UnixMilli(),
		"CloudWatchMetrics": []any{map[string]any{"Namespace": MetricsNamespace, "Dimensions": [][]string{dimNames}, "Metrics": defs}},
	}
	b, err := json.Marshal(line)
	if err != nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	_, _ = e.w.Write(append(b, '\n'))
}
