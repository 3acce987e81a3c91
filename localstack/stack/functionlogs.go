package stack

import (
	"context"
	"errors"
	"io"
	"log/slog"

	"github.com/conveyor/conveyor/localstack/lambdaruntime"
)

// functionLogs is the logger of the functions run in process when each
// function has an output of its own (Options.FunctionOutputs): every record
// goes to the stack's logger as before and, at Info and above (the level
// the functions log at in Lambda, handler.NewLogger), as a JSON line to the
// output of the function whose invocation logged it
// (lambdaruntime.FunctionOf) — the lines its CloudWatch log group would
// receive. A record logged outside any invocation goes to the output of "".
type functionLogs struct {
	inner slog.Handler
	outs  map[string]slog.Handler
}

func newFunctionLogs(inner slog.Handler, outputs func(function string) io.Writer, functions []string) *functionLogs {
	h := &functionLogs{inner: inner, outs: map[string]slog.Handler{}}
	for _, fn := range append([]string{""}, functions...) {
		h.outs[fn] = slog.NewJSONHandler(outputs(fn), &slog.HandlerOptions{Level: slog.LevelInfo})
	}
	return h
}

func (h *functionLogs) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelInfo || h.inner.Enabled(ctx, l)
}

func (h *functionLogs) Handle(ctx context.Context, r slog.Record) error {
	var err error
	if h.inner.Enabled(ctx, r.Level) {
		err = h.inner.Handle(ctx, r.Clone())
	}
	if r.Level >= slog.LevelInfo {
		out, ok := h.outs[lambdaruntime.FunctionOf(ctx)]
		if !ok {
			out = h.outs[""]
		}
		err = errors.Join(err, out.Handle(ctx, r))
	}
	return err
}

func (h *functionLogs) WithAttrs(as []slog.Attr) slog.Handler {
	return h.derive(func(o slog.Handler) slog.Handler { return o.WithAttrs(as) })
}

func (h *functionLogs) WithGroup(name string) slog.Handler {
	return h.derive(func(o slog.Handler) slog.Handler { return o.WithGroup(name) })
}

func (h *functionLogs) derive(f func(slog.Handler) slog.Handler) slog.Handler {
	d := &functionLogs{inner: f(h.inner), outs: make(map[string]slog.Handler, len(h.outs))}
	for fn, o := range h.outs {
		d.outs[fn] = f(o)
	}
	return d
}
