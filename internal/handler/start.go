package handler

import (
	"context"
	"log"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/conveyor/conveyor/internal/resources"
	"github.com/conveyor/conveyor/internal/telemetry"
)

// Function is one deployed function as its binary starts it: its name in
// the resource definition, what it reads at cold start, and how its handler
// (a func lambda.Start accepts) is built. Each function's file gives its
// own (Confirm, Publisher, API(platform), …); Lookup finds any one by name.
type Function[H any] struct {
	// Name is the function's name in the resource definition
	// (resources.Func…).
	Name string
	// Resolve completes its configuration at cold start, before it is
	// checked (nil: nothing to read).
	Resolve Resolver
	// New builds its handler from the environment.
	New func(ctx context.Context, env Env) (H, error)
}

// Start is a function binary's main: it loads f's environment (Load, with
// f.Resolve), builds f's handler and hands it to the Lambda runtime. A
// failure before the first invocation ends the process, which Lambda
// reports as an init error.
func Start[H any](f Function[H]) {
	ctx := context.Background()
	env, err := Load(ctx, f.Name, f.Resolve)
	if err != nil {
		log.Fatalf("%s: %v", f.Name, err)
	}
	tp, err := telemetry.Setup(telemetry.Config{Endpoint: env.Config.Tracing.Endpoint, SampleRatio: env.Config.Tracing.SampleRatio,
		Service: "conveyor-" + f.Name, Environment: string(env.Config.Env)})
	if err != nil {
		log.Fatalf("%s: %v", f.Name, err)
	}
	h, err := f.New(ctx, env)
	if err != nil {
		log.Fatalf("%s: %v", f.Name, err)
	}
	if tp == nil || f.Name == resources.FuncStream {
		// Tracing off; or the stream function, whose response is streamed
		// (a wrapping Handler would buffer it) and which makes no spans.
		lambda.Start(h)
		return
	}
	lambda.Start(flushing{inner: lambda.NewHandler(h), tp: tp})
}

// flushing sends the invocation's spans before it answers: Lambda freezes
// the process once the answer is posted.
type flushing struct {
	inner lambda.Handler
	tp    *telemetry.Provider
}

func (f flushing) Invoke(ctx context.Context, payload []byte) ([]byte, error) {
	out, err := f.inner.Invoke(ctx, payload)
	if ferr := f.tp.Flush(ctx); ferr != nil {
		log.Printf("tracing: %v", ferr)
	}
	return out, err
}
