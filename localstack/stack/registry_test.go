package stack_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/conveyor/conveyor/internal/config"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/resources"
	"github.com/conveyor/conveyor/localstack/awstest"
	"github.com/conveyor/conveyor/localstack/stack"
)

// TestEveryFunctionOfTheDefinitionIsRegistered: make invoke reaches every
// function the stacks deploy, and no other; the ones given a secret by ARN
// read it at cold start.
func TestEveryFunctionOfTheDefinitionIsRegistered(t *testing.T) {
	t.Parallel()
	want := slices.Clone(resources.For(job.Local).Functions)
	slices.Sort(want)
	if diff := cmp.Diff(want, stack.FunctionNames()); diff != "" {
		t.Errorf("registered functions (-definition +registry):\n%s", diff)
	}
	for _, name := range stack.FunctionNames() {
		f, err := stack.LookupFunction(name)
		if err != nil || f.Name != name {
			t.Fatalf("Lookup(%q) = %q, %v", name, f.Name, err)
		}
		// The JWT key is resolved at cold start; the OAuth client is read
		// when a token first needs a refresh, so that a publisher without
		// it still starts (jobs wait for it).
		reads := resources.ReadsJWTSecret(name)
		if got := f.Resolve != nil; got != reads {
			t.Errorf("%s resolves secrets at cold start: %v, want %v", name, got, reads)
		}
	}
	if _, err := stack.LookupFunction("nope"); err == nil || !strings.Contains(err.Error(), resources.FuncRelay) {
		t.Errorf("an unknown name: %v, want an error listing the functions", err)
	}
}

// TestEveryFunctionBuildsFromItsConfiguration builds each function's
// handler from the configuration its stack gives it, against the emulator.
func TestEveryFunctionBuildsFromItsConfiguration(t *testing.T) {
	t.Parallel()
	e := awstest.Provision(t)
	extra := map[string]string{config.VarJWTSecret: strings.Repeat("k", 32),
		config.VarDeviantArtClientID: "id", config.VarDeviantArtClientSecret: "secret"}
	for _, name := range stack.FunctionNames() {
		f, err := stack.LookupFunction(name)
		if err != nil {
			t.Fatal(err)
		}
		h, err := f.New(context.Background(), e.Function(t, name, extra))
		if err != nil || h == nil {
			t.Errorf("%s: handler %T, %v", name, h, err)
		}
	}
}
