package store_test

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/conveyor/conveyor/internal/aws/store"
	"github.com/conveyor/conveyor/internal/fault"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/testfactory"
	"github.com/conveyor/conveyor/localstack/awstest"
)

// activeIs checks the owner's active-jobs counter and that every job of
// ids is counted exactly when it is active.
func activeIs(t *testing.T, st *store.Store, owner string, ids []string, want int, step string) {
	t.Helper()
	ctx := context.Background()
	counted := 0
	for _, id := range ids {
		j, err := st.GetJob(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if j.Active != j.Status.Active() {
			t.Fatalf("%s: job %s is %s, counted %v", step, id, j.Status, j.Active)
		}
		if j.Active {
			counted++
		}
	}
	n, err := st.ActiveJobs(ctx, owner)
	if err != nil {
		t.Fatal(err)
	}
	if n != want || counted != want {
		t.Fatalf("%s: the counter says %d active, the jobs %d; want %d", step, n, counted, want)
	}
}

// TestTheActiveJobsCounterStaysExact: an owner's counter follows its jobs
// through create → claim → finish, a cancel, a retry (a user's restart
// counts a finished job in again, with no condition), a write that loses
// its race on a stale version, and a finishing write whose answer was
// lost and which the SDK sent again (landed): each job counted once at
// most, and a job stored before the counter (imported, not counted)
// never takes one away when it finishes.
func TestTheActiveJobsCounterStaysExact(t *testing.T) {
	t.Parallel()
	env := awstest.Provision(t)
	ctx := context.Background()
	cfg := env.Config.Copy()
	lose := &loseAnswer{op: "TransactWriteItems"}
	lose.lost.Store(true) // armed below
	cfg.HTTPClient = &http.Client{Transport: lose}
	st := store.New(dynamodb.NewFromConfig(cfg), env.Res.Definition.Table.Name, nil)
	st.SetActiveQuota(func(string, string) int { return 10 })
	owner := testfactory.Owner()
	now := time.Now().UTC()

	var ids []string
	jobs := make([]job.Job, 3)
	for i := range jobs {
		jobs[i] = testfactory.Build(testfactory.JobOpts{Owner: owner, At: now})
		if _, created, err := st.CreateJob(ctx, &jobs[i]); err != nil || !created {
			t.Fatalf("creating: %v, %v", created, err)
		}
		ids = append(ids, jobs[i].ID)
	}
	activeIs(t, st, owner, ids, 3, "after three creations")

	a := &jobs[0]
	if _, err := a.Claim("w", now.Add(time.Minute), now); err != nil {
		t.Fatal(err)
	}
	if err := st.ClaimJob(ctx, a); err != nil {
		t.Fatal(err)
	}
	activeIs(t, st, owner, ids, 3, "after a claim")
	stale := *a
	if err := a.Apply(job.Succeed, now); err != nil {
		t.Fatal(err)
	}
	lose.lost.Store(false) // the finish lands, its answer is lost, the SDK sends it again
	if err := st.SaveJob(ctx, a); err != nil {
		t.Fatalf("a finish whose answer was lost: %v", err)
	}
	if !lose.lost.Load() {
		t.Fatal("no answer was lost")
	}
	activeIs(t, st, owner, ids, 2, "after a finish sent twice")
	if err := stale.Apply(job.Cancel, now); err != nil {
		t.Fatal(err)
	}
	if err := st.SaveJob(ctx, &stale); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("a stale write: %v, want ErrConflict", err)
	}
	activeIs(t, st, owner, ids, 2, "after a stale write refused")

	b := &jobs[1]
	if err := b.Apply(job.Cancel, now); err != nil {
		t.Fatal(err)
	}
	if err := st.SaveJob(ctx, b); err != nil {
		t.Fatal(err)
	}
	activeIs(t, st, owner, ids, 1, "after a cancel")
	if err := b.Apply(job.Retry, now); err != nil {
		t.Fatal(err)
	}
	if err := st.SaveJob(ctx, b); err != nil {
		t.Fatal(err)
	}
	activeIs(t, st, owner, ids, 2, "after a retry of the cancelled job")

	old := testfactory.Build(testfactory.JobOpts{Owner: owner, At: now})
	if err := st.ImportJobs(ctx, []job.Job{old}); err != nil {
		t.Fatal(err)
	}
	if err := old.Apply(job.Cancel, now); err != nil {
		t.Fatal(err)
	}
	if err := st.SaveJob(ctx, &old); err != nil {
		t.Fatal(err)
	}
	activeIs(t, st, owner, append(ids, old.ID), 2, "after a job stored before the counter was cancelled")
}

// TestConcurrentCreationsNeverExceedTheActiveQuota: 20 concurrent
// submissions of one owner with a quota of 5 create exactly 5 jobs; the
// others are refused with 429 quota_exceeded naming the limit; another
// owner is not refused; once a job finishes, the owner creates again.
func TestConcurrentCreationsNeverExceedTheActiveQuota(t *testing.T) {
	t.Parallel()
	b := setupStore(t)
	const quota = 5
	b.st.SetActiveQuota(func(string, string) int { return quota })
	ctx := context.Background()
	owner := testfactory.Owner()
	now := b.clk.Now()
	var (
		mu      sync.Mutex
		ids     []string
		refused int
		wg      sync.WaitGroup
	)
	for range 20 {
		wg.Go(func() {
			j := testfactory.Build(testfactory.JobOpts{Owner: owner, At: now})
			_, created, err := b.st.CreateJob(ctx, &j)
			var th *fault.Throttled
			mu.Lock()
			defer mu.Unlock()
			switch {
			case errors.As(err, &th):
				if th.Code != store.CodeQuotaExceeded || th.Name != store.QuotaActiveJobs || th.Limit != quota || th.RetryAfter <= 0 {
					t.Errorf("refused with %+v", th)
				}
				refused++
			case err != nil || !created:
				t.Errorf("creating: %v, %v", created, err)
			default:
				ids = append(ids, j.ID)
			}
		})
	}
	wg.Wait()
	if len(ids) != quota || refused != 20-quota {
		t.Fatalf("20 concurrent creations with a quota of %d: %d created, %d refused", quota, len(ids), refused)
	}
	activeIs(t, b.st, owner, ids, quota, "at the quota")

	other := testfactory.Build(testfactory.JobOpts{Owner: testfactory.Owner(), At: now})
	if _, created, err := b.st.CreateJob(ctx, &other); err != nil || !created {
		t.Fatalf("another owner's job: %v, %v", created, err)
	}

	j := b.get(t, ids[0])
	if err := j.Apply(job.Cancel, now); err != nil {
		t.Fatal(err)
	}
	if err := b.st.SaveJob(ctx, &j); err != nil {
		t.Fatal(err)
	}
	again := testfactory.Build(testfactory.JobOpts{Owner: owner, At: now})
	if _, created, err := b.st.CreateJob(ctx, &again); err != nil || !created {
		t.Fatalf("creating after a job finished: %v, %v", created, err)
	}
	activeIs(t, b.st, owner, append(ids, again.ID), quota, "after one finished and another was created")
}
