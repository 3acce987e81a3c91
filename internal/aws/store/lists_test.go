package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/conveyor/conveyor/internal/aws/store"
	"github.com/conveyor/conveyor/internal/job"
)

// listAll pages through q one job at a time and returns every id.
func listAll(t *testing.T, st *store.Store, q store.ListQuery) []string {
	t.Helper()
	q.Limit = 1
	return everyPage(t, func(cursor string) ([]job.Job, string, error) {
		q.Cursor = cursor
		return st.ListJobs(context.Background(), q)
	}, func(j job.Job) {
		if j.Owner != q.Owner || len(j.Phases) == 0 {
			t.Fatalf("a listed job that is not the owner's whole job: %+v", j)
		}
	})
}

// TestOwnerListsAnswerFromTheirIndexes: every list a user makes (all jobs,
// a status, updatedSince with and without a status), every count and the
// SSE stream's poll of what changed are answered by the narrow owner
// indexes, in the contract's order, page by page, with whole jobs. A
// status list is newest updated first: a job written again moves to its
// front.
func TestOwnerListsAnswerFromTheirIndexes(t *testing.T) {
	t.Parallel()
	f := setupInspect(t)
	ctx := context.Background()
	// The oldest failed job of u-bob is written again, last.
	again := f.jobs[1]
	later := f.base.Add(24 * time.Hour)
	if _, err := f.st.UpdateJob(ctx, again.ID, func(j *job.Job) error { j.UpdatedAt = later; return nil }); err != nil {
		t.Fatal(err)
	}
	byUpdate := func(match func(job.Job) bool) []string { // newest updated first
		var out []string
		if match(again) {
			out = append(out, again.ID)
		}
		for _, id := range f.want(match) {
			if id != again.ID {
				out = append(out, id)
			}
		}
		return out
	}
	for _, owner := range []string{"u-ann", "u-bob"} {
		mine := func(j job.Job) bool { return j.Owner == owner }
		if diff := cmp.Diff(f.want(mine), listAll(t, f.st, store.ListQuery{Owner: owner})); diff != "" {
			t.Errorf("%s, every job, newest created first (-want +got):\n%s", owner, diff)
		}
		if n, err := f.st.CountJobs(ctx, store.ListQuery{Owner: owner}); err != nil || n != len(f.want(mine)) {
			t.Errorf("%s: count = %d, %v; want %d", owner, n, err, len(f.want(mine)))
		}
		for _, st := range []job.Status{job.Queued, job.Succeeded, job.Failed, job.Cancelled, job.Running} {
			match := func(j job.Job) bool { return mine(j) && j.Status == st }
			if diff := cmp.Diff(byUpdate(match), listAll(t, f.st, store.ListQuery{Owner: owner, Status: st})); diff != "" {
				t.Errorf("%s, status %s, newest updated first (-want +got):\n%s", owner, st, diff)
			}
			if n, err := f.st.CountJobs(ctx, store.ListQuery{Owner: owner, Status: st}); err != nil || n != len(f.want(match)) {
				t.Errorf("%s, status %s: count = %d, %v; want %d", owner, st, n, err, len(f.want(match)))
			}
		}
		since := f.base.Add(3 * time.Hour)
		oldestFirst := func(match func(job.Job) bool) []string {
			var out []string
			for _, j := range f.jobs { // created and updated in this order, but for again
				if match(j) && j.ID != again.ID && !j.UpdatedAt.Before(since) {
					out = append(out, j.ID)
				}
			}
			if match(again) {
				out = append(out, again.ID)
			}
			return out
		}
		q := store.ListQuery{Owner: owner, UpdatedSince: store.SinceKey(since)}
		if diff := cmp.Diff(oldestFirst(mine), listAll(t, f.st, q)); diff != "" {
			t.Errorf("%s, updatedSince, oldest updated first (-want +got):\n%s", owner, diff)
		}
		changes, err := f.st.ChangedJobs(ctx, owner, store.SinceKey(since), 100)
		if err != nil {
			t.Fatal(err)
		}
		var changed []string
		for _, c := range changes {
			want := f.jobs[0]
			for _, j := range f.jobs {
				if j.ID == c.ID {
					want = j
				}
			}
			if c.EventSeq != want.EventSeq || (c.ID != again.ID && !c.UpdatedAt.Equal(want.UpdatedAt)) || (c.ID == again.ID && !c.UpdatedAt.Equal(later)) {
				t.Errorf("%s: change %+v, want the job's event sequence %d and its updatedAt", owner, c, want.EventSeq)
			}
			changed = append(changed, c.ID)
		}
		if diff := cmp.Diff(oldestFirst(mine), changed); diff != "" {
			t.Errorf("%s, the stream's changed jobs (-want +got):\n%s", owner, diff)
		}
		q.Status = job.Failed
		if diff := cmp.Diff(oldestFirst(func(j job.Job) bool { return mine(j) && j.Status == job.Failed }), listAll(t, f.st, q)); diff != "" {
			t.Errorf("%s, failed and updatedSince (-want +got):\n%s", owner, diff)
		}
	}
}
