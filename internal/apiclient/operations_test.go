package apiclient_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/conveyor/conveyor/internal/admin"
	"github.com/conveyor/conveyor/internal/apiclient"
	"github.com/conveyor/conveyor/internal/aws/store"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/testfactory"
	"github.com/conveyor/conveyor/localstack/awstest"
	"github.com/conveyor/conveyor/localstack/stack"
)

// TestBulkOperationThroughTheClient: a bulk stop by filter past the sync
// max comes back from StopMatching as the operation the API started
// (202), GetOperation reads it, and WaitOperation follows its progress to
// the end; a small filter still answers in the request, with no
// operation.
func TestBulkOperationThroughTheClient(t *testing.T) {
	t.Parallel()
	b := awstest.Setup(t, map[string]string{"CONVEYOR_BULK_SYNC_MAX": "3", "CONVEYOR_BULK_CHUNK": "4"}, stack.Options{})
	ops := b.Client(b.Token("op-client-ops", "admin", ""))
	ctx := context.Background()
	if _, err := ops.PauseTier(ctx, "medium"); err != nil {
		t.Fatal(err)
	}
	owner, few := testfactory.Owner(), testfactory.Owner()
	for range 10 {
		testfactory.Job(t, b.Stack.App.Store, testfactory.JobOpts{Owner: owner, Tier: job.Medium})
	}
	for range 2 {
		testfactory.Job(t, b.Stack.App.Store, testfactory.JobOpts{Owner: few, Tier: job.Medium})
	}

	small, op, err := ops.StopMatching(ctx, apiclient.BulkFilter{Filter: admin.Filter{Status: "queued", Owner: few}})
	if err != nil || op != nil || len(small.Stopped) != 2 {
		t.Errorf("StopMatching(2 jobs) = %+v, operation %+v, %v; want both stopped in the request", small, op, err)
	}

	_, op, err = ops.StopMatching(ctx, apiclient.BulkFilter{Filter: admin.Filter{Status: "queued", Owner: owner}})
	if err != nil || op == nil {
		t.Fatalf("StopMatching(10 jobs) = operation %+v, %v; want an operation", op, err)
	}
	if op.Action != admin.ActionStop || op.Matched != 10 || op.Status != store.OperationRunning {
		t.Errorf("the started operation: %+v", op)
	}
	if got, err := ops.GetOperation(ctx, op.ID); err != nil || got.ID != op.ID || got.Matched != 10 {
		t.Errorf("GetOperation = %+v, %v", got, err)
	}
	var (
		mu   sync.Mutex
		seen []admin.Operation
	)
	wctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	final, err := ops.WaitOperation(wctx, op.ID, 50*time.Millisecond, func(o admin.Operation) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, o)
	})
	if err != nil {
		t.Fatalf("WaitOperation: %v", err)
	}
	if final.Status != admin.OperationSucceeded || final.Done != 10 || final.Progress != 100 || len(final.Skipped) != 0 {
		t.Errorf("WaitOperation = %+v, want succeeded with 10 done", final)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) == 0 || seen[len(seen)-1].Progress != 100 {
		t.Errorf("progress told %+v, want at least the finished operation last", seen)
	}
	for i := 1; i < len(seen); i++ {
		if seen[i].Done < seen[i-1].Done || seen[i].Progress < seen[i-1].Progress {
			t.Errorf("progress went back: %+v after %+v", seen[i], seen[i-1])
		}
	}

	if _, err := ops.GetOperation(ctx, "op_aaaaaaaaaaaaaaaaaaaaaaaaaa"); apiclient.StatusOf(err) != http.StatusNotFound {
		t.Errorf("GetOperation(unknown) = %v, want 404", err)
	}
}
