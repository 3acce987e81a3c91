package breaker

import (
	"context"
	"strings"
	"time"
)

// Metric names and dimensions the breakers report (CloudWatch, through
// the functions' EMF lines). The alarms in infra/ watch MetricOpen by
// DimensionHost: only a host's circuit pages anyone. A token's circuit (one
// user's 429) reports MetricTokenOpen, which no alarm watches.
const (
	// MetricOpen is 1 while the circuit of the host named by DimensionHost
	// is open (half-open included), 0 once it closes. It is sent on every
	// transition and, as a gauge, by every scheduled recovery run for each
	// open host circuit, so an alarm on it stays in alarm while the
	// circuit stays open.
	MetricOpen = "BreakerOpen"
	// MetricTokenOpen is, on a token circuit's transition, 1 (opened) or
	// 0 (closed); as a gauge, the number of open token circuits. It has no
	// per-token dimension.
	MetricTokenOpen = "TokenBreakerOpen"
	// MetricTransition counts transitions by DimensionTo.
	MetricTransition = "BreakerTransition"
	// DimensionHost names the host of a host circuit (Key("host", host)).
	DimensionHost = "Host"
	// DimensionTo is the state a transition went to.
	DimensionTo = "To"
)

// Sink receives metric values with extra dimensions (the functions' *handler.Emitter).
type Sink interface {
	Emit(values map[string]float64, dims map[string]string)
}

// hostOf returns the host of a host circuit's key.
func hostOf(key string) (string, bool) { return strings.CutPrefix(key, "host:") }

// ReportTransition sends the metrics of one transition: MetricOpen by host
// for a host circuit, MetricTokenOpen for any other, and MetricTransition.
func ReportTransition(s Sink, t Transition) {
	open := 0.0
	if t.To == Open {
		open = 1
	}
	if host, ok := hostOf(t.Key); ok {
		s.Emit(map[string]float64{MetricOpen: open}, map[string]string{DimensionHost: host})
	} else {
		s.Emit(map[string]float64{MetricTokenOpen: open}, nil)
	}
	s.Emit(map[string]float64{MetricTransition: 1}, map[string]string{DimensionTo: string(t.To)})
}

// ReportOpen sends the gauge of the records as of now: MetricOpen = 1 for
// every open (or half-open) host circuit and 0 for every other host that
// has a record, and MetricTokenOpen = the number of open token circuits.
// It returns how many host circuits are open.
func ReportOpen(s Sink, records []Record, now time.Time) int {
	hosts, tokens := 0, 0
	for _, r := range records {
		open := r.Effective(now) != Closed
		host, isHost := hostOf(r.Key)
		switch {
		case isHost && open:
			hosts++
			s.Emit(map[string]float64{MetricOpen: 1}, map[string]string{DimensionHost: host})
		case isHost:
			s.Emit(map[string]float64{MetricOpen: 0}, map[string]string{DimensionHost: host})
		case open:
			tokens++
		}
	}
	s.Emit(map[string]float64{MetricTokenOpen: float64(tokens)}, nil)
	return hosts
}

// ReportOpen reads every breaker record (one Query, no cache) and sends
// the gauge (see the function ReportOpen); the scheduled recovery run
// calls it. It returns how many host circuits are open.
func (b *Breaker) ReportOpen(ctx context.Context, s Sink) (int, error) {
	recs, err := b.List(ctx)
	if err != nil {
		return 0, err
	}
	return ReportOpen(s, recs, b.o.Now()), nil
}
