package stack

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/conveyor/conveyor/internal/aws/bus"
	"github.com/conveyor/conveyor/internal/handler"
)

// functions are every deployed function by name, typed alike, for the
// tools that reach any of them (`make invoke -in-process`, against the
// local stack: the HTTP functions get the local stand-ins, APILocal and
// AdminLocal; the relay the environment's bus). It lives with the local
// stack, not in internal/handler, so that a function's binary links only
// the adapters its own main chooses.
func functions() map[string]handler.Function[any] {
	fs := []handler.Function[any]{
		anyFunction(handler.API(handler.APILocal)), anyFunction(handler.Admin(handler.AdminLocal)), anyFunction(handler.Uploads),
		anyFunction(handler.Schedules), anyFunction(handler.Confirm), anyFunction(handler.Publisher), anyFunction(handler.System),
		anyFunction(handler.Recovery), anyFunction(handler.Relay(bus.For)), anyFunction(handler.Stream),
	}
	m := make(map[string]handler.Function[any], len(fs))
	for _, f := range fs {
		m[f.Name] = f
	}
	return m
}

// anyFunction is f with its handler typed any (lambda.Start takes any).
func anyFunction[H any](f handler.Function[H]) handler.Function[any] {
	return handler.Function[any]{Name: f.Name, Resolve: f.Resolve, New: func(ctx context.Context, env handler.Env) (any, error) { return f.New(ctx, env) }}
}

// FunctionNames are the functions' names, sorted.
func FunctionNames() []string { return slices.Sorted(maps.Keys(functions())) }

// LookupFunction returns the function named name, or an error listing the
// names.
func LookupFunction(name string) (handler.Function[any], error) {
	f, ok := functions()[name]
	if !ok {
		return handler.Function[any]{}, fmt.Errorf("unknown function %q (one of %v)", name, FunctionNames())
	}
	return f, nil
}
