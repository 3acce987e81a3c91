package admin

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/conveyor/conveyor/internal/aws/queue"
	"github.com/conveyor/conveyor/internal/invalid"
)

func TestCheckIDs(t *testing.T) {
	t.Parallel()
	a, b := "job_aaaaaaaaaaaaaaaaaaaaaaaaaa", "job_bbbbbbbbbbbbbbbbbbbbbbbbbb"
	many := make([]string, MaxBulk+1)
	for i := range many {
		many[i] = a
	}
	tests := []struct {
		name  string
		in    []string
		want  []string
		field string
	}{
		{"none", nil, nil, "jobIds"},
		{"empty", []string{}, nil, "jobIds"},
		{"too many", many, nil, "jobIds"},
		{"junk is kept, for bulk to skip", []string{a, "job_../../x"}, []string{a, "job_../../x"}, ""},
		{"an upload id is kept, for bulk to skip", []string{"upl_aaaaaaaaaaaaaaaaaaaaaaaaaa"}, []string{"upl_aaaaaaaaaaaaaaaaaaaaaaaaaa"}, ""},
		{"duplicates dropped, order kept", []string{b, a, b}, []string{b, a}, ""},
		{"exactly the maximum", many[:MaxBulk], []string{a}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := checkIDs(tt.in)
			var ie *invalid.FieldError
			switch {
			case tt.field != "" && (!errors.As(err, &ie) || ie.Field != tt.field):
				t.Fatalf("error %v, want an invalid.FieldError on %s", err, tt.field)
			case tt.field == "" && err != nil:
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}
		})
	}
}

func TestNewNamesWhatIsMissing(t *testing.T) {
	t.Parallel()
	_, err := New(Config{Queues: queue.Inspector{}, Mover: queue.SQSMover{}})
	if err == nil || err.Error() != "admin: the configuration lacks Breakers, Jobs, Sender, Store" {
		t.Errorf("%v", err)
	}
}
