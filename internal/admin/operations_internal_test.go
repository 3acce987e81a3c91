package admin

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/conveyor/conveyor/internal/aws/store"
)

// TestRecordAndFinish: a chunk's outcomes are counted, the walk moves on,
// and at its end done plus every skipped count is matched.
func TestRecordAndFinish(t *testing.T) {
	t.Parallel()
	op := store.Operation{Status: store.OperationRunning, Matched: 5, Chunk: []string{"a", "b", "c"}, Next: "cur"}
	record(&op, op.Chunk, []outcome{{done: true}, {reason: "job is succeeded"}, {done: true}})
	if op.Cursor != "cur" || op.Chunk != nil || op.Seq != 1 || op.Status != store.OperationRunning || op.Done != 2 {
		t.Fatalf("after the first chunk: %+v", op)
	}
	if got := progress(op.Matched, 3, false); got != 60 {
		t.Errorf("progress = %d, want 60", got)
	}
	op.Chunk, op.Next = []string{"d"}, ""
	record(&op, op.Chunk, []outcome{{done: true}})
	want := map[string]int{"job is succeeded": 1, ReasonGone: 1}
	if diff := cmp.Diff(want, op.Skipped); diff != "" || op.Status != OperationSucceeded || op.Done != 3 {
		t.Errorf("finished: status %s done %d skipped (-want +got):\n%s", op.Status, op.Done, diff)
	}
	if got := progress(op.Matched, 5, true); got != 100 {
		t.Errorf("progress when finished = %d, want 100", got)
	}
}
