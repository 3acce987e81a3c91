package telemetry

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// TracesPath is the OTLP/HTTP path of trace exports.
const TracesPath = "/v1/traces"

// Exporter sends spans to an OTLP/HTTP collector in OTLP's JSON encoding
// (the protobuf JSON mapping of ExportTraceServiceRequest, which every
// OTLP/HTTP receiver accepts beside binary protobuf: the OpenTelemetry
// Collector, the ADOT Lambda layer, Jaeger). It stands in for
// otlptracehttp, whose generated OTLP packages link gRPC and its gateway
// into every function: +7.7 MB per bootstrap and about 3 ms of package
// inits at every cold start, called or not (docs/operations.md#tracing).
type Exporter struct {
	url    string
	client *http.Client
}

// NewExporter returns an exporter posting to endpoint + TracesPath (an
// endpoint that already ends in TracesPath is used as it is).
func NewExporter(endpoint string, client *http.Client) (*Exporter, error) {
	if endpoint == "" {
		return nil, ErrNoEndpoint
	}
	url := strings.TrimRight(endpoint, "/")
	if !strings.HasSuffix(url, TracesPath) {
		url += TracesPath
	}
	if client == nil {
		client = &http.Client{Timeout: 10 * time.Second}
	}
	return &Exporter{url: url, client: client}, nil
}

// ExportSpans posts spans in one request; a collector's refusal is an
// error (the batch processor then drops the batch).
func (e *Exporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	if len(spans) == 0 {
		return nil
	}
	body, err := json.Marshal(encode(spans))
	if err != nil {
		return fmt.Errorf("telemetry: encoding spans: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := e.client.Do(req)
	if err != nil {
		return fmt.Errorf("telemetry: exporting %d spans: %w", len(spans), err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("telemetry: exporting %d spans: %s: %s", len(spans), resp.Status, bytes.TrimSpace(msg))
	}
	return nil
}

// Shutdown has nothing to release.
func (e *Exporter) Shutdown(context.Context) error { return nil }

// The OTLP JSON shapes (opentelemetry-proto, trace/v1 and common/v1).
type (
	otlpRequest struct {
		ResourceSpans []otlpResourceSpans `json:"resourceSpans"`
	}
	otlpResourceSpans struct {
		Resource   otlpResource     `json:"resource"`
		ScopeSpans []otlpScopeSpans `json:"scopeSpans"`
		SchemaURL  string           `json:"schemaUrl,omitempty"`
	}
	otlpResource struct {
		Attributes []otlpKeyValue `json:"attributes"`
	}
	otlpScopeSpans struct {
		Scope otlpScope  `json:"scope"`
		Spans []otlpSpan `json:"spans"`
	}
	otlpScope struct {
		Name    string `json:"name"`
		Version string `json:"version,omitempty"`
	}
	otlpSpan struct {
		TraceID           string         `json:"traceId"`
		SpanID            string         `json:"spanId"`
		TraceState        string         `json:"traceState,omitempty"`
		ParentSpanID      string         `json:"parentSpanId,omitempty"`
		Name              string         `json:"name"`
		Kind              int            `json:"kind"`
		StartTimeUnixNano string         `json:"startTimeUnixNano"`
		EndTimeUnixNano   string         `json:"endTimeUnixNano"`
		Attributes        []otlpKeyValue `json:"attributes,omitempty"`
		Events            []otlpEvent    `json:"events,omitempty"`
		Links             []otlpLink     `json:"links,omitempty"`
		Status            otlpStatus     `json:"status"`
	}
	otlpEvent struct {
		TimeUnixNano string         `json:"timeUnixNano"`
		Name         string         `json:"name"`
		Attributes   []otlpKeyValue `json:"attributes,omitempty"`
	}
	otlpLink struct {
		TraceID    string         `json:"traceId"`
		SpanID     string         `json:"spanId"`
		Attributes []otlpKeyValue `json:"attributes,omitempty"`
	}
	otlpStatus struct {
		Message string `json:"message,omitempty"`
		Code    int    `json:"code,omitempty"`
	}
	otlpKeyValue struct {
		Key   string       `json:"key"`
		Value otlpAnyValue `json:"value"`
	}
	otlpAnyValue struct {
		StringValue *string         `json:"stringValue,omitempty"`
		BoolValue   *bool           `json:"boolValue,omitempty"`
		IntValue    *string         `json:"intValue,omitempty"`
		DoubleValue *float64        `json:"doubleValue,omitempty"`
		ArrayValue  *otlpArrayValue `json:"arrayValue,omitempty"`
	}
	otlpArrayValue struct {
		Values []otlpAnyValue `json:"values"`
	}
)

// encode groups spans by resource and scope, as OTLP nests them.
func encode(spans []sdktrace.ReadOnlySpan) otlpRequest {
	var req otlpRequest
	type scopeKey struct{ res, name, version string }
	resIndex := map[string]int{}
	scopeIndex := map[scopeKey]int{}
	for _, s := range spans {
		res := s.Resource()
		rk := res.Encoded(attribute.DefaultEncoder())
		ri, ok := resIndex[rk]
		if !ok {
			ri = len(req.ResourceSpans)
			resIndex[rk] = ri
			req.ResourceSpans = append(req.ResourceSpans, otlpResourceSpans{
				Resource: otlpResource{Attributes: keyValues(res.Attributes())}, SchemaURL: res.SchemaURL()})
		}
		is := s.InstrumentationScope()
		sk := scopeKey{rk, is.Name, is.Version}
		si, ok := scopeIndex[sk]
		rs := &req.ResourceSpans[ri]
		if !ok {
			si = len(rs.ScopeSpans)
			scopeIndex[sk] = si
			rs.ScopeSpans = append(rs.ScopeSpans, otlpScopeSpans{Scope: otlpScope{Name: is.Name, Version: is.Version}})
		}
		rs.ScopeSpans[si].Spans = append(rs.ScopeSpans[si].Spans, encodeSpan(s))
	}
	return req
}

func encodeSpan(s sdktrace.ReadOnlySpan) otlpSpan {
	sc := s.SpanContext()
	out := otlpSpan{
		TraceID:           sc.TraceID().String(),
		SpanID:            sc.SpanID().String(),
		TraceState:        sc.TraceState().String(),
		Name:              s.Name(),
		Kind:              int(s.SpanKind()), // the same numbers as OTLP's SpanKind
		StartTimeUnixNano: unixNano(s.StartTime()),
		EndTimeUnixNano:   unixNano(s.EndTime()),
		Attributes:        keyValues(s.Attributes()),
		Status:            encodeStatus(s.Status()),
	}
	if p := s.Parent(); p.SpanID().IsValid() {
		out.ParentSpanID = p.SpanID().String()
	}
	for _, ev := range s.Events() {
		out.Events = append(out.Events, otlpEvent{TimeUnixNano: unixNano(ev.Time), Name: ev.Name, Attributes: keyValues(ev.Attributes)})
	}
	for _, l := range s.Links() {
		out.Links = append(out.Links, otlpLink{TraceID: l.SpanContext.TraceID().String(),
			SpanID: l.SpanContext.SpanID().String(), Attributes: keyValues(l.Attributes)})
	}
	return out
}

// encodeStatus maps the API's codes (Unset 0, Error 1, Ok 2) to OTLP's
// (Unset 0, Ok 1, Error 2).
func encodeStatus(st sdktrace.Status) otlpStatus {
	switch st.Code {
	case codes.Error:
		return otlpStatus{Code: 2, Message: st.Description}
	case codes.Ok:
		return otlpStatus{Code: 1}
	}
	return otlpStatus{}
}

func unixNano(t time.Time) string {
	if t.IsZero() {
		return "0"
	}
	return strconv.FormatInt(t.UnixNano(), 10)
}

func keyValues(attrs []attribute.KeyValue) []otlpKeyValue {
	if len(attrs) == 0 {
		return nil
	}
	out := make([]otlpKeyValue, 0, len(attrs))
	for _, a := range attrs {
		out = append(out, otlpKeyValue{Key: string(a.Key), Value: anyValue(a.Value)})
	}
	return out
}

func anyValue(v attribute.Value) otlpAnyValue {
	switch v.Type() {
	case attribute.BOOL:
		b := v.AsBool()
		return otlpAnyValue{BoolValue: &b}
	case attribute.INT64:
		s := strconv.FormatInt(v.AsInt64(), 10)
		return otlpAnyValue{IntValue: &s}
	case attribute.FLOAT64:
		f := v.AsFloat64()
		return otlpAnyValue{DoubleValue: &f}
	case attribute.STRINGSLICE:
		return array(v.AsStringSlice(), attribute.StringValue)
	case attribute.INT64SLICE:
		return array(v.AsInt64Slice(), attribute.Int64Value)
	case attribute.BOOLSLICE:
		return array(v.AsBoolSlice(), attribute.BoolValue)
	case attribute.FLOAT64SLICE:
		return array(v.AsFloat64Slice(), attribute.Float64Value)
	}
	s := v.Emit()
	return otlpAnyValue{StringValue: &s}
}

// array is a slice attribute's value: each element encoded as a scalar
// attribute of its type is.
func array[T any](xs []T, value func(T) attribute.Value) otlpAnyValue {
	var vals []otlpAnyValue
	for _, x := range xs {
		vals = append(vals, anyValue(value(x)))
	}
	return otlpAnyValue{ArrayValue: &otlpArrayValue{Values: vals}}
}
