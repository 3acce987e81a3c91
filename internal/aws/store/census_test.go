package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/conveyor/conveyor/internal/aws/awsclient"
	"github.com/conveyor/conveyor/internal/aws/store"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/resources"
	"github.com/conveyor/conveyor/internal/testfactory"
	"github.com/conveyor/conveyor/localstack/awstest"
)

// TestCensusCountsEveryFigureInOnePass seeds a job of every kind the
// overview tells apart and checks each figure of the census, and that it
// read each active partition of the sweep index once: 192 queries, where a
// COUNT per figure (the overview's reads before the census) took 544.
func TestCensusCountsEveryFigureInOnePass(t *testing.T) {
	t.Parallel()
	env := awstest.Provision(t)
	now := time.Now().UTC().Truncate(time.Second)
	clock := func() time.Time { return now }
	seed := store.New(env.Clients.DynamoDB, env.Res.Definition.Table.Name, clock)
	at := func(d time.Duration) *time.Time { t := now.Add(d); return &t }
	for _, o := range []testfactory.JobOpts{
		{Status: job.Scheduled, Tier: job.High, ScheduleAt: at(time.Hour)},                           // delayed
		{Status: job.Queued, Tier: job.Low, At: now.Add(-time.Hour)},                                 // stuck: nobody received it
		{Status: job.Queued, Tier: job.Medium, At: now.Add(-time.Hour), RetryAt: at(time.Minute)},    // delayed: backing off in the queue
		{Status: job.Queued, Tier: job.High, Waiting: "circuit_open", RetryAt: at(10 * time.Minute)}, // parked and delayed
		{Status: job.Queued, Tier: job.Low, Waiting: "paused", RetryAt: at(-time.Minute)},            // parked, due
		{Status: job.Running, Tier: job.Medium, HeartbeatAt: at(-time.Hour)},                         // stuck: stopped beating
		{Status: job.Running, Tier: job.Medium, HeartbeatAt: &now},
		{Status: job.Succeeded, Tier: job.Low, At: now.Add(-time.Hour)}, // finished: not in the census
	} {
		testfactory.Job(t, seed, o)
	}

	counter := awsclient.NewCounter()
	st := store.New(awsclient.New(counter.Attach(env.Config)).DynamoDB, env.Res.Definition.Table.Name, clock)
	got, err := st.Census(context.Background(), now, now.Add(-20*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	want := store.Census{
		Jobs:         map[job.Status]int{job.Scheduled: 1, job.Queued: 4, job.Running: 2},
		Delayed:      map[string]int{"high": 2, "medium": 1},
		Parked:       map[string]int{"circuit_open": 1, "paused": 1},
		StuckQueued:  map[job.Tier]int{job.Low: 1},
		StuckRunning: 1,
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("census (-want +got):\n%s", d)
	}
	partitions := resources.SweepShards * (1 + 2*(len(job.Tiers)+1) + 1) // scheduled, parked and queued by tier and untiered, running
	if n := counter.Get("DynamoDB.Query"); n != partitions || counter.Total() != partitions {
		t.Errorf("the census made %d queries (%d requests: %v); want one per partition, %d", n, counter.Total(), counter.Snapshot(), partitions)
	}
}
