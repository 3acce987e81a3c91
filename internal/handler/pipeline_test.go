package handler_test

import (
	"slices"
	"testing"

	"github.com/conveyor/conveyor/internal/handler"
	"github.com/conveyor/conveyor/internal/job"
)

// TestFrontsAreTheBuiltInKinds: the functions that submit register the
// kinds of Kinds, publish and http, and the publish one explains the
// creating transaction's refusals.
func TestFrontsAreTheBuiltInKinds(t *testing.T) {
	t.Parallel()
	fronts := handler.Fronts(nil, nil)
	if got := fronts.Names(); !slices.Equal(got, []string{"http", "publish"}) {
		t.Errorf("Fronts = %v, want http and publish", got)
	}
	var names []string
	for _, k := range handler.Kinds(handler.KindConfigs{}) {
		names = append(names, k.Name())
	}
	slices.Sort(names)
	if !slices.Equal(names, fronts.Names()) {
		t.Errorf("Fronts = %v, Kinds = %v: submission and the run loop would know different kinds", fronts.Names(), names)
	}
	if f, _ := fronts.Get("publish"); f != nil {
		if _, ok := f.(job.Explainer); !ok {
			t.Error("the publish front does not explain refusals (422s would lose their cause)")
		}
	}
}
