package pipeline

import (
	"slices"
	"testing"

	"github.com/conveyor/conveyor/internal/kind"
)

// TestFrontsAreFrontsOnly: the functions that submit register publish and
// http as fronts, none of which can run a job (the work half is the
// runner's, and linking it would drag S3 and the external API's client).
func TestFrontsAreFrontsOnly(t *testing.T) {
	t.Parallel()
	fronts := Fronts(nil, nil)
	if got := fronts.Names(); !slices.Equal(got, []string{"http", "publish"}) {
		t.Errorf("Fronts = %v, want http and publish", got)
	}
	for _, n := range fronts.Names() {
		f, _ := fronts.Get(n)
		if _, ok := f.(kind.Kind); ok {
			t.Errorf("the %s front has Work: the submitting functions would link the run loop", n)
		}
	}
	if f, _ := fronts.Get("publish"); f != nil {
		if _, ok := f.(kind.Explainer); !ok {
			t.Error("the publish front does not explain refusals (422s would lose their cause)")
		}
	}
}
