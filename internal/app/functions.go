package app

import (
	"context"
	"fmt"
	"slices"

	"github.com/conveyor/conveyor/internal/handler"
	"github.com/conveyor/conveyor/internal/handler/adminfn"
	"github.com/conveyor/conveyor/internal/handler/apifn"
	"github.com/conveyor/conveyor/internal/handler/confirmfn"
	"github.com/conveyor/conveyor/internal/handler/publisherfn"
	"github.com/conveyor/conveyor/internal/handler/recoveryfn"
	"github.com/conveyor/conveyor/internal/handler/relayfn"
	"github.com/conveyor/conveyor/internal/handler/schedulesfn"
	"github.com/conveyor/conveyor/internal/handler/streamfn"
	"github.com/conveyor/conveyor/internal/handler/systemfn"
	"github.com/conveyor/conveyor/internal/handler/uploadsfn"
)

// Function is how one function is built by its name (resources.Func…), for
// the tools that reach every function: `make invoke -in-process`, against
// the local stack, so the API function gets the local stand-ins
// (apifn.Local).
type Function struct {
	// Resolve completes its configuration at cold start (nil: nothing).
	Resolve handler.Resolver
	// New builds its handler (a func lambda.Start accepts).
	New func(ctx context.Context, env handler.Env) (any, error)
}

func build[H any](n func(context.Context, handler.Env) (H, error)) func(context.Context, handler.Env) (any, error) {
	return func(ctx context.Context, env handler.Env) (any, error) { return n(ctx, env) }
}

// Functions are every function, by name.
var Functions = map[string]Function{
	apifn.Name:       {Resolve: apifn.Resolve, New: build(apifn.NewWith(apifn.Local))},
	adminfn.Name:     {Resolve: adminfn.Resolve, New: build(adminfn.NewWith(adminfn.Local))},
	uploadsfn.Name:   {Resolve: uploadsfn.Resolve, New: build(uploadsfn.New)},
	schedulesfn.Name: {Resolve: schedulesfn.Resolve, New: build(schedulesfn.New)},
	confirmfn.Name:   {Resolve: confirmfn.Resolve, New: build(confirmfn.New)},
	publisherfn.Name: {Resolve: publisherfn.Resolve, New: build(publisherfn.New)},
	systemfn.Name:    {Resolve: systemfn.Resolve, New: build(systemfn.New)},
	recoveryfn.Name:  {Resolve: recoveryfn.Resolve, New: build(recoveryfn.New)},
	relayfn.Name:     {Resolve: relayfn.Resolve, New: build(relayfn.New)},
	streamfn.Name:    {Resolve: streamfn.Resolve, New: build(streamfn.New)},
}

// Names are the functions' names, sorted.
func Names() []string {
	names := make([]string, 0, len(Functions))
	for n := range Functions {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Lookup returns the function named name, or an error listing the names.
func Lookup(name string) (Function, error) {
	f, ok := Functions[name]
	if !ok {
		return Function{}, fmt.Errorf("unknown function %q (one of %v)", name, Names())
	}
	return f, nil
}
