package handler

import (
	"context"
	"log"

	"github.com/aws/aws-lambda-go/lambda"
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
	h, err := f.New(ctx, env)
	if err != nil {
		log.Fatalf("%s: %v", f.Name, err)
	}
	lambda.Start(h)
}
