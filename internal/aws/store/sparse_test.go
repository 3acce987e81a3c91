package store_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/conveyor/conveyor/internal/aws/awsclient"
	"github.com/conveyor/conveyor/internal/aws/store"
	"github.com/conveyor/conveyor/internal/ids"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/localstack/awstest"
)

// TestAPageUnderASparseFilterTakesFewQueries: DynamoDB applies a Query's
// Limit before its filter, so a page of one under a filter that matches
// few of an index partition's entries must not take one round trip per
// entry (a bulk stop by filter of one matching nothing among 800 queued
// jobs took 800 queries, over ten seconds). Every page stays exact: each
// match once, newest first, across cursors.
func TestAPageUnderASparseFilterTakesFewQueries(t *testing.T) {
	t.Parallel()
	env := awstest.Provision(t)
	counter := awsclient.NewCounter()
	base := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	now := base.Add(time.Hour)
	st := store.New(awsclient.New(counter.Attach(env.Config)).DynamoDB, env.Res.Definition.Table.Name, func() time.Time { return now })
	ctx := context.Background()
	const n, every = 240, 20 // every 20th job is an http job
	var want []string        // the http jobs, newest first
	created := make([]string, n)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	sem := make(chan struct{}, 8)
	for i := range n {
		typ := "publish"
		if i%every == 0 {
			typ = "http"
		}
		at := base.Add(time.Duration(i) * time.Second)
		j := job.Job{ID: ids.New(ids.Job), Type: typ, Status: job.Queued, Tier: job.Low, Owner: "u-sparse", Hash: ids.New("h"),
			CreatedAt: at, UpdatedAt: at, QueuedAt: &at, MaxAttempts: 3, Phases: job.NewPhases(typ)}
		created[i] = j.ID
		if typ == "http" {
			want = append([]string{j.ID}, want...)
		}
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			if _, _, err := st.CreateJob(ctx, &j); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	bounded := func(what string, fetch func() (int, string, error)) {
		t.Helper()
		counter.Reset()
		got, next, err := fetch()
		if err != nil {
			t.Fatal(err)
		}
		if q := counter.Get("DynamoDB.Query"); got != 0 || next != "" || q > 12 {
			t.Errorf("%s: %d jobs, cursor %q, in %d queries; want none, no cursor, at most 12 queries (log2 of %d entries, not one per entry)", what, got, next, q, n)
		}
	}
	bounded("a search whose filter matches nothing", func() (int, string, error) {
		jobs, next, err := st.SearchJobs(ctx, store.SearchQuery{Status: job.Queued, Type: "nothing", Limit: 1})
		return len(jobs), next, err
	})
	bounded("a list whose status matches nothing", func() (int, string, error) {
		jobs, next, err := st.ListJobs(ctx, store.ListQuery{Owner: "u-sparse", Status: job.Running, Limit: 1})
		return len(jobs), next, err
	})

	for _, limit := range []int{1, 3, 5} {
		counter.Reset()
		var got []string
		cursor := ""
		for page := 0; ; page++ {
			if page > len(want) {
				t.Fatalf("limit %d: more pages than matches", limit)
			}
			jobs, next, err := st.SearchJobs(ctx, store.SearchQuery{Status: job.Queued, Type: "http", Limit: limit, Cursor: cursor})
			if err != nil {
				t.Fatal(err)
			}
			if len(jobs) > limit {
				t.Fatalf("limit %d: a page of %d", limit, len(jobs))
			}
			for _, j := range jobs {
				got = append(got, j.ID)
			}
			if next == "" {
				break
			}
			cursor = next
		}
		if !slices.Equal(got, want) {
			t.Errorf("limit %d: the pages gave %d jobs %v, want the %d http jobs newest first %v", limit, len(got), got, len(want), want)
		}
		pages := (len(want) + limit - 1) / limit
		if q := counter.Get("DynamoDB.Query"); q > pages*12 {
			t.Errorf("limit %d: %d pages took %d queries", limit, pages, q)
		}
		t.Log(fmt.Sprintf("limit %d: %d matches of %d in %d queries", limit, len(got), n, counter.Get("DynamoDB.Query")))
	}
}
