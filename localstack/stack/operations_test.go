package stack_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/google/go-cmp/cmp"

	"github.com/conveyor/conveyor/internal/admin"
	"github.com/conveyor/conveyor/internal/aws/store"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/resources"
	"github.com/conveyor/conveyor/internal/testfactory"
	"github.com/conveyor/conveyor/localstack/awstest"
	"github.com/conveyor/conveyor/localstack/stack"
)

// Bulk operations over the whole local stack: the admin function answers
// a bulk call by filter past CONVEYOR_BULK_SYNC_MAX (5 here) with 202 and
// an operation, the system function works it off one chunk of
// CONVEYOR_BULK_CHUNK (7 here) per message from the system tier's queue,
// and recovery resumes an operation whose worker died.

const (
	opsSyncMax = "5"
	opsChunk   = 7
	opsJobs    = 30
)

// opHook is the operation worker's crash hook: at point of chunk seq it
// runs once, the first time a worker gets there.
type opHook struct {
	mu    sync.Mutex
	point string
	seq   int
	fired bool
	do    func(op store.Operation) error
}

func (h *opHook) crash(point string, op store.Operation) error {
	h.mu.Lock()
	if h.do == nil || h.fired || point != h.point || op.Seq != h.seq {
		h.mu.Unlock()
		return nil
	}
	h.fired = true
	do := h.do
	h.mu.Unlock()
	return do(op)
}

type opsBundle struct {
	*awstest.Bundle
	admin string
	owner string
}

// setupOps starts a stack whose operations' worker calls hook, pauses the
// medium tier (so that the factory's jobs stay where the test put them
// while restarted ones wait in their queue), and stores opsJobs jobs of
// status for one owner and two of another owner beside them.
func setupOps(t *testing.T, env map[string]string, hook *opHook, status job.Status) (*opsBundle, []string, []string) {
	t.Helper()
	merged := map[string]string{"CONVEYOR_BULK_SYNC_MAX": opsSyncMax, "CONVEYOR_BULK_CHUNK": "7"}
	for k, v := range env {
		merged[k] = v
	}
	b := awstest.Setup(t, merged, stack.Options{OperationCrash: hook.crash})
	ob := &opsBundle{Bundle: b, admin: b.Token("op-admin", "admin", ""), owner: testfactory.Owner()}
	ob.Must(ob.Call("POST", "/v1/admin/tiers/medium/pause", ob.admin, nil), 200)
	var mine, others []string
	for range opsJobs {
		mine = append(mine, testfactory.Job(t, b.Stack.App.Store, testfactory.JobOpts{Owner: ob.owner, Tier: job.Medium, Status: status}).ID)
	}
	bystander := testfactory.Owner()
	for range 2 {
		others = append(others, testfactory.Job(t, b.Stack.App.Store, testfactory.JobOpts{Owner: bystander, Tier: job.Medium, Status: status}).ID)
	}
	return ob, mine, others
}

// start makes the bulk call and checks its 202: the operation, running,
// with every match counted, and its Location.
func (ob *opsBundle) start(path string, filter map[string]any) admin.Operation {
	ob.T.Helper()
	r := ob.Must(ob.Call("POST", path, ob.admin, map[string]any{"filter": filter}), 202)
	var op admin.Operation
	if err := json.Unmarshal(r.Raw, &op); err != nil {
		ob.T.Fatalf("decoding the operation: %v: %s", err, r.Raw)
	}
	if op.Status != store.OperationRunning || op.Matched != opsJobs || op.Done != 0 || op.ID == "" {
		ob.T.Fatalf("the 202's operation: %s", r.Raw)
	}
	if got := r.Header.Get("Location"); got != "/v1/admin/operations/"+op.ID {
		ob.T.Errorf("Location %q, want the operation's", got)
	}
	return op
}

// get reads the operation as operators do.
func (ob *opsBundle) get(id string) admin.Operation {
	ob.T.Helper()
	r := ob.Must(ob.Call("GET", "/v1/admin/operations/"+id, ob.admin, nil), 200)
	var op admin.Operation
	if err := json.Unmarshal(r.Raw, &op); err != nil {
		ob.T.Fatalf("decoding the operation: %v: %s", err, r.Raw)
	}
	return op
}

// waitFinished waits for the operation to finish and checks what it
// reports: every match done, none skipped.
func (ob *opsBundle) waitFinished(id, action string) admin.Operation {
	ob.T.Helper()
	var op admin.Operation
	ob.EventuallyEvery(100*time.Millisecond, func() bool { op = ob.get(id); return op.Finished() }, "operation %s finished", id)
	want := admin.Operation{ID: id, Action: action, Status: admin.OperationSucceeded, Matched: opsJobs, Done: opsJobs, Skipped: map[string]int{}, Progress: 100}
	got := op
	got.Filter, got.CreatedAt, got.UpdatedAt = admin.Filter{}, time.Time{}, time.Time{}
	if diff := cmp.Diff(want, got); diff != "" {
		ob.T.Errorf("finished operation (-want +got):\n%s", diff)
	}
	if op.Done+op.Skipped[admin.ReasonGone] != op.Matched {
		ob.T.Errorf("done %d + skipped %v != matched %d", op.Done, op.Skipped, op.Matched)
	}
	return op
}

// checkJobs checks that every one of ids is status, changed by operation
// op, and every one of others is untouched (still was).
func (ob *opsBundle) checkJobs(ids, others []string, status, was job.Status, op string) {
	ob.T.Helper()
	ctx := context.Background()
	for _, id := range ids {
		j, err := ob.Stack.App.Store.GetJob(ctx, id)
		if err != nil || j.Status != status || j.Operation != op {
			ob.T.Errorf("job %s: %s by operation %q (%v), want %s by %s", id, j.Status, j.Operation, err, status, op)
		}
	}
	for _, id := range others {
		if j, err := ob.Stack.App.Store.GetJob(ctx, id); err != nil || j.Status != was || j.Operation != "" {
			ob.T.Errorf("another owner's job %s: %s by operation %q (%v), want %s untouched", id, j.Status, j.Operation, err, was)
		}
	}
}

// TestBulkStopByFilterRunsAsAnOperation: a bulk stop whose filter matches
// more jobs than the sync max answers 202 with an operation instead of
// stopping them inside the request; the system function stops every match
// once, chunk by chunk, and the operation's GET shows its progress on the
// way (held after its first chunk) and, at the end, matched = done +
// skipped.
func TestBulkStopByFilterRunsAsAnOperation(t *testing.T) {
	t.Parallel()
	held, release := make(chan store.Operation, 1), make(chan struct{})
	hook := &opHook{point: admin.CrashSelected, seq: 1, do: func(op store.Operation) error {
		held <- op
		<-release
		return nil
	}}
	ob, mine, others := setupOps(t, nil, hook, job.Queued)
	op := ob.start("/v1/admin/jobs/stop", map[string]any{"status": "queued", "owner": ob.owner})

	select {
	case <-held:
	case <-time.After(90 * time.Second):
		t.Fatal("the operation's second chunk was never selected")
	}
	mid := ob.get(op.ID)
	close(release)
	if mid.Status != store.OperationRunning || mid.Done != opsChunk || mid.Progress != opsChunk*100/opsJobs {
		t.Errorf("after the first chunk: status %s, done %d, progress %d; want running, %d, %d", mid.Status, mid.Done, mid.Progress, opsChunk, opsChunk*100/opsJobs)
	}
	ob.waitFinished(op.ID, admin.ActionStop)
	ob.checkJobs(mine, others, job.Cancelled, job.Queued, op.ID)
	ctx := context.Background()
	for _, id := range mine {
		if j, _ := ob.Stack.App.Store.GetJob(ctx, id); j.Error == nil || j.Error.Code != admin.StopCode {
			t.Errorf("job %s's error is %+v, want %s", id, j.Error, admin.StopCode)
		}
	}

	// A filter that matches no more than the sync max still answers in the
	// request.
	r := ob.Must(ob.Call("POST", "/v1/admin/jobs/stop", ob.admin, map[string]any{"filter": map[string]any{"status": "queued", "owner": ob.owner}}), 200)
	if m, _ := r.Body["matched"].(float64); m != 0 {
		t.Errorf("stopping again: %s, want nothing matched", r.Raw)
	}
}

// TestBulkRestartByFilterRunsAsAnOperation: the same for a bulk restart of
// failed jobs, its first message delivered twice (two workers race
// through its chunks): every match re-queued once, the bystanders left
// failed.
func TestBulkRestartByFilterRunsAsAnOperation(t *testing.T) {
	t.Parallel()
	ob, mine, others := setupOps(t, nil, &opHook{}, job.Failed)
	ctx := context.Background()
	op := ob.start("/v1/admin/jobs/restart", map[string]any{"status": "failed", "owner": ob.owner})
	// The first message a second time (a copy SQS would not
	// deduplicate, as a redelivery).
	stored, err := ob.Stack.App.Store.GetOperation(ctx, op.ID)
	if err != nil {
		t.Fatal(err)
	}
	dup := admin.OperationMessage(stored)
	dup.Redelivery = time.Now().UnixMilli()
	if err := ob.Stack.App.Sender.Send(ctx, job.System, dup); err != nil {
		t.Fatal(err)
	}

	ob.waitFinished(op.ID, admin.ActionRestart)
	ob.checkJobs(mine, others, job.Queued, job.Failed, op.ID)
}

// TestBulkOperationResumesAfterACrash: the worker dies after stopping the
// jobs of the second chunk and before recording them (its message stays
// in flight until the queue's visibility timeout); the recovery function
// resumes the operation once it has been quiet, the chunk runs again, and
// every job ends stopped exactly once (done counts each once, none skipped
// as already cancelled) with the operation done.
func TestBulkOperationResumesAfterACrash(t *testing.T) {
	t.Parallel()
	crashAndResume(t, admin.CrashActed, opsChunk)
}

// TestBulkOperationResumesAfterACrashMidChunk: the same when the worker
// dies part way through the second chunk, three of its jobs stopped on the
// operation's behalf and the rest not yet.
func TestBulkOperationResumesAfterACrashMidChunk(t *testing.T) {
	t.Parallel()
	crashAndResume(t, admin.CrashSelected, 3)
}

// crashAndResume runs a bulk stop whose worker dies at point of its second
// chunk, the first acted of that chunk's jobs stopped by then (at
// CrashSelected the test stops them itself, on the operation's behalf, as
// a worker part way through would have), and checks that recovery resumes
// it to the end with every job stopped once.
func crashAndResume(t *testing.T, point string, acted int) {
	t.Helper()
	died := make(chan store.Operation, 1)
	var app *stack.App
	hook := &opHook{point: point, seq: 1, do: func(op store.Operation) error {
		if point == admin.CrashSelected {
			for _, id := range op.Chunk[:acted] {
				if _, err := app.Jobs.StopFor(context.Background(), id, &job.Error{Code: admin.StopCode, Message: "stopped by an operator", Retryable: true}, op.ID); err != nil {
					t.Errorf("stopping %s on the operation's behalf: %v", id, err)
				}
			}
		}
		died <- op
		return errors.New("the worker died")
	}}
	ob, mine, others := setupOps(t, map[string]string{"CONVEYOR_OPERATION_QUIET_AFTER": "1s"}, hook, job.Queued)
	app = ob.Stack.App
	ctx := context.Background()
	op := ob.start("/v1/admin/jobs/stop", map[string]any{"status": "queued", "owner": ob.owner})

	var crashed store.Operation
	select {
	case crashed = <-died:
	case <-time.After(90 * time.Second):
		t.Fatal("the worker never reached the second chunk")
	}
	// The chunk's first jobs are stopped, the rest not; the operation says
	// nothing of them: its message is in flight until the queue's
	// visibility timeout.
	for i, id := range crashed.Chunk {
		want := job.Queued
		if i < acted {
			want = job.Cancelled
		}
		ob.Eventually(func() bool { j, err := ob.Stack.App.Store.GetJob(ctx, id); return err == nil && j.Status == want },
			"job %s of the crashed chunk %s", id, want)
	}
	if got := ob.get(op.ID); got.Status != store.OperationRunning || got.Done != opsChunk {
		t.Fatalf("after the crash: %+v, want running with the first chunk done", got)
	}

	// Once quiet past CONVEYOR_OPERATION_QUIET_AFTER, a run of the
	// recovery function sends its message again (one before that leaves
	// it alone: nothing moves then).
	ev, _ := json.Marshal(events.EventBridgeEvent{Version: "0", ID: "evt-test", DetailType: "Scheduled Event", Source: "aws.scheduler",
		Time: time.Now().UTC(), Region: "us-east-1", Detail: json.RawMessage(`{}`)})
	ob.EventuallyEvery(300*time.Millisecond, func() bool {
		if _, err := ob.Stack.Functions.Invokers[resources.FuncRecovery].Invoke(ctx, ev); err != nil {
			t.Fatalf("the recovery function: %v", err)
		}
		return ob.get(op.ID).Done > opsChunk
	}, "operation %s resumed by recovery", op.ID)
	ob.waitFinished(op.ID, admin.ActionStop)
	ob.checkJobs(mine, others, job.Cancelled, job.Queued, op.ID)
}
