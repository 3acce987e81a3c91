package telemetry_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"go.opentelemetry.io/otel/trace"

	"github.com/conveyor/conveyor/internal/telemetry"
)

// TestSpansReachTheCollectorInTheCallersTrace: a span under a caller's
// traceparent is posted, on Flush, to the collector's /v1/traces in OTLP
// JSON, in the caller's trace and with the caller's span as its parent.
func TestSpansReachTheCollectorInTheCallersTrace(t *testing.T) {
	var mu sync.Mutex
	var got []map[string]any
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != telemetry.TracesPath || r.Header.Get("Content-Type") != "application/json" {
			t.Errorf("export to %s as %s", r.URL.Path, r.Header.Get("Content-Type"))
		}
		var req struct {
			ResourceSpans []struct {
				ScopeSpans []struct {
					Spans []map[string]any `json:"spans"`
				} `json:"scopeSpans"`
			} `json:"resourceSpans"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			t.Error(err)
		}
		mu.Lock()
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				got = append(got, ss.Spans...)
			}
		}
		mu.Unlock()
	}))
	defer srv.Close()
	tp, err := telemetry.Setup(telemetry.Config{Endpoint: srv.URL, SampleRatio: 1, Service: "conveyor-test"})
	if err != nil {
		t.Fatal(err)
	}
	defer tp.Shutdown(context.Background())
	const parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	ctx := telemetry.WithTraceparent(context.Background(), parent)
	_, span := telemetry.Start(ctx, "run publish", trace.SpanKindInternal)
	span.End()
	if err := tp.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 || got[0]["name"] != "run publish" || got[0]["traceId"] != "4bf92f3577b34da6a3ce929d0e0e4736" ||
		got[0]["parentSpanId"] != "00f067aa0ba902b7" {
		t.Fatalf("collector got %v", got)
	}
}
