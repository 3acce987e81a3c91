// Command invoke feeds a sample event to one function against the running
// local stack, the way Lambda would invoke it: `make invoke FN=api
// EVENT=events/api-healthz.json` (after `make run`; it reads .local/env).
// By default it builds the function's bootstrap for this host and runs it
// under the local Lambda Runtime API with the stack's environment;
// -in-process calls its handler in this process instead.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/conveyor/conveyor/internal/app"
	"github.com/conveyor/conveyor/internal/awsclient"
	"github.com/conveyor/conveyor/internal/resources"
	"github.com/conveyor/conveyor/localstack/runtime"
	"github.com/conveyor/conveyor/localstack/stack"
)

func main() {
	fn := flag.String("fn", "", "function: api, confirm, publisher, system, recovery or stream")
	event := flag.String("event", "", "path of the event JSON")
	inProcess := flag.Bool("in-process", false, "call the handler in this process instead of running the function's binary")
	flag.Parse()
	payload, err := os.ReadFile(*event)
	if err != nil {
		fail(err)
	}
	ctx := context.Background()
	var out []byte
	if *inProcess {
		out, err = invokeInProcess(ctx, *fn, payload)
	} else {
		out, err = invokeBinary(ctx, *fn, payload)
	}
	if err != nil {
		fail(err)
	}
	fmt.Println(string(out))
}

func invokeInProcess(ctx context.Context, fn string, payload []byte) ([]byte, error) {
	awsCfg, err := awsclient.Load(ctx)
	if err != nil {
		return nil, err
	}
	a, err := app.FromConfig(ctx, fn, awsCfg)
	if err != nil {
		return nil, fmt.Errorf("%w (run `make run` first; invoke reads .local/env)", err)
	}
	var h lambda.Handler
	switch fn {
	case resources.FuncAPI:
		h = lambda.NewHandler(a.APIHandler())
	case resources.FuncConfirm:
		h = lambda.NewHandler(a.ConfirmHandler())
	case resources.FuncPublisher:
		h = lambda.NewHandler(a.PublisherHandler())
	case resources.FuncSystem:
		h = lambda.NewHandler(a.SystemHandler())
	case resources.FuncRecovery:
		h = lambda.NewHandler(a.RecoveryHandler())
	case resources.FuncRelay:
		h = lambda.NewHandler(a.RelayHandler())
	default:
		return nil, fmt.Errorf("unknown function %q in process (api, confirm, publisher, system, recovery, relay)", fn)
	}
	return h.Invoke(ctx, payload)
}

// invokeBinary runs the function's own bootstrap once, with the stack's
// environment (what .local/env exports).
func invokeBinary(ctx context.Context, fn string, payload []byte) ([]byte, error) {
	size, ok := resources.FunctionSizes[fn]
	if !ok {
		return nil, fmt.Errorf("unknown function %q (api, confirm, publisher, system, recovery, stream)", fn)
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
	f, err := runtime.NewFunction(runtime.FunctionConfig{Name: "conveyor-local-" + fn, Bootstrap: paths[fn], Env: env,
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
	defer resp.Body.Close()
	fmt.Printf("HTTP %d %v\n", resp.StatusCode, resp.Headers)
	_, err = io.Copy(os.Stdout, resp.Body)
	return nil, err
}

func fail(err error) {
	fmt.Fprintf(os.Stderr, "invoke: %v\n", err)
	os.Exit(1)
}
