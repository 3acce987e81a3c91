package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/conveyor/conveyor/internal/aws/awsclient"
	"github.com/conveyor/conveyor/internal/handler"
	"github.com/conveyor/conveyor/internal/resources"
	"github.com/conveyor/conveyor/localstack/lambdaruntime"
	"github.com/conveyor/conveyor/localstack/stack"
)

// runInvoke is the invoke subcommand: it feeds a sample event to one
// function against the running local stack, the way Lambda would invoke
// it: `make invoke FN=api EVENT=events/api-healthz.json` (after `make run`;
// it reads .local/env). By default it builds the function's bootstrap for
// this host and runs it under the local Lambda Runtime API with the stack's
// environment; -in-process calls its handler in this process instead.
func runInvoke(args []string) int {
	fs := flag.NewFlagSet("invoke", flag.ContinueOnError)
	fn := fs.String("fn", "", "function: "+strings.Join(stack.FunctionNames(), ", "))
	event := fs.String("event", "", "path of the event JSON")
	inProcess := fs.Bool("in-process", false, "call the handler in this process instead of running the function's binary")
	if code, done := parse(fs, args); done {
		return code
	}
	payload, err := os.ReadFile(*event)
	if err != nil {
		return invokeFailed(err)
	}
	ctx := context.Background()
	var out []byte
	if *inProcess {
		out, err = invokeInProcess(ctx, *fn, payload)
	} else {
		out, err = invokeBinary(ctx, *fn, payload)
	}
	if err != nil {
		return invokeFailed(err)
	}
	fmt.Println(string(out))
	return 0
}

// invokeInProcess builds the function's handler the way its binary does
// (stack.LookupFunction), with the SDK's usual configuration, and calls it in
// this process; a stream's response is copied to stdout.
func invokeInProcess(ctx context.Context, fn string, payload []byte) ([]byte, error) {
	f, err := stack.LookupFunction(fn)
	if err != nil {
		return nil, err
	}
	awsCfg, err := awsclient.Load(ctx)
	if err != nil {
		return nil, err
	}
	env, err := handler.FromConfig(ctx, fn, awsCfg, f.Resolve)
	if err != nil {
		return nil, fmt.Errorf("%w (run `make run` first; invoke reads .local/env)", err)
	}
	h, err := f.New(ctx, env)
	if err != nil {
		return nil, err
	}
	if fn != resources.FuncStream {
		return lambda.NewHandler(h).Invoke(ctx, payload)
	}
	sh, ok := h.(func(context.Context, events.LambdaFunctionURLRequest) (*events.LambdaFunctionURLStreamingResponse, error))
	if !ok {
		return nil, fmt.Errorf("the %s function's handler is not a streaming one (%T)", fn, h)
	}
	resp, err := lambdaruntime.InProcessStream(fn, sh).InvokeStream(ctx, payload)
	if err != nil {
		return nil, err
	}
	return nil, printStream(resp)
}

// invokeBinary runs the function's own bootstrap once, with the stack's
// environment (what .local/env exports).
func invokeBinary(ctx context.Context, fn string, payload []byte) ([]byte, error) {
	size, ok := resources.FunctionSizes[fn]
	if !ok {
		return nil, fmt.Errorf("unknown function %q (one of %v)", fn, stack.FunctionNames())
	}
	if os.Getenv("CONVEYOR_TABLE") == "" {
		return nil, fmt.Errorf("no stack environment: run `make run` first (invoke reads .local/env)")
	}
	paths, err := stack.BuildFunctions(ctx, "", []string{fn})
	if err != nil {
		return nil, err
	}
	env := map[string]string{}
	for _, kv := range os.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "CONVEYOR_") || strings.HasPrefix(k, "AWS_") {
			env[k] = v
		}
	}
	f, err := lambdaruntime.NewFunction(lambdaruntime.FunctionConfig{Name: "conveyor-local-" + fn, Bootstrap: paths[fn], Env: env,
		MemoryMB: size.MemoryMB, Timeout: size.Timeout, Output: os.Stderr})
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fn != resources.FuncStream {
		return f.Invoke(ctx, payload)
	}
	resp, err := f.InvokeStream(ctx, payload)
	if err != nil {
		return nil, err
	}
	return nil, printStream(resp)
}

// printStream copies a streamed response to stdout.
func printStream(resp *lambdaruntime.StreamResponse) error {
	defer resp.Body.Close()
	fmt.Printf("HTTP %d %v\n", resp.StatusCode, resp.Headers)
	_, err := io.Copy(os.Stdout, resp.Body)
	return err
}

// invokeFailed reports err and returns invoke's status for it.
func invokeFailed(err error) int {
	fmt.Fprintf(os.Stderr, "invoke: %v\n", err)
	return 1
}
