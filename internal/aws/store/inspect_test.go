package store_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/conveyor/conveyor/internal/aws/store"
	"github.com/conveyor/conveyor/internal/ids"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/localstack/awstest"
)

// inspectFixture is two users' jobs in every combination the search
// filters tell apart, created an hour apart (newest last).
type inspectFixture struct {
	st    *store.Store
	base  time.Time
	jobs  []job.Job
	clock *time.Time
}

func setupInspect(t *testing.T) inspectFixture {
	t.Helper()
	env := awstest.Provision(t)
	base := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	now := base.Add(48 * time.Hour)
	clock := &now
	st := store.New(env.Clients.DynamoDB, env.Res.Definition.Table.Name, func() time.Time { return *clock })
	f := inspectFixture{st: st, base: base, clock: clock}
	ctx := context.Background()
	specs := []struct {
		owner   string
		tier    job.Tier
		typ     string
		status  job.Status
		errCode string
	}{
		{"u-ann", "high", "publish", job.Queued, ""},
		{"u-bob", "low", "publish", job.Failed, "attempts_exhausted"},
		{"u-ann", "low", "http", job.Succeeded, ""},
		{"u-bob", "high", "publish", job.Queued, ""},
		{"u-ann", "medium", "publish", job.Failed, "account_reconnect_required"},
		{"u-bob", "low", "http", job.Failed, "attempts_exhausted"},
		{"u-ann", "low", "publish", job.Cancelled, "cancelled"},
		{"u-bob", "medium", "publish", job.Succeeded, ""},
	}
	for i, s := range specs {
		at := base.Add(time.Duration(i) * time.Hour)
		j := job.Job{ID: ids.New(ids.Job), Type: s.typ, Status: job.Queued, Tier: s.tier, Owner: s.owner, Hash: ids.New("h"),
			CreatedAt: at, UpdatedAt: at, QueuedAt: &at, MaxAttempts: 3, Phases: job.NewPhases(s.typ)}
		if _, _, err := st.CreateJob(ctx, &j); err != nil {
			t.Fatal(err)
		}
		if s.status != job.Queued {
			var err error
			j, err = st.UpdateJob(ctx, j.ID, func(j *job.Job) error {
				if s.status == job.Cancelled {
					j.Error = &job.Error{Code: s.errCode}
					return j.Apply(job.Cancel, at)
				}
				if err := j.Apply(job.Start, at); err != nil {
					return err
				}
				if s.status == job.Failed {
					j.Error = &job.Error{Code: s.errCode}
					return j.Apply(job.Fail, at)
				}
				return j.Apply(job.Succeed, at)
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		f.jobs = append(f.jobs, j)
	}
	return f
}

// want returns the ids of the fixture's jobs that match, newest first.
func (f inspectFixture) want(match func(j job.Job) bool) []string {
	var out []string
	for i := len(f.jobs) - 1; i >= 0; i-- {
		if match(f.jobs[i]) {
			out = append(out, f.jobs[i].ID)
		}
	}
	return out
}

// walk pages through q two jobs at a time and returns every id.
func walk(t *testing.T, st *store.Store, q store.SearchQuery) []string {
	t.Helper()
	q.Limit = 2
	return everyPage(t, func(cursor string) ([]job.Job, string, error) {
		q.Cursor = cursor
		jobs, next, err := st.SearchJobs(context.Background(), q)
		if len(jobs) > 2 {
			t.Fatalf("a page of %d jobs, limit 2", len(jobs))
		}
		return jobs, next, err
	}, func(j job.Job) {
		if j.Owner == "" || j.Status == "" {
			t.Fatalf("a search result without its owner or status: %+v", j)
		}
	})
}

// everyPage reads pages from fetch, each from the cursor the previous one
// handed out, until one hands out none, checks every job and returns
// their ids in order.
func everyPage(t *testing.T, fetch func(cursor string) ([]job.Job, string, error), check func(job.Job)) []string {
	t.Helper()
	var got []string
	cursor := ""
	for range 30 {
		jobs, next, err := fetch(cursor)
		if err != nil {
			t.Fatalf("a page after %q: %v", cursor, err)
		}
		for _, j := range jobs {
			check(j)
			got = append(got, j.ID)
		}
		if next == "" {
			return got
		}
		cursor = next
	}
	t.Fatal("the cursor never ended")
	return nil
}

func TestSearchByEveryFilterWithCursorsAndCounts(t *testing.T) {
	t.Parallel()
	f := setupInspect(t)
	ctx := context.Background()
	cases := []struct {
		name  string
		q     store.SearchQuery
		match func(j job.Job) bool
	}{
		{"all", store.SearchQuery{}, func(job.Job) bool { return true }},
		{"status", store.SearchQuery{Status: job.Failed}, func(j job.Job) bool { return j.Status == job.Failed }},
		{"tier", store.SearchQuery{Tier: "low"}, func(j job.Job) bool { return j.Tier == "low" }},
		{"owner", store.SearchQuery{Owner: "u-bob"}, func(j job.Job) bool { return j.Owner == "u-bob" }},
		{"type", store.SearchQuery{Type: "http"}, func(j job.Job) bool { return j.Type == "http" }},
		{"errorCode", store.SearchQuery{ErrorCode: "attempts_exhausted"}, func(j job.Job) bool { return j.Error != nil && j.Error.Code == "attempts_exhausted" }},
		{"createdFrom", store.SearchQuery{CreatedFrom: f.base.Add(3 * time.Hour)}, func(j job.Job) bool { return !j.CreatedAt.Before(f.base.Add(3 * time.Hour)) }},
		{"createdTo", store.SearchQuery{CreatedTo: f.base.Add(2 * time.Hour)}, func(j job.Job) bool { return !j.CreatedAt.After(f.base.Add(2 * time.Hour)) }},
		{"window", store.SearchQuery{CreatedFrom: f.base.Add(time.Hour), CreatedTo: f.base.Add(5 * time.Hour)}, func(j job.Job) bool {
			return !j.CreatedAt.Before(f.base.Add(time.Hour)) && !j.CreatedAt.After(f.base.Add(5*time.Hour))
		}},
		// Filters combined: one is the index's key, the rest are applied
		// after the query, and the count stays exact.
		{"owner+status", store.SearchQuery{Owner: "u-ann", Status: job.Failed}, func(j job.Job) bool { return j.Owner == "u-ann" && j.Status == job.Failed }},
		{"status+tier", store.SearchQuery{Status: job.Failed, Tier: "low"}, func(j job.Job) bool { return j.Status == job.Failed && j.Tier == "low" }},
		{"tier+type+window", store.SearchQuery{Tier: "low", Type: "publish", CreatedFrom: f.base.Add(2 * time.Hour)}, func(j job.Job) bool {
			return j.Tier == "low" && j.Type == "publish" && !j.CreatedAt.Before(f.base.Add(2*time.Hour))
		}},
		{"errorCode+owner", store.SearchQuery{ErrorCode: "attempts_exhausted", Owner: "u-bob", Type: "http"}, func(j job.Job) bool {
			return j.Owner == "u-bob" && j.Type == "http" && j.Error != nil && j.Error.Code == "attempts_exhausted"
		}},
		{"nothing", store.SearchQuery{Owner: "u-nobody"}, func(job.Job) bool { return false }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			want := f.want(c.match)
			got := walk(t, f.st, c.q)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("ids (-want +got):\n%s", diff)
			}
			n, err := f.st.CountSearch(ctx, c.q)
			if err != nil || n != len(want) {
				t.Errorf("count = %d, %v; want %d", n, err, len(want))
			}
		})
	}
}

func TestSearchCursorsAreBoundToTheirQuery(t *testing.T) {
	t.Parallel()
	f := setupInspect(t)
	ctx := context.Background()
	q := store.SearchQuery{Tier: "low", Limit: 1}
	_, next, err := f.st.SearchJobs(ctx, q)
	if err != nil || next == "" {
		t.Fatalf("first page: %q, %v", next, err)
	}
	for name, other := range map[string]store.SearchQuery{
		"another tier":          {Tier: "high"},
		"another filter":        {Tier: "low", Owner: "u-ann"},
		"a filter after query":  {Tier: "low", Type: "http"},
		"another window":        {Tier: "low", CreatedFrom: f.base},
		"no filter":             {},
		"the same, tampered":    {Tier: "low", Cursor: next[:len(next)-2] + "AA"},
		"the user listing's":    {Owner: "u-ann"},
		"the same, as garbage":  {Tier: "low", Cursor: "not-a-cursor"},
		"a window ending early": {Tier: "low", CreatedTo: f.base},
	} {
		if other.Cursor == "" {
			other.Cursor = next
		}
		other.Limit = 2
		if _, _, err := f.st.SearchJobs(ctx, other); !errors.Is(err, store.ErrBadCursor) {
			t.Errorf("%s: err = %v, want ErrBadCursor", name, err)
		}
	}
	// Any page size continues it.
	jobs, _, err := f.st.SearchJobs(ctx, store.SearchQuery{Tier: "low", Limit: 10, Cursor: next})
	if err != nil || len(jobs) != len(f.want(func(j job.Job) bool { return j.Tier == "low" }))-1 {
		t.Errorf("the rest: %d jobs, %v", len(jobs), err)
	}
}

func TestSearchLeavesExpiredJobsOut(t *testing.T) {
	t.Parallel()
	f := setupInspect(t)
	ctx := context.Background()
	victim := f.jobs[2] // succeeded
	if _, err := f.st.UpdateJob(ctx, victim.ID, func(j *job.Job) error {
		j.ExpiresAt = f.clock.Add(-time.Minute).Unix()
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	got := walk(t, f.st, store.SearchQuery{})
	if slices.Contains(got, victim.ID) || len(got) != len(f.jobs)-1 {
		t.Errorf("search returned %d jobs (expired one included: %v)", len(got), slices.Contains(got, victim.ID))
	}
	if n, _ := f.st.CountSearch(ctx, store.SearchQuery{Owner: victim.Owner}); n != 3 {
		t.Errorf("count of %s = %d, want 3 (its expired job left out)", victim.Owner, n)
	}
}

func TestHourlyCountersAreWrittenWithTheFinish(t *testing.T) {
	t.Parallel()
	f := setupInspect(t)
	ctx := context.Background()
	counts, err := f.st.FinishedCounts(ctx, f.base, f.base.Add(7*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	var got []store.HourCount
	for _, c := range counts {
		if c.Succeeded+c.Failed+c.Cancelled > 0 {
			got = append(got, c)
		}
	}
	h := func(i int) time.Time { return f.base.Add(time.Duration(i) * time.Hour) }
	want := []store.HourCount{
		{Hour: h(1), Failed: 1}, {Hour: h(2), Succeeded: 1}, {Hour: h(4), Failed: 1},
		{Hour: h(5), Failed: 1}, {Hour: h(6), Cancelled: 1}, {Hour: h(7), Succeeded: 1},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("hourly counters (-want +got):\n%s", diff)
	}
	// A lost race writes neither the change nor its count.
	stale := f.jobs[0]
	if _, err := f.st.UpdateJob(ctx, stale.ID, func(j *job.Job) error { return j.Apply(job.Start, h(0)) }); err != nil {
		t.Fatal(err)
	}
	if err := stale.Apply(job.Cancel, h(0)); err != nil {
		t.Fatal(err)
	}
	if err := f.st.SaveJob(ctx, &stale); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("a save from a stale read: %v, want ErrConflict", err)
	}
	counts, _ = f.st.FinishedCounts(ctx, h(0), h(0))
	if counts[0].Cancelled != 0 {
		t.Errorf("a refused cancel was counted: %+v", counts[0])
	}
}
