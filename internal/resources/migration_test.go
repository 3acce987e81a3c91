package resources_test

import (
	"slices"
	"testing"

	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/resources"
)

// TestIndexMigrationChangesOneIndexPerStage: the migration from the retired
// indexes starts at the table as it was (every retired index, and the kept
// ones), changes exactly one GSI per stage (CloudFormation's limit), never
// holds more than DynamoDB's 20, reads the retired indexes until the stage
// after the last replacement was added, and ends at the definition. Each
// replacement has the keys of the index it replaces, so a reader may
// query either.
func TestIndexMigrationChangesOneIndexPerStage(t *testing.T) {
	t.Parallel()
	tbl := resources.For(job.Staging).Table
	stages := resources.IndexMigration(tbl)
	names := func(ixs []resources.Index) []string {
		var out []string
		for _, ix := range ixs {
			out = append(out, ix.Name)
		}
		slices.Sort(out)
		return out
	}
	retired := names(resources.RetiredIndexes)
	for _, name := range retired {
		if !slices.Contains(names(stages[0].Indexes), name) {
			t.Errorf("stage 0 lacks the retired index %s", name)
		}
	}
	if got, want := names(stages[len(stages)-1].Indexes), names(tbl.Indexes); !slices.Equal(got, want) {
		t.Errorf("the last stage's indexes %v, want the definition's %v", got, want)
	}
	switched := false
	for i := 1; i < len(stages); i++ {
		before, after := names(stages[i-1].Indexes), names(stages[i].Indexes)
		added, dropped := 0, 0
		for _, n := range after {
			if !slices.Contains(before, n) {
				added++
			}
		}
		for _, n := range before {
			if !slices.Contains(after, n) {
				dropped++
			}
		}
		switch {
		case len(after) > 20:
			t.Errorf("stage %d holds %d indexes, more than DynamoDB's 20", i, len(after))
		case added+dropped > 1:
			t.Errorf("stage %d adds %d and drops %d indexes; CloudFormation takes one change per update", i, added, dropped)
		case added+dropped == 0 && (switched || !stages[i-1].ReadRetired || stages[i].ReadRetired):
			t.Errorf("stage %d changes nothing but is not the switch to the new indexes", i)
		}
		if !stages[i].ReadRetired && !switched {
			switched = true
			for name := range resources.Replaced {
				if !slices.Contains(before, name) {
					t.Errorf("stage %d reads the new indexes while the stage before lacked %s (it may still be filling)", i, name)
				}
			}
		}
		if stages[i].ReadRetired && dropped > 0 {
			t.Errorf("stage %d drops an index while the functions read the retired ones", i)
		}
	}
	if !switched {
		t.Error("no stage switches the functions to the new indexes")
	}
	byName := map[string]resources.Index{}
	for _, ix := range slices.Concat(resources.RetiredIndexes, tbl.Indexes) {
		byName[ix.Name] = ix
	}
	for name, old := range resources.Replaced {
		n, o := byName[name], byName[old]
		if n.PartitionKey != o.PartitionKey || n.SortKey != o.SortKey {
			t.Errorf("%s replaces %s with other keys (%v/%v, was %v/%v)", name, old, n.PartitionKey, n.SortKey, o.PartitionKey, o.SortKey)
		}
		for _, a := range n.Include {
			if o.Projection() == resources.ProjectionInclude && !slices.Contains(o.Include, a) {
				t.Errorf("%s projects %s, which %s (read instead during the migration) does not", name, a, old)
			}
		}
	}
}
