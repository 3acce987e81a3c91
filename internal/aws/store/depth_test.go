package store_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/conveyor/conveyor/internal/aws/store"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/testfactory"
)

// depthInvariant checks the owner's counters against its jobs as stored:
// the jobs counted in the queue and in the backlog are exactly those the
// counters say, no more in the queue than the bound allows, and every job
// counted where its state puts it.
func depthInvariant(t *testing.T, b *storeBundle, owner string, ids []string, bound int, step string) (inQueue, backlog int) {
	t.Helper()
	for _, id := range ids {
		j := b.get(t, id)
		if j.Depth != j.WantDepth() {
			t.Fatalf("%s: job %s (%s, waiting %q) counted in %q, want %q", step, id, j.Status, j.Waiting, j.Depth, j.WantDepth())
		}
		switch j.Depth {
		case job.DepthQueue:
			inQueue++
		case job.DepthBacklog:
			backlog++
		}
	}
	d, err := b.st.QueueDepth(context.Background(), owner, job.Medium)
	if err != nil {
		t.Fatal(err)
	}
	if d.InQueue != inQueue || d.Backlog != backlog {
		t.Fatalf("%s: the counters say %d in the queue and %d in the backlog; the jobs %d and %d", step, d.InQueue, d.Backlog, inQueue, backlog)
	}
	if most := store.DepthShards * store.ShardBound(bound); inQueue > most {
		t.Fatalf("%s: %d jobs in the queue, more than the bound (%d, %d per shard)", step, inQueue, bound, store.ShardBound(bound))
	}
	return inQueue, backlog
}

// TestQueueDepthStaysExactThroughEveryTransition: with a bound of 4 (one
// job per counter shard), an owner's 12 new jobs go 4 at most into the
// queue and the rest into its backlog; then random steps — claims,
// finishes, cancels, retries, waits in the table, admissions from the
// backlog, and writes that lose their race on a stale version (what a
// crash between a read and a write, or a duplicate delivery, leaves) —
// keep the counters equal to what the jobs say after every step. The walk
// takes 300 steps, and more until it has taken each kind of step at least
// once (which a job's shard, drawn from its random id, decides as much as
// the walk's own draws), at most 3,000.
func TestQueueDepthStaysExactThroughEveryTransition(t *testing.T) {
	t.Parallel()
	b := setupStore(t)
	const bound = 4
	b.st.SetQueueBound(func(string, string) int { return bound })
	ctx := context.Background()
	owner := testfactory.Owner()
	now := b.clk.Now()
	var ids []string
	for range 12 {
		j := testfactory.Build(testfactory.JobOpts{Owner: owner, Tier: job.Medium, At: now})
		if _, created, err := b.st.CreateJob(ctx, &j); err != nil || !created {
			t.Fatalf("creating: %v, %v", created, err)
		}
		ids = append(ids, j.ID)
	}
	inQueue, backlog := depthInvariant(t, b, owner, ids, bound, "after the submissions")
	if inQueue == 0 || backlog == 0 || inQueue+backlog != 12 {
		t.Fatalf("12 jobs with a bound of %d: %d in the queue, %d in the backlog; want some of each", bound, inQueue, backlog)
	}

	rng := rand.New(rand.NewPCG(1, 2))
	counts := map[string]int{}
	kinds := []string{"admitted", "claimed", "finished", "retried into the queue", "stale writes refused"}
	covered := func() bool {
		return !slices.ContainsFunc(kinds, func(k string) bool { return counts[k] == 0 })
	}
	for step := 0; step < 300 || (!covered() && step < 3000); step++ {
		b.clk.Advance(time.Second)
		now := b.clk.Now()
		id := ids[rng.IntN(len(ids))]
		j := b.get(t, id)
		stale := j // this read, written after another write: a lost race
		var err error
		switch {
		case j.InBacklog():
			if err = j.Admit(now); err == nil {
				err = b.st.SaveJob(ctx, &j)
			}
			if errors.Is(err, store.ErrQueueFull) {
				counts["admission refused"]++
				err = nil
			} else if err == nil {
				counts["admitted"]++
			}
		case j.Status == job.Queued && j.Waiting != "":
			if err = j.Unpark(now); err == nil {
				err = b.st.SaveJob(ctx, &j)
				counts["unparked"]++
			}
		case j.Status == job.Queued && rng.IntN(4) == 0:
			if err = j.Park(job.WaitRateLimited, now.Add(time.Minute), now); err == nil {
				err = b.st.SaveJob(ctx, &j)
				counts["parked"]++
			}
		case j.Status == job.Queued && rng.IntN(5) == 0:
			if err = j.Apply(job.Cancel, now); err == nil {
				err = b.st.SaveJob(ctx, &j)
				counts["cancelled queued"]++
			}
		case j.Status == job.Queued:
			if _, err = j.Claim("w", now.Add(time.Minute), now); err == nil {
				err = b.st.ClaimJob(ctx, &j)
				counts["claimed"]++
			}
		case j.Status == job.Running:
			a := job.Succeed
			if rng.IntN(3) == 0 {
				a = job.Fail
			}
			if err = j.Apply(a, now); err == nil {
				err = b.st.SaveJob(ctx, &j)
				counts["finished"]++
			}
		case j.Status == job.Succeeded:
			// A succeeded job never moves again: a new one of the owner
			// takes its place, so that the walk never runs out of jobs
			// that move (with every job succeeded it would only count
			// steps, and whether it had retried a job into the queue by
			// then turned on the jobs' random ids).
			nj := testfactory.Build(testfactory.JobOpts{Owner: owner, Tier: job.Medium, At: now})
			if _, created, cerr := b.st.CreateJob(ctx, &nj); cerr != nil || !created {
				t.Fatalf("step %d: creating a job in place of %s: %v, %v", step, id, created, cerr)
			}
			ids[slices.Index(ids, id)] = nj.ID
			counts["replaced a succeeded job"]++
		default: // failed or cancelled: the owner retries it
			if err = j.Apply(job.Retry, now); err == nil {
				err = b.st.SaveJob(ctx, &j)
				if j.InBacklog() {
					counts["retried into the backlog"]++
				} else {
					counts["retried into the queue"]++
				}
			}
		}
		if err != nil {
			t.Fatalf("step %d on %s: %v", step, id, err)
		}
		if rng.IntN(3) == 0 && b.get(t, id).Version != stale.Version {
			// The same job written again from the read before this step:
			// its version is gone, and nothing may be counted twice.
			if serr := stale.Apply(job.Cancel, now); serr == nil {
				if serr = b.st.SaveJob(ctx, &stale); !errors.Is(serr, store.ErrConflict) && !errors.Is(serr, store.ErrQueueFull) {
					t.Fatalf("step %d: a write on a stale version: %v, want ErrConflict", step, serr)
				}
				counts["stale writes refused"]++
			}
		}
		depthInvariant(t, b, owner, ids, bound, "step "+j.ID)
	}
	t.Logf("transitions: %v", counts)
	for _, k := range kinds {
		if counts[k] == 0 {
			t.Errorf("no %s step: the walk no longer covers it (%v)", k, counts)
		}
	}
}

// TestConcurrentSubmissionsOfOneOwnerAreCountedOnce: 24 submissions of one
// owner at once (their transactions conflict on the owner's counters) are
// all created, and counted exactly once each, in the queue or the backlog.
func TestConcurrentSubmissionsOfOneOwnerAreCountedOnce(t *testing.T) {
	t.Parallel()
	b := setupStore(t)
	const bound = 8
	b.st.SetQueueBound(func(string, string) int { return bound })
	ctx := context.Background()
	owner := testfactory.Owner()
	now := b.clk.Now()
	var mu sync.Mutex
	var ids []string
	var wg sync.WaitGroup
	for range 24 {
		wg.Go(func() {
			j := testfactory.Build(testfactory.JobOpts{Owner: owner, Tier: job.Medium, At: now})
			if _, created, err := b.st.CreateJob(ctx, &j); err != nil || !created {
				t.Errorf("creating: %v, %v", created, err)
				return
			}
			mu.Lock()
			ids = append(ids, j.ID)
			mu.Unlock()
		})
	}
	wg.Wait()
	inQueue, backlog := depthInvariant(t, b, owner, ids, bound, "after 24 concurrent submissions")
	if inQueue+backlog != 24 || backlog == 0 {
		t.Errorf("%d in the queue and %d in the backlog, want 24 in all and a backlog", inQueue, backlog)
	}
}
