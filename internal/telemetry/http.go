package telemetry

import (
	"net/http"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// Transport wraps rt (nil: http.DefaultTransport) so that every request
// is a client span under its context's span, named by name (nil: the
// method and the URL's host and path), and carries that span's
// traceparent header to the server.
func Transport(rt http.RoundTripper, name func(*http.Request) string) http.RoundTripper {
	if rt == nil {
		rt = http.DefaultTransport
	}
	if name == nil {
		name = func(r *http.Request) string { return r.Method + " " + r.URL.Host + r.URL.Path }
	}
	return &transport{inner: rt, name: name}
}

// Client is a copy of c (nil: a new client) whose transport is Transport.
func Client(c *http.Client, name func(*http.Request) string) *http.Client {
	var out http.Client
	if c != nil {
		out = *c
	}
	if _, ok := out.Transport.(*transport); !ok {
		out.Transport = Transport(out.Transport, name)
	}
	return &out
}

type transport struct {
	inner http.RoundTripper
	name  func(*http.Request) string
}

func (t *transport) RoundTrip(r *http.Request) (*http.Response, error) {
	ctx, span := tracer().Start(r.Context(), t.name(r), trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
		attribute.String("http.request.method", r.Method),
		attribute.String("server.address", r.URL.Hostname()),
		attribute.String("url.full", r.URL.Scheme+"://"+r.URL.Host+r.URL.Path), // no query: it may hold secrets
	))
	if !trace.SpanContextFromContext(ctx).IsValid() {
		// No trace to carry (tracing off and no caller's trace).
		span.End()
		return t.inner.RoundTrip(r)
	}
	r = r.Clone(ctx) // a RoundTripper must not change the caller's request
	Inject(ctx, r.Header)
	resp, err := t.inner.RoundTrip(r)
	switch {
	case err != nil:
		End(span, err)
	default:
		span.SetAttributes(attribute.Int("http.response.status_code", resp.StatusCode))
		if resp.StatusCode >= 400 {
			span.SetStatus(codes.Error, resp.Status)
		}
		span.End()
	}
	return resp, err
}
