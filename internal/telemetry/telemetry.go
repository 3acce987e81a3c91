// Package telemetry carries one trace per job: W3C trace context from the
// API request through the queue message and the worker's run to the
// external calls, recorded with OpenTelemetry and sent to an OTLP/HTTP
// collector (Exporter). With no collector configured nothing is recorded
// and nothing is sent, and a trace context a caller sent is still passed
// on, so the job's log lines carry its trace id.
//
// The code that makes spans uses the global OpenTelemetry API
// (otel.Tracer): Setup installs the provider a function's main builds from
// its configuration, and a test installs its own.
package telemetry

import (
	"context"
	"errors"
	"net/http"
	"os"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// ScopeName is the instrumentation scope of every span Conveyor makes.
const ScopeName = "github.com/conveyor/conveyor"

// Attribute keys Conveyor puts on its spans, beside OpenTelemetry's
// semantic conventions.
const (
	// AttrJobID is the job a span works on.
	AttrJobID = attribute.Key("conveyor.job_id")
	// AttrRequestID is the API request a server span answers.
	AttrRequestID = attribute.Key("conveyor.request_id")
)

// FlushTimeoutDefault bounds Flush when its context has no earlier
// deadline.
const FlushTimeoutDefault = 2 * time.Second

// Config says where spans go.
type Config struct {
	// Endpoint is the OTLP/HTTP collector's base URL (the exporter posts
	// to Endpoint + "/v1/traces"); empty: tracing off, Setup returns nil.
	Endpoint string
	// SampleRatio is the share of new traces recorded; a span whose
	// parent came from a caller follows the parent's sampled flag.
	SampleRatio float64
	// Service is the service.name of every span (conveyor-<function>).
	Service string
	// Environment is deployment.environment.name.
	Environment string
	// HTTPClient posts the spans (default a client with a 10 s timeout).
	HTTPClient *http.Client
}

// Provider is a function's tracer provider: spans are batched and sent
// when Flush is called (at the end of every invocation) or the batch
// fills.
type Provider struct {
	tp *sdktrace.TracerProvider
}

// Setup builds the provider cfg describes and installs it, with the W3C
// trace context propagator, as OpenTelemetry's global. With no Endpoint it
// installs nothing and returns nil: spans then cost a context lookup.
func Setup(cfg Config) (*Provider, error) {
	if cfg.Endpoint == "" {
		return nil, nil
	}
	exp, err := NewExporter(cfg.Endpoint, cfg.HTTPClient)
	if err != nil {
		return nil, err
	}
	attrs := []attribute.KeyValue{
		attribute.String("service.name", cfg.Service),
		attribute.String("telemetry.sdk.name", "opentelemetry"),
		attribute.String("telemetry.sdk.language", "go"),
		attribute.String("telemetry.sdk.version", otel.Version()),
	}
	if cfg.Environment != "" {
		attrs = append(attrs, attribute.String("deployment.environment.name", cfg.Environment))
	}
	if fn := os.Getenv("AWS_LAMBDA_FUNCTION_NAME"); fn != "" {
		attrs = append(attrs, attribute.String("cloud.provider", "aws"), attribute.String("faas.name", fn))
	}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp),
		sdktrace.WithResource(resource.NewSchemaless(attrs...)),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(cfg.SampleRatio))),
	)
	Install(tp)
	return &Provider{tp: tp}, nil
}

// Install makes tp OpenTelemetry's global tracer provider, with the W3C
// trace context propagator (tests install an SDK provider of their own).
func Install(tp trace.TracerProvider) {
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.TraceContext{})
}

// Flush sends every span ended so far, before ctx's deadline and at most
// FlushTimeoutDefault: Lambda freezes the process once an invocation
// returns, so a function flushes before it answers. A nil Provider does
// nothing.
func (p *Provider) Flush(ctx context.Context) error {
	if p == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), FlushTimeoutDefault)
	defer cancel()
	return p.tp.ForceFlush(ctx)
}

// Shutdown flushes and stops the provider.
func (p *Provider) Shutdown(ctx context.Context) error {
	if p == nil {
		return nil
	}
	return p.tp.Shutdown(ctx)
}

// tracer is Conveyor's tracer from the global provider (looked up at each
// call, so that a provider installed later is used).
func tracer() trace.Tracer { return otel.Tracer(ScopeName) }

// Start starts a span of kind under ctx's span.
func Start(ctx context.Context, name string, kind trace.SpanKind, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	return tracer().Start(ctx, name, trace.WithSpanKind(kind), trace.WithAttributes(attrs...))
}

// End ends span, marking it failed with err when err is not nil.
func End(span trace.Span, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// traceContext is the one propagation format: W3C trace context, whatever
// the global propagator is (none is installed while tracing is off, and an
// incoming trace is passed on anyway).
var traceContext propagation.TraceContext

// Traceparent is the W3C traceparent of ctx's span ("" when ctx carries no
// valid span context).
func Traceparent(ctx context.Context) string {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ""
	}
	c := propagation.MapCarrier{}
	traceContext.Inject(ctx, c)
	return c["traceparent"]
}

// WithTraceparent is ctx with the remote span context tp names as the
// parent of the spans started under it; ctx unchanged when tp is empty or
// malformed.
func WithTraceparent(ctx context.Context, tp string) context.Context {
	if tp == "" {
		return ctx
	}
	return traceContext.Extract(ctx, propagation.MapCarrier{"traceparent": tp})
}

// Extract is ctx with the trace context of a request's headers (get looks
// one up by name, case-insensitively) as the remote parent.
func Extract(ctx context.Context, get func(name string) string) context.Context {
	return traceContext.Extract(ctx, headerGetter(get))
}

// Inject writes ctx's trace context into h (traceparent, tracestate).
func Inject(ctx context.Context, h http.Header) {
	traceContext.Inject(ctx, propagation.HeaderCarrier(h))
}

// TraceID is ctx's trace id in hex ("" when there is none).
func TraceID(ctx context.Context) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.HasTraceID() {
		return ""
	}
	return sc.TraceID().String()
}

// headerGetter adapts a lookup to a propagation.TextMapCarrier (read only).
type headerGetter func(string) string

func (g headerGetter) Get(key string) string { return g(key) }
func (headerGetter) Set(string, string)      {}
func (headerGetter) Keys() []string          { return []string{"traceparent", "tracestate"} }

type jobKey struct{}

// WithJobID is ctx naming the job its work is for: every log line written
// with ctx carries it as job_id (NewLogHandler), and Start's spans can
// name it.
func WithJobID(ctx context.Context, id string) context.Context {
	if id == "" {
		return ctx
	}
	return context.WithValue(ctx, jobKey{}, id)
}

// JobID is the job ctx names ("" when none).
func JobID(ctx context.Context) string {
	id, _ := ctx.Value(jobKey{}).(string)
	return id
}

// ErrNoEndpoint is returned by NewExporter without an endpoint.
var ErrNoEndpoint = errors.New("telemetry: no OTLP endpoint")

// Join is ctx continuing the trace tp names (a job's): ctx itself when tp
// is empty or ctx is already in that trace, else ctx with tp's span
// context as the remote parent. Work done for a job (a resend by a sweep,
// an operator's restart) thus joins the job's one trace.
func Join(ctx context.Context, tp string) context.Context {
	if tp == "" {
		return ctx
	}
	joined := WithTraceparent(ctx, tp)
	if id := TraceID(joined); id == "" || id == TraceID(ctx) {
		return ctx
	}
	return joined
}
