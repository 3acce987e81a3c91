package worker_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/conveyor/conveyor/internal/aws/awsclient"
	"github.com/conveyor/conveyor/internal/aws/store"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/retry"
	"github.com/conveyor/conveyor/internal/testfactory"
	"github.com/conveyor/conveyor/internal/worker"
	"github.com/conveyor/conveyor/localstack/awstest"
)

// echo is a small kind for the loop's own tests: one phase, no items, its
// next call as long as next (job.Budgeter), and Work that succeeds.
type echo struct{ next time.Duration }

func (echo) Name() string                                                { return "echo" }
func (echo) Phases() []string                                            { return []string{"echo"} }
func (echo) Normalize(s job.Spec) (job.Spec, error)                      { return s, nil }
func (echo) Validate(context.Context, job.ValidationEnv, job.Spec) error { return nil }
func (echo) Prepare(context.Context, string, job.Spec, *job.Job) error {
	return nil
}
func (e echo) NextCall(job.Job) time.Duration { return e.next }
func (echo) Work(ctx context.Context, a job.Run) error {
	if err := a.Hold(ctx, time.Second); err != nil {
		return err
	}
	return a.Save(ctx, func(j *job.Job) {
		j.CompletePhase("echo", "done", a.Now())
		_ = j.Apply(job.Succeed, a.Now())
	})
}

// setupLoop is a Worker running kinds on the test's own table, and a
// queued job of typ in it.
func setupLoop(t *testing.T, typ string, kinds ...job.Kind) (*worker.Worker, *store.Store, job.Job) {
	t.Helper()
	env := awstest.Provision(t)
	st := store.New(awsclient.New(env.Config).DynamoDB, env.Res.Definition.Table.Name, time.Now)
	w := worker.New(worker.Config{Store: st, Worker: "w-loop", Kinds: job.NewRegistry(kinds...),
		Policy: retry.Policy{Base: time.Second, Max: time.Minute, MaxAttempts: 3, ParkAfter: time.Minute},
		Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))})
	j := testfactory.Build(testfactory.JobOpts{})
	j.Type, j.Items, j.MediaRefs, j.Phases = typ, nil, nil, job.NewPhases("echo")
	if _, _, err := st.CreateJob(context.Background(), &j); err != nil {
		t.Fatal(err)
	}
	return w, st, j
}

func TestATestKindRunsToSuccess(t *testing.T) {
	t.Parallel()
	w, st, j := setupLoop(t, "echo", echo{})
	v, err := w.Run(context.Background(), worker.Delivery{JobID: j.ID, Receives: 1})
	if err != nil || !v.Done {
		t.Fatalf("Run = %+v, %v; want done", v, err)
	}
	got, err := st.GetJob(context.Background(), j.ID)
	if err != nil || got.Status != job.Succeeded || got.Attempts != 1 {
		t.Fatalf("job = %s after %d attempts (%v), want succeeded after 1", got.Status, got.Attempts, err)
	}
}

// TestANextCallLongerThanTheTimeLeftIsNotClaimed: the loop asks the kind
// how long its next call lasts (job.Budgeter), not which kind it is.
func TestANextCallLongerThanTheTimeLeftIsNotClaimed(t *testing.T) {
	t.Parallel()
	w, st, j := setupLoop(t, "echo", echo{next: 40 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	v, err := w.Run(ctx, worker.Delivery{JobID: j.ID, Receives: 1})
	if err != nil || v.Done || v.RetryIn != worker.HandBackDefault {
		t.Fatalf("Run = %+v, %v; want handed back after %s", v, err, worker.HandBackDefault)
	}
	got, err := st.GetJob(context.Background(), j.ID)
	if err != nil || got.Status != job.Queued || got.Attempts != 0 {
		t.Fatalf("job = %s after %d attempts (%v), want queued, no attempt spent", got.Status, got.Attempts, err)
	}
}

func TestAJobOfAnUnknownKindFailsPermanently(t *testing.T) {
	t.Parallel()
	w, st, j := setupLoop(t, "gone")
	v, err := w.Run(context.Background(), worker.Delivery{JobID: j.ID, Receives: 1})
	if err != nil || !v.Done {
		t.Fatalf("Run = %+v, %v; want done", v, err)
	}
	got, err := st.GetJob(context.Background(), j.ID)
	if err != nil || got.Status != job.Failed || got.Error == nil || got.Error.Code != "permanent_error" {
		t.Fatalf("job = %s, error %+v (%v), want failed permanent_error", got.Status, got.Error, err)
	}
}
