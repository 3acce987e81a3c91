package stack

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/conveyor/conveyor/localstack/lambdaruntime"
)

// TestFunctionLogsGoToTheInvokedFunctionsOutput: a record logged in an
// invocation's context reaches that function's output at Info and above,
// with the attributes of the logger that wrote it, and the stack's own
// logger still at its level; one logged outside any invocation goes to "".
func TestFunctionLogsGoToTheInvokedFunctionsOutput(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	outs := map[string]*strings.Builder{}
	output := func(fn string) io.Writer {
		mu.Lock()
		defer mu.Unlock()
		outs[fn] = &strings.Builder{}
		return outs[fn]
	}
	var inner strings.Builder
	log := slog.New(newFunctionLogs(slog.NewJSONHandler(&inner, &slog.HandlerOptions{Level: slog.LevelWarn}), output, []string{"api", "relay"})).With("env", "local")
	relay := lambdaruntime.WithFunction(context.Background(), "relay")
	log.InfoContext(relay, "relayed a stream batch", "records", 3)
	log.DebugContext(relay, "not at Lambda's level")
	log.WarnContext(lambdaruntime.WithFunction(context.Background(), "api"), "slow")
	log.Info("outside")
	if got := outs["relay"].String(); !strings.Contains(got, `"msg":"relayed a stream batch","env":"local","records":3`) || strings.Count(got, "\n") != 1 {
		t.Errorf("relay's output %q: want its one Info line with the logger's attributes", got)
	}
	if got := outs["api"].String(); !strings.Contains(got, `"msg":"slow"`) || strings.Count(got, "\n") != 1 {
		t.Errorf("api's output %q: want its Warn line", got)
	}
	if got := outs[""].String(); !strings.Contains(got, `"msg":"outside"`) {
		t.Errorf("the output of lines outside invocations %q: want the line", got)
	}
	if got := inner.String(); strings.Count(got, "\n") != 1 || !strings.Contains(got, `"msg":"slow"`) {
		t.Errorf("the stack's logger got %q: want the Warn line alone (its level)", got)
	}
}
