package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/conveyor/conveyor/internal/aws/store"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/localstack/awstest"
)

// TestSchedulesAreVersionedItemsOfTheirOwner: a schedule is created once,
// read back whole, replaced only over the version read, listed and
// counted under its owner alone, and deleted (twice without an error).
func TestSchedulesAreVersionedItemsOfTheirOwner(t *testing.T) {
	t.Parallel()
	env := awstest.Provision(t)
	st := store.New(env.Clients.DynamoDB, env.Res.Definition.Table.Name, time.Now)
	ctx := context.Background()
	at := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	r := store.ScheduleRecord{ID: "sch_a", Name: "ping", Rate: "1m", Timezone: "UTC", Job: job.Doc(`{"type":"http"}`), Status: "active",
		CreatedAt: at, UpdatedAt: at, ActiveFrom: at, Runs: []store.ScheduleRun{}, Owner: "u-1", Plan: "pro", Seed: "00", Version: 1}
	if err := st.CreateSchedule(ctx, r); err != nil {
		t.Fatal(err)
	}
	if err := st.CreateSchedule(ctx, r); !errors.Is(err, store.ErrConflict) {
		t.Errorf("creating it again: %v, want ErrConflict", err)
	}
	if err := st.CreateSchedule(ctx, store.ScheduleRecord{ID: "sch_b", Owner: "u-2", Version: 1}); err != nil {
		t.Fatal(err)
	}
	got, err := st.GetSchedule(ctx, "u-1", "sch_a")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(r, got); diff != "" {
		t.Errorf("read back (-want +got):\n%s", diff)
	}
	next := r
	next.Version, next.Runs = 2, []store.ScheduleRun{{At: at.Add(time.Minute), JobID: "job_a"}}
	if err := st.ReplaceSchedule(ctx, next, 7); !errors.Is(err, store.ErrConflict) {
		t.Errorf("replacing another version: %v, want ErrConflict", err)
	}
	if err := st.ReplaceSchedule(ctx, next, 1); err != nil {
		t.Fatal(err)
	}
	list, err := st.ListSchedules(ctx, "u-1")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]store.ScheduleRecord{next}, list); diff != "" {
		t.Errorf("u-1's schedules (-want +got):\n%s", diff)
	}
	if n, err := st.CountSchedules(ctx, "u-1"); err != nil || n != 1 {
		t.Errorf("u-1 has %d schedules (%v), want 1", n, err)
	}
	for range 2 {
		if err := st.DeleteSchedule(ctx, "u-1", "sch_a"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.GetSchedule(ctx, "u-1", "sch_a"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("after the delete: %v, want ErrNotFound", err)
	}
}
