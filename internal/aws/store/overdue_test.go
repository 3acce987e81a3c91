package store_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/conveyor/conveyor/internal/aws/awsclient"
	"github.com/conveyor/conveyor/internal/aws/store"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/resources"
	"github.com/conveyor/conveyor/internal/testfactory"
	"github.com/conveyor/conveyor/localstack/awstest"
)

// TestOverdueReadsEveryPartitionAtOnceOldestFirst: the orphans' read gives
// the oldest overdue jobs across every shard and tier, at most limit, in
// order of their sweep time; it leaves out a tier it is not asked for and
// every job not overdue; and it reads each partition once (one Query
// each, not a round of them per page).
func TestOverdueReadsEveryPartitionAtOnceOldestFirst(t *testing.T) {
	t.Parallel()
	env := awstest.Provision(t)
	now := time.Now().UTC().Truncate(time.Millisecond)
	seed := store.New(env.Clients.DynamoDB, env.Res.Definition.Table.Name, func() time.Time { return now })
	var want []string // overdue queued jobs outside the low tier, oldest first
	for i := range 40 {
		tier := job.Tiers[i%len(job.Tiers)]
		at := now.Add(-time.Duration(100-i) * time.Minute) // older first
		if i >= 30 {
			at = now.Add(time.Duration(i) * time.Minute) // not overdue
		}
		j := testfactory.Job(t, seed, testfactory.JobOpts{Status: job.Queued, Tier: tier, At: at})
		if i < 30 && tier != job.Low {
			want = append(want, j.ID)
		}
	}
	counter := awsclient.NewCounter()
	st := store.New(awsclient.New(counter.Attach(env.Config)).DynamoDB, env.Res.Definition.Table.Name, func() time.Time { return now })
	var tiers []job.Tier
	for _, tr := range job.Tiers {
		if tr != job.Low {
			tiers = append(tiers, tr)
		}
	}
	got, err := st.Overdue(context.Background(), job.Queued, now, tiers, 10)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, j := range got {
		ids = append(ids, j.ID)
	}
	if !slices.Equal(ids, want[:10]) {
		t.Errorf("overdue = %v, want the 10 oldest outside the low tier %v", ids, want[:10])
	}
	partitions := resources.SweepShards * (len(tiers) + 1) // the tiers' and the untiered ones
	if n := counter.Get("DynamoDB.Query"); n != partitions {
		t.Errorf("%d queries, want one per partition (%d)", n, partitions)
	}
	all, err := st.Overdue(context.Background(), job.Queued, now, nil, 100)
	if err != nil || len(all) != 30 {
		t.Errorf("every tier: %d jobs (%v), want the 30 overdue", len(all), err)
	}
}
