package store

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// TestCancelled: why a job's transaction was cancelled decides what the
// worker does next. DynamoDB Local serialises transactions behind a table
// lock and never reports TransactionConflict; AWS does whenever two
// transactions touch one item at once (every claim checks one of its
// tier's flag copies, every finish adds to an hourly counter), and such a
// cancellation must not read as "another worker claimed the job".
func TestCancelled(t *testing.T) {
	t.Parallel()
	codes := func(cs ...string) []types.CancellationReason {
		out := make([]types.CancellationReason, len(cs))
		for i, c := range cs {
			out[i].Code = aws.String(c)
		}
		return out
	}
	for _, tc := range []struct {
		name    string
		reasons []types.CancellationReason
		checks  int
		want    error
	}{
		{"the job changed", codes("ConditionalCheckFailed", "None", "None"), 1, ErrConflict},
		{"the tier is paused", codes("None", "None", "ConditionalCheckFailed"), 1, ErrPaused},
		{"the job changed and the tier is paused", codes("ConditionalCheckFailed", "None", "ConditionalCheckFailed"), 1, ErrConflict},
		{"a claim meets another claim on the tier flag", codes("None", "None", "TransactionConflict"), 1, errTxConflict},
		{"a finish meets another finish on the hourly counter", codes("None", "None", "TransactionConflict"), 0, errTxConflict},
		{"a conflict and a failed condition: the condition decides", codes("ConditionalCheckFailed", "TransactionConflict", "None"), 1, ErrConflict},
		{"an event item's condition", codes("None", "ConditionalCheckFailed", "None"), 1, ErrConflict},
		{"reasons missing", nil, 1, ErrConflict},
		{"nothing named", codes("None", "None", "None"), 1, ErrConflict},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := cancelled(tc.reasons, 3, tc.checks); got != tc.want {
				t.Errorf("cancelled = %v, want %v", got, tc.want)
			}
		})
	}
}
