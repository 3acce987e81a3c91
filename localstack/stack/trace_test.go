package stack_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/conveyor/conveyor/localstack/awstest"
	"github.com/conveyor/conveyor/localstack/stack"
)

// collected is one span as a local OTLP/HTTP collector received it.
type collected struct {
	service, name, traceID, spanID, parent string
	kind                                   int
	start, end                             int64
}

// collector is an OTLP/HTTP (JSON) trace collector on loopback: what each
// function's exporter posts to /v1/traces.
type collector struct {
	mu    sync.Mutex
	spans []collected
}

func (c *collector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req struct {
		ResourceSpans []struct {
			Resource struct {
				Attributes []struct {
					Key   string `json:"key"`
					Value struct {
						StringValue string `json:"stringValue"`
					} `json:"value"`
				} `json:"attributes"`
			} `json:"resource"`
			ScopeSpans []struct {
				Spans []struct {
					TraceID      string `json:"traceId"`
					SpanID       string `json:"spanId"`
					ParentSpanID string `json:"parentSpanId"`
					Name         string `json:"name"`
					Kind         int    `json:"kind"`
					Start        string `json:"startTimeUnixNano"`
					End          string `json:"endTimeUnixNano"`
				} `json:"spans"`
			} `json:"scopeSpans"`
		} `json:"resourceSpans"`
	}
	if r.URL.Path != "/v1/traces" || json.NewDecoder(r.Body).Decode(&req) != nil {
		http.Error(w, "want OTLP/HTTP JSON on /v1/traces", http.StatusBadRequest)
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, rs := range req.ResourceSpans {
		service := ""
		for _, a := range rs.Resource.Attributes {
			if a.Key == "service.name" {
				service = a.Value.StringValue
			}
		}
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				start, _ := strconv.ParseInt(s.Start, 10, 64)
				end, _ := strconv.ParseInt(s.End, 10, 64)
				c.spans = append(c.spans, collected{service: service, name: s.Name, traceID: s.TraceID, spanID: s.SpanID,
					parent: s.ParentSpanID, kind: s.Kind, start: start, end: end})
			}
		}
	}
	w.WriteHeader(http.StatusOK)
}

// trace is the spans of traceID, by start time.
func (c *collector) trace(traceID string) []collected {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []collected
	for _, s := range c.spans {
		if s.traceID == traceID {
			out = append(out, s)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].start < out[j].start })
	return out
}

// TestOneTraceAcrossTheFunctionBinaries: a job submitted under a caller's
// W3C traceparent is one trace from the API request to its publication,
// across the functions' own binaries, each exporting its spans to the
// configured OTLP collector: the api function's server span (a child of
// the caller's), its send to the tier queue, the publisher's processing
// of that message and its run of the job ("run publish"), and the run's calls to the
// external API, every one in the caller's trace.
func TestOneTraceAcrossTheFunctionBinaries(t *testing.T) {
	t.Parallel()
	col := &collector{}
	srv := httptest.NewServer(col)
	defer srv.Close()
	b := setupBinaries(t, map[string]string{"CONVEYOR_OTLP_ENDPOINT": srv.URL, "CONVEYOR_TRACE_SAMPLE_RATIO": "1"}, stack.Options{})
	tok := b.Token("u-traced", "user", "pro")
	b.Connect(tok)
	up := b.Upload(tok, awstest.PNG(t, 4))
	const traceID, caller = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	r := b.Must(b.Call("POST", "/v1/jobs", tok, map[string]any{"type": "publish", "items": []any{map[string]any{"uploadId": up}},
		"params": map[string]any{"title": "Traced"}}, "traceparent", "00-"+traceID+"-"+caller+"-01"), 201)
	b.WaitStatus(tok, r.Body["id"].(string), "succeeded")

	want := func(spans []collected) []string {
		var missing []string
		has := func(service, prefix string) bool {
			return slices.ContainsFunc(spans, func(s collected) bool { return s.service == service && strings.HasPrefix(s.name, prefix) })
		}
		for _, w := range []struct{ service, prefix string }{
			{"conveyor-api", "POST /v1/jobs"}, {"conveyor-api", "send "}, {"conveyor-publisher", "process "},
			{"conveyor-publisher", "run publish"}, {"conveyor-publisher", "POST "},
		} {
			if !has(w.service, w.prefix) {
				missing = append(missing, w.service+" "+w.prefix+"…")
			}
		}
		return missing
	}
	var spans []collected
	var missing []string
	b.Eventually(func() bool { spans = col.trace(traceID); missing = want(spans); return len(missing) == 0 },
		"the job's trace lacks spans: %v", &missing)
	var lines []string
	for _, s := range spans {
		lines = append(lines, fmt.Sprintf("%-20s %-40s kind %d  %7.1f ms  parent %s", s.service, s.name, s.kind,
			float64(s.end-s.start)/float64(time.Millisecond), s.parent))
	}
	t.Logf("the job's trace %s, %d spans:\n%s", traceID, len(spans), strings.Join(lines, "\n"))
	if api := spans[slices.IndexFunc(spans, func(s collected) bool { return strings.HasPrefix(s.name, "POST /v1/jobs") })]; api.parent != caller {
		t.Errorf("the API's server span has parent %q, want the caller's span %s", api.parent, caller)
	}
}
