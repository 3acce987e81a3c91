package stack_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/localstack/awstest"
	"github.com/conveyor/conveyor/localstack/stack"
)

// TestAQuietOwnerIsNotHeldBackByANoisyOne: a noisy owner queues hundreds
// of jobs in the low tier, then a quiet owner of the same tier submits
// one. The quiet job must not wait for the noisy backlog: between its
// submission and its start, at most a few noisy jobs start (those already
// taken by workers), not the hundreds queued before it. The figure is
// counted in jobs, not seconds, so that a slow machine cannot fail it.
func TestAQuietOwnerIsNotHeldBackByANoisyOne(t *testing.T) {
	t.Parallel()
	const noisyJobs = 200
	// Every target call takes a while, as the external API does.
	var mu sync.Mutex
	calls := 0
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		calls++
		mu.Unlock()
		time.Sleep(time.Second)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer target.Close()
	b := awstest.Setup(t, map[string]string{"CONVEYOR_FAIR_SLOTS": "free=2"}, stack.Options{})
	noisy, quiet := b.Token("u-noisy", "user", "free"), b.Token("u-quiet", "user", "free")
	submit := func(tok string, n int) string {
		r := b.Must(b.Call("POST", "/v1/jobs", tok, map[string]any{"type": "http",
			"params": map[string]any{"method": "POST", "url": target.URL + "/hook", "body": fmt.Sprint("job ", n)}}), 201)
		return r.Body["id"].(string)
	}
	// The backlog: submitted in parallel, so that it builds faster than it drains.
	ids := make([]string, noisyJobs)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i := range noisyJobs {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			ids[i] = submit(noisy, i)
		})
	}
	wg.Wait()
	ctx := context.Background()
	pending := func() int {
		n := 0
		for _, id := range ids {
			if j, err := b.Stack.App.Store.GetJob(ctx, id); err == nil && j.StartedAt == nil {
				n++
			}
		}
		return n
	}
	backlog := pending()
	if backlog < 20 {
		t.Fatalf("only %d of the noisy owner's %d jobs still wait: no backlog to test against", backlog, noisyJobs)
	}
	submitted := time.Now()
	qid := submit(quiet, 0)
	// Fairness decides when the quiet job starts; it must also finish,
	// under the same load, once started.
	b.WaitStatus(quiet, qid, "succeeded")
	qj, err := b.Stack.App.Store.GetJob(ctx, qid)
	if err != nil || qj.StartedAt == nil {
		t.Fatalf("the quiet job: %v %+v", err, qj)
	}
	// Noisy jobs that started after the quiet job was submitted and
	// before it started: they went ahead of it.
	ahead := 0
	for _, id := range ids {
		j, err := b.Stack.App.Store.GetJob(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if j.StartedAt != nil && j.StartedAt.After(qj.CreatedAt) && j.StartedAt.Before(*qj.StartedAt) {
			ahead++
		}
	}
	t.Logf("noisy backlog %d jobs; the quiet job started %s after its submission, %d noisy jobs started ahead of it",
		backlog, qj.StartedAt.Sub(submitted).Round(time.Millisecond), ahead)
	// The noisy owner holds 2 slots: each may start its next job while the
	// quiet one is being delivered; a few more for the receives in flight.
	if limit := 6; ahead > limit {
		t.Errorf("%d of the noisy owner's queued jobs started before the quiet owner's job, want at most %d: the tier serves its backlog in arrival order", ahead, limit)
	}
	if qj.Tier != job.Low {
		t.Errorf("the quiet job ran in %s, want low (both owners are free)", qj.Tier)
	}
}
