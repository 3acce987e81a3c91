package handler

import (
	"context"
	"log"

	"github.com/aws/aws-lambda-go/lambda"
)

// Start is a function binary's main: it loads the function's environment
// (Load, with resolve for what it reads at cold start), builds its handler
// with build and hands it to the Lambda runtime. A failure before the
// first invocation ends the process, which Lambda reports as an init
// error.
func Start[H any](name string, resolve Resolver, build func(context.Context, Env) (H, error)) {
	ctx := context.Background()
	env, err := Load(ctx, name, resolve)
	if err != nil {
		log.Fatalf("%s: %v", name, err)
	}
	h, err := build(ctx, env)
	if err != nil {
		log.Fatalf("%s: %v", name, err)
	}
	lambda.Start(h)
}
