package job_test

import (
	"context"
	"errors"
	"testing"

	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/localstack/awstest"
	"github.com/conveyor/conveyor/localstack/stack"
)

func TestMain(m *testing.M) { awstest.Main(m) }

// shout, the example kind, is in example_test.go.

func TestAKindRegisteredInATestRunsThroughThePipeline(t *testing.T) {
	t.Parallel()
	b := awstest.Setup(t, nil, stack.Options{Kinds: []job.Kind{shout{}}})
	tok := b.Token("u-kind", "user", "pro")
	r := b.Must(b.Call("POST", "/v1/jobs", tok, map[string]any{"type": "shout", "params": map[string]any{"message": " hello "}}), 201)
	id := r.Body["id"].(string)
	if ph := r.Body["phases"].([]any); len(ph) != 1 || ph[0].(map[string]any)["name"] != "shout" {
		t.Errorf("phases = %v, want the kind's one phase", ph)
	}
	done := b.WaitStatus(tok, id, "succeeded")
	if res := done.Body["result"].(map[string]any); res["shouted"] != "HELLO" {
		t.Errorf("result = %v", res)
	}
	// The kind's validation answers 400.
	b.Must(b.Call("POST", "/v1/jobs", tok, map[string]any{"type": "shout", "params": map[string]any{"message": ""}}), 400)
}

func TestRegistry(t *testing.T) {
	t.Parallel()
	r := job.NewRegistry(shout{})
	if err := r.Register(shout{}); !errors.Is(err, job.ErrDuplicateKind) {
		t.Errorf("a second shout: %v, want ErrDuplicate", err)
	}
	if _, ok := r.Get("shout"); !ok {
		t.Error("shout is not found")
	}
	if _, ok := r.Get("nope"); ok {
		t.Error("an unknown kind is found")
	}
	if got := r.Names(); len(got) != 1 || got[0] != "shout" {
		t.Errorf("Names = %v", got)
	}
	var nilReg *job.Registry
	if _, ok := nilReg.Get("shout"); ok {
		t.Error("a nil registry finds kinds")
	}
}

func TestFronts(t *testing.T) {
	t.Parallel()
	// A kind is a front; a registry of kinds hands its fronts to submission.
	kinds := job.NewRegistry(shout{})
	fronts := kinds.Fronts()
	if f, ok := fronts.Get("shout"); !ok || f.Name() != "shout" {
		t.Errorf("Fronts of a registry holding shout: %v, %v", f, ok)
	}
	if err := fronts.Register(shout{}); !errors.Is(err, job.ErrDuplicateKind) {
		t.Errorf("a second shout front: %v, want ErrDuplicate", err)
	}
	// A front alone (no Work) registers where submission looks.
	var front job.Front = onlyFront{}
	if _, isKind := front.(job.Kind); isKind {
		t.Fatal("onlyFront has Work")
	}
	fs := job.NewFronts(front)
	if got := fs.Names(); len(got) != 1 || got[0] != "only" {
		t.Errorf("Names = %v", got)
	}
	var nilFronts *job.Fronts
	if _, ok := nilFronts.Get("only"); ok || nilFronts.Names() != nil {
		t.Error("a nil Fronts finds fronts")
	}
}

// onlyFront is a kind's front half with no Work: shout's rules under
// another name.
type onlyFront struct{}

func (onlyFront) Name() string                           { return "only" }
func (onlyFront) Phases() []string                       { return shout{}.Phases() }
func (onlyFront) Normalize(s job.Spec) (job.Spec, error) { return shout{}.Normalize(s) }
func (onlyFront) Validate(ctx context.Context, e job.ValidationEnv, s job.Spec) error {
	return shout{}.Validate(ctx, e, s)
}
func (onlyFront) Prepare(ctx context.Context, owner string, s job.Spec, j *job.Job) error {
	return shout{}.Prepare(ctx, owner, s, j)
}
