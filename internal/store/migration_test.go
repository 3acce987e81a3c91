package store_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/google/go-cmp/cmp"

	"github.com/conveyor/conveyor/internal/awsclient"
	"github.com/conveyor/conveyor/internal/ids"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/resources"
	"github.com/conveyor/conveyor/internal/store"
	"github.com/conveyor/conveyor/localstack/awstest"
	"github.com/conveyor/conveyor/localstack/provision"
)

// TestMigrationFromTheRetiredIndexes: a table made with the retired owner
// indexes (projection ALL) and jobs in flight on it — queued, running,
// finished, one running job written again after the migration — is
// migrated by provisioning the current definition: the new indexes are
// created and filled from the items already there (every job item carries
// their keys), the retired ones dropped, and every job is still found by
// every list, count and the inspector's owner filter.
func TestMigrationFromTheRetiredIndexes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clients := awsclient.New(awstest.Config(t))
	def := resources.Named(job.Local, awstest.Prefix(t))
	old := def
	old.Table.Indexes = slices.Concat(resources.RetiredIndexes, slices.DeleteFunc(slices.Clone(def.Table.Indexes), func(ix resources.Index) bool {
		return ix.Name == resources.IndexByOwner || ix.Name == resources.IndexByOwnerStatus || ix.Name == resources.IndexByOwnerUpdated
	}))
	if _, err := provision.Apply(ctx, clients, old); err != nil {
		t.Fatalf("provisioning the old table: %v", err)
	}
	now := time.Now().UTC().Truncate(time.Second)
	st := store.New(clients.DynamoDB, def.Table.Name, func() time.Time { return now })
	owner := "u-" + ids.New("o")
	var jobs []job.Job
	for i, status := range []job.Status{job.Queued, job.Running, job.Succeeded, job.Running, job.Failed} {
		at := now.Add(time.Duration(i-10) * time.Minute)
		j := job.Job{ID: ids.New(ids.Job), Type: "publish", Status: job.Queued, Tier: job.Low, Owner: owner, Hash: ids.New("h"),
			CreatedAt: at, UpdatedAt: at, QueuedAt: &at, MaxAttempts: 3, Phases: job.NewPhases("publish")}
		if _, _, err := st.CreateJob(ctx, &j); err != nil {
			t.Fatal(err)
		}
		if status != job.Queued {
			if _, err := j.Claim("worker-1", at.Add(time.Hour), at); err != nil {
				t.Fatal(err)
			}
			switch status {
			case job.Succeeded:
				_ = j.Apply(job.Succeed, at)
			case job.Failed:
				j.Error = &job.Error{Code: "attempts_exhausted"}
				_ = j.Apply(job.Fail, at)
			}
			if err := st.SaveJob(ctx, &j); err != nil {
				t.Fatal(err)
			}
		}
		jobs = append(jobs, j)
	}

	if _, err := provision.Apply(ctx, clients, def); err != nil {
		t.Fatalf("migrating: %v", err)
	}
	desc, err := clients.DynamoDB.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(def.Table.Name)})
	if err != nil {
		t.Fatal(err)
	}
	var have []string
	for _, g := range desc.Table.GlobalSecondaryIndexes {
		have = append(have, aws.ToString(g.IndexName))
	}
	var want []string
	for _, ix := range def.Table.Indexes {
		want = append(want, ix.Name)
	}
	slices.Sort(have)
	slices.Sort(want)
	if diff := cmp.Diff(want, have); diff != "" {
		t.Fatalf("indexes after the migration (-want +got):\n%s", diff)
	}

	// A job in flight goes on after the migration: written once more.
	beat := now.Add(time.Second)
	jobs[3].HeartbeatAt, jobs[3].UpdatedAt = &beat, beat
	if err := st.SaveJob(ctx, &jobs[3]); err != nil {
		t.Fatal(err)
	}

	newestFirst := func(match func(job.Job) bool) []string {
		var out []string
		for i := len(jobs) - 1; i >= 0; i-- {
			if match(jobs[i]) {
				out = append(out, jobs[i].ID)
			}
		}
		return out
	}
	all := func(job.Job) bool { return true }
	if diff := cmp.Diff(newestFirst(all), listAll(t, st, store.ListQuery{Owner: owner})); diff != "" {
		t.Errorf("every job (-want +got):\n%s", diff)
	}
	for _, s := range []job.Status{job.Queued, job.Running, job.Succeeded, job.Failed} {
		match := func(j job.Job) bool { return j.Status == s }
		if diff := cmp.Diff(newestFirst(match), listAll(t, st, store.ListQuery{Owner: owner, Status: s})); diff != "" {
			t.Errorf("status %s (-want +got):\n%s", s, diff)
		}
		if n, err := st.CountJobs(ctx, store.ListQuery{Owner: owner, Status: s}); err != nil || n != len(newestFirst(match)) {
			t.Errorf("count of %s = %d, %v; want %d", s, n, err, len(newestFirst(match)))
		}
	}
	since := listAll(t, st, store.ListQuery{Owner: owner, UpdatedSince: store.SinceKey(now.Add(-time.Hour))})
	if len(since) != len(jobs) || since[len(since)-1] != jobs[3].ID {
		t.Errorf("updatedSince: %v, want all %d jobs, the one written last (%s) last", since, len(jobs), jobs[3].ID)
	}
	found, _, err := st.SearchJobs(ctx, store.SearchQuery{Owner: owner, Limit: 50})
	if err != nil || len(found) != len(jobs) {
		t.Errorf("the inspector's owner filter found %d jobs, %v; want %d", len(found), err, len(jobs))
	}
}
