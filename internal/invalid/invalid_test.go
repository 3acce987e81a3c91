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

// TestText: control and bidirectional characters are refused with the
// field named and the character shown; letters of any script, emoji and
// (in multiline text) line breaks are not.
func TestText(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		s         string
		multiline bool
		want      string // "" for accepted
	}{
		{"letters of any script", "кот 🐱 ñ 猫 قطة", false, ""},
		{"zero-width joiner in an emoji", "👩\u200d💻", false, ""},
		{"empty", "", false, ""},
		{"NUL", "a\x00b", false, "t must not contain control characters (U+0000 at character 2)"},
		{"DEL", "a\x7f", false, "t must not contain control characters (U+007F at character 2)"},
		{"C1", "a\u0085", false, "t must not contain control characters (U+0085 at character 2)"},
		{"escape", "\x1b[31mred", false, "t must not contain control characters (U+001B at character 1)"},
		{"line feed in a title", "a\nb", false, "t must not contain control characters (U+000A at character 2)"},
		{"line feed in a description", "a\r\n\tb", true, ""},
		{"NUL in a description", "a\n\x00", true, "t must not contain control characters (U+0000 at character 3)"},
		{"right-to-left override", "cat\u202egnp.exe", false, "t must not contain bidirectional control characters (U+202E at character 4)"},
		{"left-to-right embedding", "\u202a", false, "t must not contain bidirectional control characters (U+202A at character 1)"},
		{"pop directional formatting", "\u202c", true, "t must not contain bidirectional control characters (U+202C at character 1)"},
		{"isolate", "x\u2066", false, "t must not contain bidirectional control characters (U+2066 at character 2)"},
		{"pop isolate", "x\u2069", false, "t must not contain bidirectional control characters (U+2069 at character 2)"},
		{"left-to-right mark", "\u200e", false, "t must not contain bidirectional control characters (U+200E at character 1)"},
		{"right-to-left mark", "\u200f", true, "t must not contain bidirectional control characters (U+200F at character 1)"},
		{"arabic letter mark", "\u061c", false, "t must not contain bidirectional control characters (U+061C at character 1)"},
	} {
		err := invalid.Text("t", tc.s, tc.multiline)
		got := ""
		if err != nil {
			fe, ok := invalid.As(err)
			if !ok || fe.Field != "t" {
				t.Errorf("%s: %v is not a field error on t", tc.name, err)
			}
			got = err.Error()
		}
		if got != tc.want {
			t.Errorf("%s: Text(%q) = %q, want %q", tc.name, tc.s, got, tc.want)
		}
	}
}
