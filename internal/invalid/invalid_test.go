package invalid_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/conveyor/conveyor/internal/invalid"
)

func TestFieldError(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		err       error
		want      *invalid.FieldError // nil: not a field error
		wantError string
	}{
		{"field", invalid.Field("params.title", "is required"), &invalid.FieldError{Field: "params.title", Message: "is required"}, "params.title is required"},
		{"formatted", invalid.Fieldf("limit", "must be between 0 and %d", 200), &invalid.FieldError{Field: "limit", Message: "must be between 0 and 200"}, "limit must be between 0 and 200"},
		{"wrapped", fmt.Errorf("submitting: %w", invalid.Field("items", "must hold at least one item")), &invalid.FieldError{Field: "items", Message: "must hold at least one item"}, "submitting: items must hold at least one item"},
		{"no field", invalid.Field("", "the body is empty"), &invalid.FieldError{Message: "the body is empty"}, "the body is empty"},
		{"under a prefix", invalid.Under("job", invalid.Field("params.title", "is required")), &invalid.FieldError{Field: "job.params.title", Message: "is required"}, "job.params.title is required"},
		{"under, no field", invalid.Under("job", invalid.Field("", "is empty")), &invalid.FieldError{Field: "job", Message: "is empty"}, "job is empty"},
		{"another error", errors.New("dynamodb: throttled"), nil, "dynamodb: throttled"},
		{"under leaves others alone", invalid.Under("job", errors.New("dynamodb: throttled")), nil, "dynamodb: throttled"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, ok := invalid.As(tt.err)
			if ok != (tt.want != nil) {
				t.Fatalf("As(%v) ok = %t", tt.err, ok)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("As (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantError, tt.err.Error()); diff != "" {
				t.Errorf("Error() (-want +got):\n%s", diff)
			}
		})
	}
	if got := invalid.Under("job", nil); got != nil {
		t.Errorf("Under(nil) = %v", got)
	}
}
