package store_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/google/go-cmp/cmp"

	"github.com/conveyor/conveyor/internal/awsclient"
	"github.com/conveyor/conveyor/internal/ids"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/resources"
	"github.com/conveyor/conveyor/internal/store"
	"github.com/conveyor/conveyor/localstack/awstest"
)

// listAll pages through q one job at a time and returns every id.
func listAll(t *testing.T, st *store.Store, q store.ListQuery) []string {
	t.Helper()
	q.Limit = 1
	var got []string
	for range 20 {
		jobs, next, err := st.ListJobs(context.Background(), q)
		if err != nil {
			t.Fatalf("list %+v: %v", q, err)
		}
		for _, j := range jobs {
			if j.Owner != q.Owner || len(j.Phases) == 0 {
				t.Fatalf("a listed job that is not the owner's whole job: %+v", j)
			}
			got = append(got, j.ID)
		}
		if next == "" {
			return got
		}
		q.Cursor = next
	}
	t.Fatal("the cursor never ended")
	return nil
}

// TestOwnerListsAnswerFromTheirIndexes: every list a user makes (all jobs,
// a status, updatedSince with and without a status) and every count is
// answered by the narrow owner indexes, in the contract's order, page by
// page, with whole jobs.
func TestOwnerListsAnswerFromTheirIndexes(t *testing.T) {
	t.Parallel()
	f := setupInspect(t)
	for _, owner := range []string{"u-ann", "u-bob"} {
		mine := func(j job.Job) bool { return j.Owner == owner }
		if diff := cmp.Diff(f.want(mine), listAll(t, f.st, store.ListQuery{Owner: owner})); diff != "" {
			t.Errorf("%s, every job, newest created first (-want +got):\n%s", owner, diff)
		}
		if n, err := f.st.CountJobs(context.Background(), store.ListQuery{Owner: owner}); err != nil || n != len(f.want(mine)) {
			t.Errorf("%s: count = %d, %v; want %d", owner, n, err, len(f.want(mine)))
		}
		for _, st := range []job.Status{job.Queued, job.Succeeded, job.Failed, job.Cancelled, job.Running} {
			match := func(j job.Job) bool { return mine(j) && j.Status == st }
			if diff := cmp.Diff(f.want(match), listAll(t, f.st, store.ListQuery{Owner: owner, Status: st})); diff != "" {
				t.Errorf("%s, status %s, newest created first (-want +got):\n%s", owner, st, diff)
			}
			if n, err := f.st.CountJobs(context.Background(), store.ListQuery{Owner: owner, Status: st}); err != nil || n != len(f.want(match)) {
				t.Errorf("%s, status %s: count = %d, %v; want %d", owner, st, n, err, len(f.want(match)))
			}
		}
		since := f.base.Add(3 * time.Hour)
		oldestFirst := func(match func(job.Job) bool) []string {
			var out []string
			for _, j := range f.jobs { // created and updated in this order
				if match(j) && !j.UpdatedAt.Before(since) {
					out = append(out, j.ID)
				}
			}
			return out
		}
		q := store.ListQuery{Owner: owner, UpdatedSince: store.SinceKey(since)}
		if diff := cmp.Diff(oldestFirst(mine), listAll(t, f.st, q)); diff != "" {
			t.Errorf("%s, updatedSince, oldest updated first (-want +got):\n%s", owner, diff)
		}
		q.Status = job.Failed
		if diff := cmp.Diff(oldestFirst(func(j job.Job) bool { return mine(j) && j.Status == job.Failed }), listAll(t, f.st, q)); diff != "" {
			t.Errorf("%s, failed and updatedSince (-want +got):\n%s", owner, diff)
		}
	}
}

// TestJobWritesSpareTheOwnerIndexes: the owner indexes are written only
// when what they hold changes. A write that changes neither a job's status
// nor its error (a heartbeat, progress) writes nothing to byOwnerCreated and
// byOwnerStatusCreated, and re-keys byOwnerUpdatedKeys for at most 2 write
// units (a small entry out and in, never the whole job); a status change
// costs each of them a small entry (one unit in, one out when re-keyed).
func TestJobWritesSpareTheOwnerIndexes(t *testing.T) {
	t.Parallel()
	env := awstest.Provision(t)
	counter := awsclient.NewCounter()
	now := time.Now().UTC()
	st := store.New(dynamodb.NewFromConfig(counter.Attach(env.Config)), env.Res.Definition.Table.Name, func() time.Time { return now })
	ctx := context.Background()
	j := job.Job{ID: ids.New(ids.Job), Type: "publish", Status: job.Queued, Tier: job.Medium, Owner: "u-" + ids.New("o"), Hash: ids.New("h"),
		CreatedAt: now, UpdatedAt: now, QueuedAt: &now, MaxAttempts: 3, Phases: job.NewPhases("publish"),
		Params: job.Doc(`{"title":"a title","description":"` + strings.Repeat("words ", 250) + `"}`)}
	if _, _, err := st.CreateJob(ctx, &j); err != nil {
		t.Fatal(err)
	}
	if _, err := j.Claim("worker-1", now.Add(time.Minute), now); err != nil {
		t.Fatal(err)
	}
	if err := st.SaveJob(ctx, &j); err != nil {
		t.Fatal(err)
	}
	counter.Reset()
	for i := range 3 {
		beat := now.Add(time.Duration(i+1) * time.Second)
		j.HeartbeatAt, j.UpdatedAt, j.Progress = &beat, beat, 10*(i+1)
		if err := st.SaveJob(ctx, &j); err != nil {
			t.Fatal(err)
		}
	}
	u := counter.Units()
	for _, ix := range []string{resources.IndexByOwner, resources.IndexByOwnerStatus} {
		if got := u["write "+ix]; got != 0 {
			t.Errorf("three heartbeats wrote %.1f units to %s, want 0 (units: %v)", got, ix, u)
		}
	}
	if got := u["write "+resources.IndexByOwnerUpdated]; got > 3*2 {
		t.Errorf("three heartbeats wrote %.1f units to %s, want ≤ 2 each (units: %v)", got, resources.IndexByOwnerUpdated, u)
	}
	counter.Reset()
	done := now.Add(time.Minute)
	if err := j.Apply(job.Succeed, done); err != nil {
		t.Fatal(err)
	}
	if err := st.SaveJob(ctx, &j); err != nil {
		t.Fatal(err)
	}
	u = counter.Units()
	// The finish is a transaction (its events): DynamoDB Local reports its
	// index writes doubled, as the table's are.
	for ix, most := range map[string]float64{resources.IndexByOwner: 2 * 1, resources.IndexByOwnerStatus: 2 * 2, resources.IndexByOwnerUpdated: 2 * 2} {
		if got := u["write "+ix]; got < 1 || got > most {
			t.Errorf("a finish wrote %.1f units to %s, want 1–%.0f (units: %v)", got, ix, most, u)
		}
	}
}
