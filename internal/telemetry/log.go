package telemetry

import (
	"context"
	"log/slog"

	"go.opentelemetry.io/otel/trace"
)

// NewLogHandler wraps h so that every record logged with a context
// carries that context's trace_id and span_id (when it has a span
// context) and job_id (WithJobID), unless the logger already names a job
// (a logger made With("job_id", …) keeps its own).
func NewLogHandler(h slog.Handler) slog.Handler { return &logHandler{inner: h} }

type logHandler struct {
	inner slog.Handler
	// hasJob is set once the handler's own attributes name job_id.
	hasJob bool
}

func (h *logHandler) Enabled(ctx context.Context, l slog.Level) bool { return h.inner.Enabled(ctx, l) }

func (h *logHandler) Handle(ctx context.Context, r slog.Record) error {
	if ctx == nil {
		return h.inner.Handle(ctx, r)
	}
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		r.AddAttrs(slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String()))
	}
	if id := JobID(ctx); id != "" && !h.hasJob && !recordNamesJob(r) {
		r.AddAttrs(slog.String("job_id", id))
	}
	return h.inner.Handle(ctx, r)
}

func (h *logHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	out := &logHandler{inner: h.inner.WithAttrs(attrs), hasJob: h.hasJob}
	for _, a := range attrs {
		if a.Key == "job_id" {
			out.hasJob = true
		}
	}
	return out
}

func (h *logHandler) WithGroup(name string) slog.Handler {
	// Attributes added under a group are not the top-level job_id.
	return &logHandler{inner: h.inner.WithGroup(name), hasJob: h.hasJob}
}

func recordNamesJob(r slog.Record) bool {
	found := false
	r.Attrs(func(a slog.Attr) bool {
		found = a.Key == "job_id"
		return !found
	})
	return found
}
