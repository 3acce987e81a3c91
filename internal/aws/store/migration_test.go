package store_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/conveyor/conveyor/internal/aws/awsclient"
	"github.com/conveyor/conveyor/internal/aws/store"
	"github.com/conveyor/conveyor/internal/ids"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/resources"
	"github.com/conveyor/conveyor/localstack/awstest"
	"github.com/conveyor/conveyor/localstack/emulator"
)

// TestMigrationFromTheRetiredIndexes follows docs/migrations.md on a table
// that holds both index sets, as it does from the stage that added the
// last replacement to the one that drops the first retired index (DynamoDB
// Local leaves an index added to an existing table CREATING, so the table
// is made with both sets; DynamoDB fills a new index from the items in the
// table, which carry its keys, as it fills one made with the table). Jobs
// in flight — scheduled, queued, running, finished, failed, with their
// events — are written while the functions read the retired indexes and
// are found there by every reader; after the switch every reader finds
// every one of them, and a job written again, through the new indexes:
// the owner's lists and counts, the SSE stream's poll, the inspector's
// filters, the sweeps and the operators' feed.
func TestMigrationFromTheRetiredIndexes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clients := awsclient.New(awstest.Config(t))
	def := resources.Named(job.Local, awstest.Prefix(t))
	stages := resources.IndexMigration(def.Table)
	switchAt := slices.IndexFunc(stages, func(s resources.IndexStage) bool { return !s.ReadRetired })
	both := def
	both.Table.Indexes = stages[switchAt].Indexes
	if _, err := emulator.Provision(ctx, clients, both); err != nil {
		t.Fatalf("provisioning the table with both index sets: %v", err)
	}
	now := time.Now().UTC().Truncate(time.Second)
	st := store.New(clients.DynamoDB, def.Table.Name, func() time.Time { return now })
	st.ReadRetiredIndexes()
	owner := "u-" + ids.New("o")
	jobs := jobsInFlight(t, st, owner, now)
	// Before the switch: the retired indexes answer.
	everyReaderFinds(t, st, owner, jobs, now, false)

	// The switch: the functions read the new indexes.
	st = store.New(clients.DynamoDB, def.Table.Name, func() time.Time { return now })
	// A job in flight goes on after the switch: its worker beats.
	beat := now.Add(-time.Second)
	jobs[4].HeartbeatAt, jobs[4].UpdatedAt = &beat, beat
	if err := st.SaveJob(ctx, &jobs[4]); err != nil {
		t.Fatal(err)
	}
	everyReaderFinds(t, st, owner, jobs, now, true)
}

// everyReaderFinds checks that st's readers find each of owner's jobs (the
// fifth written last): lists, counts, the stream's poll, the inspector,
// the sweeps and the feed.
func everyReaderFinds(t *testing.T, st *store.Store, owner string, jobs []job.Job, now time.Time, last bool) {
	t.Helper()
	ctx := context.Background()
	ids := func(match func(job.Job) bool, newestFirst bool) []string {
		var out []string
		for _, j := range jobs {
			if match(j) {
				out = append(out, j.ID)
			}
		}
		if newestFirst {
			slices.Reverse(out)
		}
		return out
	}
	all := func(job.Job) bool { return true }
	if diff := cmp.Diff(ids(all, true), listAll(t, st, store.ListQuery{Owner: owner})); diff != "" {
		t.Errorf("every job (-want +got):\n%s", diff)
	}
	for _, s := range []job.Status{job.Scheduled, job.Queued, job.Running, job.Succeeded, job.Failed} {
		match := func(j job.Job) bool { return j.Status == s }
		if got := listAll(t, st, store.ListQuery{Owner: owner, Status: s}); len(got) != len(ids(match, true)) {
			t.Errorf("status %s: %v, want %v", s, got, ids(match, true))
		}
		if n, err := st.CountJobs(ctx, store.ListQuery{Owner: owner, Status: s}); err != nil || n != len(ids(match, true)) {
			t.Errorf("count of %s = %d, %v; want %d", s, n, err, len(ids(match, true)))
		}
		found, _, err := st.SearchJobs(ctx, store.SearchQuery{Status: s, Tier: job.Low, Owner: owner, Limit: 50})
		if err != nil || len(found) != len(ids(match, true)) {
			t.Errorf("the inspector's status and owner filters found %d %s jobs, %v; want %d", len(found), s, err, len(ids(match, true)))
		}
	}
	since := listAll(t, st, store.ListQuery{Owner: owner, UpdatedSince: store.SinceKey(now.Add(-time.Hour))})
	if len(since) != len(jobs) || (last && since[len(since)-1] != jobs[4].ID) {
		t.Errorf("updatedSince: %v, want all %d jobs (the one written last, %s, last: %v)", since, len(jobs), jobs[4].ID, last)
	}
	if changes, err := st.ChangedJobs(ctx, owner, store.SinceKey(now.Add(-time.Hour)), 100); err != nil || len(changes) != len(jobs) {
		t.Errorf("the stream's poll found %d changed jobs, %v; want %d", len(changes), err, len(jobs))
	}
	for name, q := range map[string]store.SearchQuery{
		"tier": {Tier: job.Low}, "type": {Type: "publish"}, "none": {}, "error": {ErrorCode: "attempts_exhausted"},
	} {
		found, _, err := st.SearchJobs(ctx, store.SearchQuery{Tier: q.Tier, Type: q.Type, ErrorCode: q.ErrorCode, Limit: 200})
		mine := slices.DeleteFunc(found, func(j job.Job) bool { return j.Owner != owner })
		wantN := len(jobs)
		if name == "error" {
			wantN = 1
		}
		if err != nil || len(mine) != wantN {
			t.Errorf("the inspector's %s filter found %d of the jobs, %v; want %d", name, len(mine), err, wantN)
		}
	}
	// The sweeps: the scheduled job is due, the queued and running ones
	// are stuck an hour from now, the finished ones stale in a year.
	sweep := func(st *store.Store, before time.Time, statuses ...job.Status) []string {
		scan := st.ScanDue(before, nil, statuses...)
		var out []string
		for !scan.Done() {
			page, err := scan.Jobs(ctx, 100)
			if err != nil {
				t.Fatal(err)
			}
			for _, j := range page {
				if j.Owner == owner {
					out = append(out, j.ID)
				}
			}
		}
		slices.Sort(out)
		return out
	}
	for _, c := range []struct {
		statuses []job.Status
		match    func(job.Job) bool
	}{
		{[]job.Status{job.Scheduled}, func(j job.Job) bool { return j.Status == job.Scheduled }},
		{[]job.Status{job.Queued, job.Running}, func(j job.Job) bool { return j.Status == job.Queued || j.Status == job.Running }},
		{[]job.Status{job.Succeeded, job.Failed, job.Cancelled}, func(j job.Job) bool { return j.Status.Finished() }},
	} {
		want := ids(c.match, false)
		slices.Sort(want)
		if diff := cmp.Diff(want, sweep(st, now.Add(365*24*time.Hour), c.statuses...)); diff != "" {
			t.Errorf("the sweep of %v (-want +got):\n%s", c.statuses, diff)
		}
	}
	// The operators' feed: every job's events, from every shard.
	seen := map[string]bool{}
	for n := range resources.FeedShards {
		evs, err := st.Feed(ctx, n, store.FeedTime(now.Add(-time.Hour)), 200)
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs {
			if ev.Job == "" {
				t.Errorf("a feed event without its job: %+v", ev)
			}
			seen[ev.JobID] = true
		}
	}
	for _, j := range jobs[1:] {
		if !seen[j.ID] {
			t.Errorf("the feed has no event of job %s (%s)", j.ID, j.Status)
		}
	}
}

// jobsInFlight writes six jobs of owner through st as the pipeline does:
// scheduled, queued, running, succeeded, running and failed.
func jobsInFlight(t *testing.T, st *store.Store, owner string, now time.Time) []job.Job {
	t.Helper()
	ctx := context.Background()
	var jobs []job.Job
	for i, status := range []job.Status{job.Scheduled, job.Queued, job.Running, job.Succeeded, job.Running, job.Failed} {
		at := now.Add(time.Duration(i-20) * time.Minute)
		j := job.Job{ID: ids.New(ids.Job), Type: "publish", Status: job.Queued, Tier: job.Low, Owner: owner, Hash: ids.New("h"),
			CreatedAt: at, UpdatedAt: at, QueuedAt: &at, MaxAttempts: 3, Phases: job.NewPhases("publish")}
		if status == job.Scheduled {
			due := now.Add(-time.Minute)
			j.Status, j.QueuedAt, j.ScheduleAt = job.Scheduled, nil, &due
		} else {
			j.Emit(job.EventEnqueued, at, nil)
		}
		if _, _, err := st.CreateJob(ctx, &j); err != nil {
			t.Fatal(err)
		}
		if status != job.Scheduled && status != job.Queued {
			if _, err := j.Claim("worker-1", at.Add(time.Minute), at); err != nil {
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
	return jobs
}

// TestCompactJobItemsMigration follows docs/migrations.md's compact job
// items: jobs in flight written with every attribute (the first deploy's
// CONVEYOR_JOB_ITEMS=attributes) are found by every reader once the
// functions write compact items, a job written again compact is too, and
// a store that writes every attribute (a rollback to the first deploy)
// reads the compact job whole.
func TestCompactJobItemsMigration(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := awstest.Provision(t)
	now := time.Now().UTC().Truncate(time.Second)
	table := env.Res.Definition.Table.Name
	attrs := store.New(env.Clients.DynamoDB, table, func() time.Time { return now })
	attrs.WriteJobAttributes()
	owner := "u-" + ids.New("o")
	jobs := jobsInFlight(t, attrs, owner, now)

	st := store.New(env.Clients.DynamoDB, table, func() time.Time { return now })
	beat := now.Add(-time.Second)
	jobs[4].HeartbeatAt, jobs[4].UpdatedAt = &beat, beat
	if err := st.SaveJob(ctx, &jobs[4]); err != nil {
		t.Fatal(err)
	}
	everyReaderFinds(t, st, owner, jobs, now, true)

	back, err := attrs.GetJob(ctx, jobs[4].ID)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(jobs[4], back, cmpopts.IgnoreFields(job.Job{}, "Pending")); diff != "" {
		t.Errorf("the compact job read by a store writing every attribute (-want +got):\n%s", diff)
	}
}
