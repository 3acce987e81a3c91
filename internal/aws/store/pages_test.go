package store_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/conveyor/conveyor/internal/aws/store"
	"github.com/conveyor/conveyor/internal/ids"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/localstack/awstest"
)

// TestPagesAreBoundedByBytes: twelve jobs whose documents are at the
// bound (job.MaxDocBytes, about 3 MiB of JSON in all) come back from the
// inspector's search and from the owner's list in pages of at most
// store.MaxPageBytes of JSON however large the limit, and following the
// cursors gives every job once, in order.
func TestPagesAreBoundedByBytes(t *testing.T) {
	t.Parallel()
	env := awstest.Provision(t)
	st := store.New(env.Clients.DynamoDB, env.Res.Definition.Table.Name, time.Now)
	ctx := context.Background()
	base := time.Now().UTC().Add(-time.Hour)
	owner := ids.New("usr")
	var want []string
	for i := range 12 {
		doc, err := job.DocOf(map[string]string{"body": strings.Repeat(fmt.Sprint(i%10), job.MaxDocBytes-20)})
		if err != nil {
			t.Fatal(err)
		}
		at := base.Add(time.Duration(i) * time.Second)
		j := job.Job{ID: ids.New(ids.Job), Type: "http", Status: job.Queued, Tier: job.Low, Owner: owner, Hash: ids.New("h"),
			Params: doc, CreatedAt: at, UpdatedAt: at, QueuedAt: &at, MaxAttempts: 3}
		if _, _, err := st.CreateJob(ctx, &j); err != nil {
			t.Fatal(err)
		}
		want = append([]string{j.ID}, want...) // newest first
	}
	for name, page := range map[string]func(cursor string) ([]job.Job, string, error){
		"search": func(c string) ([]job.Job, string, error) {
			return st.SearchJobs(ctx, store.SearchQuery{Owner: owner, Limit: 200, Cursor: c})
		},
		"list": func(c string) ([]job.Job, string, error) {
			return st.ListJobs(ctx, store.ListQuery{Owner: owner, Limit: 200, Cursor: c})
		},
	} {
		var got []string
		pages := 0
		for cursor := ""; ; {
			jobs, next, err := page(cursor)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			pages++
			size := 0
			for i := range jobs {
				b, _ := job.Marshal(&jobs[i])
				size += len(b)
				got = append(got, jobs[i].ID)
			}
			if size > store.MaxPageBytes || len(jobs) == 0 {
				t.Errorf("%s: page %d holds %d jobs in %d bytes, want 1 or more in at most %d", name, pages, len(jobs), size, store.MaxPageBytes)
			}
			if next == "" || pages > 20 {
				break
			}
			cursor = next
		}
		if strings.Join(got, " ") != strings.Join(want, " ") || pages < 2 {
			t.Errorf("%s: %d pages gave %d jobs %v, want every one of %d once, newest first, over several pages", name, pages, len(got), got, len(want))
		}
	}
}
