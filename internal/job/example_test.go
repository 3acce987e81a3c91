package job_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/conveyor/conveyor/internal/invalid"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/retry"
)

// shout is a kind of job that upper-cases a message: params
// {"message":"…"}, no items, one phase, the result {"shouted":"…"}. It is
// docs/architecture.md's "add a job kind": ExampleKind shows its front and
// where it is registered; TestAKindRegisteredInATestRunsThroughThePipeline
// submits one through the API and lets the real run loop call its Work.
//
// A kind in the product is one package holding its front (Name … Phases,
// plus an optional job.Explainer) and its Work, with the hooks the run
// loop (internal/worker) asks when it needs them (job.Loader,
// job.Budgeter, job.Reconciler), as internal/publish and
// internal/httpkind are.
type shout struct{}

type shoutParams struct {
	Message string `json:"message"`
}

// Name is the job's "type" in the API.
func (shout) Name() string { return "shout" }

// Phases are the job's phases, in order.
func (shout) Phases() []string { return []string{"shout"} }

// Normalize trims the message, so " hi " and "hi" are the same job (the
// same idempotency hash). No clock, no I/O.
func (shout) Normalize(s job.Spec) (job.Spec, error) {
	var p shoutParams
	if err := json.Unmarshal(s.Params, &p); err != nil {
		return s, invalid.Field("params", "must be {\"message\":\"…\"}")
	}
	p.Message = strings.TrimSpace(p.Message)
	b, err := json.Marshal(p)
	return job.Spec{Items: s.Items, Params: b}, err
}

// Validate checks shape and limits: an *invalid.FieldError is a 400.
func (shout) Validate(_ context.Context, _ job.ValidationEnv, s job.Spec) error {
	var p shoutParams
	_ = json.Unmarshal(s.Params, &p)
	if p.Message == "" || len(p.Message) > 1000 {
		return invalid.Field("params.message", "must hold 1 to 1000 bytes")
	}
	if len(s.Items) > 0 {
		return invalid.Field("items", "must be empty")
	}
	return nil
}

// Prepare fills the new job before it is stored (its items, anything
// looked up); a *job.UnusableError is a 422. Shout needs nothing.
func (shout) Prepare(context.Context, string, job.Spec, *job.Job) error { return nil }

// Work is one attempt. Its error is classified by internal/retry:
// retry.Permanent fails the job at once, retry.Temporary retries with
// backoff (an attempt spent), retry.Snooze waits without spending one;
// job.Step names the phase that failed. Progress and the end are saved
// through the Attempt.
func (shout) Work(ctx context.Context, a job.Run) error {
	var p shoutParams
	if err := a.Job().Params.Decode(&p); err != nil {
		return retry.Permanent(err)
	}
	if strings.Contains(p.Message, "later") {
		return job.Step("shout", -1, retry.Temporary(errors.New("not now"), 0))
	}
	result, err := job.DocOf(map[string]string{"shouted": strings.ToUpper(p.Message)})
	if err != nil {
		return err
	}
	return a.Save(ctx, func(j *job.Job) {
		j.CompletePhase("shout", "done", a.Now())
		j.Result = result
		_ = j.Apply(job.Succeed, a.Now())
	})
}

// A new kind implements job.Kind (the front: Name, Normalize, Validate,
// Prepare, Phases; and Work) and is registered where the graph is built:
//
//   - the deployed functions: one line in handler.Kinds
//     (internal/handler/pipeline.go), the list the submitting functions
//     (api, schedules, recovery) take their fronts from and the publisher's
//     runner runs (TestSubmittersAcceptTheKindsThePublisherRuns);
//   - the local stack and tests: stack.AppOptions{Kinds: …} or
//     stack.Options{Kinds: …}, which register the kind with the run loop and
//     its front with submission, as this example does by hand.
func ExampleKind() {
	kinds := job.NewRegistry(shout{}) // the run loop's: whole kinds
	fronts := kinds.Fronts()          // submission's: the front halves
	fmt.Println("run loop knows:", kinds.Names())
	fmt.Println("submission knows:", fronts.Names())

	// What POST /v1/jobs does with {"type":"shout","params":{…}}.
	f, _ := fronts.Get("shout")
	spec, _ := f.Normalize(job.Spec{Params: json.RawMessage(`{"message":"  hi  "}`)})
	fmt.Println("normalised:", string(spec.Params))
	fmt.Println("valid:", f.Validate(context.Background(), job.ValidationEnv{}, spec))
	empty, _ := f.Normalize(job.Spec{Params: json.RawMessage(`{"message":" "}`)})
	err := f.Validate(context.Background(), job.ValidationEnv{}, empty)
	if fe, ok := invalid.As(err); ok {
		fmt.Printf("400 on %s: %v\n", fe.Field, err)
	}
	fmt.Println("phases:", f.Phases())
	fmt.Println("a second shout:", kinds.Register(shout{}))
	// Output:
	// run loop knows: [shout]
	// submission knows: [shout]
	// normalised: {"message":"hi"}
	// valid: <nil>
	// 400 on params.message: params.message must hold 1 to 1000 bytes
	// phases: [shout]
	// a second shout: kind already registered: "shout"
}
