package handler

import (
	"context"
	"fmt"
	"maps"
	"slices"
)

// functions are every deployed function by name, typed alike, for the
// tools that reach any of them (`make invoke -in-process`, against the
// local stack: the HTTP functions get the local stand-ins, APILocal and
// AdminLocal). It is built on demand, not at package init, so a function's
// binary, which starts only its own, links no other's wiring for it.
func functions() map[string]Function[any] {
	fs := []Function[any]{
		anyFunction(API(APILocal)), anyFunction(Admin(AdminLocal)), anyFunction(Uploads), anyFunction(Schedules),
		anyFunction(Confirm), anyFunction(Publisher), anyFunction(System), anyFunction(Recovery), anyFunction(Relay),
		anyFunction(Stream),
	}
	m := make(map[string]Function[any], len(fs))
	for _, f := range fs {
		m[f.Name] = f
	}
	return m
}

// anyFunction is f with its handler typed any (lambda.Start takes any).
func anyFunction[H any](f Function[H]) Function[any] {
	return Function[any]{Name: f.Name, Resolve: f.Resolve, New: func(ctx context.Context, env Env) (any, error) { return f.New(ctx, env) }}
}

// Names are the functions' names, sorted.
func Names() []string { return slices.Sorted(maps.Keys(functions())) }

// Lookup returns the function named name, or an error listing the names.
func Lookup(name string) (Function[any], error) {
	f, ok := functions()[name]
	if !ok {
		return Function[any]{}, fmt.Errorf("unknown function %q (one of %v)", name, Names())
	}
	return f, nil
}
