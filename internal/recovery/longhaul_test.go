package recovery_test

import (
	"context"
	"testing"
	"time"

	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/publish"
	"github.com/conveyor/conveyor/internal/resources"
	"github.com/conveyor/conveyor/internal/worker"
	"github.com/conveyor/conveyor/localstack/simulator"
)

// calls counts the simulator's answers on one path.
func (b *bundle) calls(path string) int {
	n := 0
	for _, c := range b.Stack.Simulator.Stats().Calls[path] {
		n += c
	}
	return n
}

// TestBacklogIsNeverStuck: a job that waits in a backlog for ten hours is
// re-sent at most once per doubling interval, spends no attempt, is never
// failed for waiting, and publishes once when it is finally received.
func TestBacklogIsNeverStuck(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	id := b.submit(nil)
	resends := 0
	// A recovery run every 20 minutes for 10 hours: the stuck sweep's
	// doubling intervals (20m, 40m, 80m, …) all end on a run, and each
	// run reads every sweep partition, so 30 runs cost what they show.
	for range 10 * 60 / 20 {
		b.clk.Advance(20 * time.Minute)
		res, err := b.Stack.App.Recoverer.Run(ctx)
		if err != nil {
			t.Fatal(err)
		}
		resends += res.Requeued
		if res.FailedStuck != 0 {
			t.Fatalf("a waiting job was failed: %+v", res)
		}
	}
	// STUCK_AFTER 20m, doubling: re-sent at ~20m, 60m, 140m, 300m, 620m.
	if resends < 1 || resends > 5 {
		t.Errorf("re-sent %d times in 10 hours, want 1 to 5 (doubling intervals)", resends)
	}
	j := b.job(id)
	if j.Status != job.Queued || j.Attempts != 0 || j.Resends != resends {
		t.Fatalf("after 10 hours: %s attempts %d resends %d, want queued, 0, %d", j.Status, j.Attempts, j.Resends, resends)
	}
	// Every message of the backlog is delivered: one publication.
	msgs := b.drain(job.Medium)
	if msgs != resends+1 {
		t.Errorf("%d messages in the queue, want %d", msgs, resends+1)
	}
	for range msgs {
		if v, err := b.Stack.App.Publisher.Run(ctx, worker.Delivery{JobID: id}); err != nil || !v.Done {
			t.Fatalf("delivery: %+v %v", v, err)
		}
	}
	if j := b.job(id); j.Status != job.Succeeded || j.Attempts != 1 {
		t.Errorf("job %s attempts %d, want succeeded after 1", j.Status, j.Attempts)
	}
	if n := len(b.Stack.Simulator.Publications()); n != 1 {
		t.Errorf("%d publications, want 1", n)
	}
}

// TestLongOutageParksInTheTable: a wait longer than ParkAfter (here a 429
// with a one-hour Retry-After) deletes the message and parks the job in
// the table, spending no attempt and no SQS receive; the release sweep
// sends it again when due, and it publishes.
func TestLongOutageParksInTheTable(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	id := b.submit(nil)
	b.drain(job.Medium)
	b.Stack.Simulator.AddFault(simulator.Fault{Path: "/api/v1/oauth2/stash/submit", Status: 429, RetryAfter: 3600, Count: 1})
	v, err := b.Stack.App.Publisher.Run(ctx, worker.Delivery{JobID: id, Receives: 1})
	if err != nil || !v.Done {
		t.Fatalf("run during the outage: %+v %v; want the message let go", v, err)
	}
	j := b.job(id)
	if j.Status != job.Queued || j.Waiting != "rate_limited" || j.Attempts != 0 || j.RetryAt == nil {
		t.Fatalf("job = %s waiting %q attempts %d retryAt %v; want parked, no attempt spent", j.Status, j.Waiting, j.Attempts, j.RetryAt)
	}
	// Recovery leaves a parked job alone, however long it waits.
	b.clk.Advance(50 * time.Minute)
	if res, _ := b.Stack.App.Recoverer.Run(ctx); res.Orphans != 0 {
		t.Fatalf("recovery took a parked job for an orphan: %+v", res)
	}
	if res, _ := b.Stack.App.Recoverer.ReleaseScheduled(ctx, nil); res.Unparked != 0 {
		t.Fatalf("released before its time: %+v", res)
	}
	b.clk.Advance(11 * time.Minute)
	res, err := b.Stack.App.Recoverer.ReleaseScheduled(ctx, nil)
	if err != nil || res.Unparked != 1 {
		t.Fatalf("release = %+v, %v; want the parked job sent", res, err)
	}
	if n := b.drain(job.Medium); n != 1 {
		t.Fatalf("%d messages, want 1", n)
	}
	if v, err := b.Stack.App.Publisher.Run(ctx, worker.Delivery{JobID: id, Receives: 1}); err != nil || !v.Done {
		t.Fatalf("run after the outage: %+v %v", v, err)
	}
	if j := b.job(id); j.Status != job.Succeeded || j.Attempts != 1 {
		t.Errorf("job %s attempts %d, want succeeded after 1", j.Status, j.Attempts)
	}
}

// TestShortWaitNearTheDLQParks: even a short backoff leaves the queue once
// the message has been received nearly maxReceiveCount times, so waiting
// never dead-letters a live job.
func TestShortWaitNearTheDLQParks(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	id := b.submit(nil)
	b.drain(job.Medium)
	b.Stack.Simulator.AddFault(simulator.Fault{Path: "/api/v1/oauth2/stash/submit", Status: 503, Count: 2})
	v, err := b.Stack.App.Publisher.Run(ctx, worker.Delivery{JobID: id, Receives: 1})
	if err != nil || v.Done || v.RetryIn <= 0 {
		t.Fatalf("first failure: %+v %v; want a short retry through the queue", v, err)
	}
	b.clk.Advance(time.Minute)
	v, err = b.Stack.App.Publisher.Run(ctx, worker.Delivery{JobID: id, Receives: resources.DefaultMaxReceiveCount - 2})
	if err != nil || !v.Done {
		t.Fatalf("failure near the DLQ: %+v %v; want the message let go", v, err)
	}
	if j := b.job(id); j.Waiting != "backoff" || j.Attempts != 2 {
		t.Fatalf("job waiting %q attempts %d; want parked after 2 attempts", j.Waiting, j.Attempts)
	}
}

// TestPauseIsHonouredAtTheClaim: a job delivered after its tier was paused
// does not start, whatever the consumers' caches say; it waits in the
// table and runs after the resume.
func TestPauseIsHonouredAtTheClaim(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	id := b.submit(nil)
	b.drain(job.Medium)
	st := b.Stack.App.Store
	if _, err := st.SetTierPaused(ctx, job.Medium, true, "ops"); err != nil {
		t.Fatal(err)
	}
	v, err := b.Stack.App.Publisher.Run(ctx, worker.Delivery{JobID: id, Receives: 1})
	if err != nil || !v.Done {
		t.Fatalf("run while paused: %+v %v", v, err)
	}
	if j := b.job(id); j.Status != job.Queued || j.Waiting != "paused" || j.Attempts != 0 || j.StartedAt != nil {
		t.Fatalf("job = %s waiting %q attempts %d started %v; want it untouched, waiting for the resume", j.Status, j.Waiting, j.Attempts, j.StartedAt)
	}
	if n := len(b.Stack.Simulator.Publications()); n != 0 {
		t.Fatalf("%d publications while paused", n)
	}
	b.clk.Advance(10 * time.Minute) // past any pause cache
	if res, _ := b.Stack.App.Recoverer.ReleaseScheduled(ctx, nil); res.Unparked != 0 {
		t.Fatalf("released while the tier is paused: %+v", res)
	}
	if _, err := st.SetTierPaused(ctx, job.Medium, false, "ops"); err != nil {
		t.Fatal(err)
	}
	b.clk.Advance(10 * time.Minute)
	if res, err := b.Stack.App.Recoverer.ReleaseScheduled(ctx, nil); err != nil || res.Unparked != 1 {
		t.Fatalf("release after the resume = %+v, %v", res, err)
	}
	if v, err := b.Stack.App.Publisher.Run(ctx, worker.Delivery{JobID: id, Receives: 1}); err != nil || !v.Done {
		t.Fatalf("run after the resume: %+v %v", v, err)
	}
	if j := b.job(id); j.Status != job.Succeeded {
		t.Errorf("job %s, want succeeded", j.Status)
	}
}

// TestCancelDuringPublishingKeepsTheOutput: the user cancels while the
// publication is under way; it completes anyway, and the item keeps it.
func TestCancelDuringPublishingKeepsTheOutput(t *testing.T) {
	t.Parallel()
	// The run is held in a hook while the owner cancels: its heartbeat
	// keeps writing the job, and the cancel's read and write must fit
	// between two beats, as they do on AWS (30 s beats, ~10 ms requests).
	// A beat of 200 ms against a loaded emulator's 400 ms requests would
	// refuse the cancel; a beat of a second keeps the proportion sane.
	b := setupEnv(t, map[string]string{"CONVEYOR_HEARTBEAT_INTERVAL": "1s"})
	ctx := context.Background()
	id := b.submit(nil)
	b.drain(job.Medium)
	b.at[id+"@"+publish.AfterPublish] = func() {
		b.Must(b.Call("POST", "/v1/jobs/"+id+"/cancel", b.freshToken(), nil), 200)
	}
	if v, err := b.Stack.App.Publisher.Run(ctx, worker.Delivery{JobID: id}); err != nil || !v.Done {
		t.Fatalf("run: %+v %v", v, err)
	}
	j := b.job(id)
	if j.Status != job.Cancelled {
		t.Fatalf("status %s, want cancelled", j.Status)
	}
	pubs := b.Stack.Simulator.Publications()
	if len(pubs) != 1 {
		t.Fatalf("%d publications, want 1", len(pubs))
	}
	it := j.Items[0]
	if it.Status != job.ItemPublished || it.Output == nil || it.Output.DeviationID != pubs[0].DeviationID {
		t.Errorf("item %s output %+v; want published with deviation %s", it.Status, it.Output, pubs[0].DeviationID)
	}
}

// TestRetryAfterACrashDoesNotRepeatWork: the worker dies right after the
// API accepted the upload; the user cancels and retries: the retry asks
// the API what happened instead of uploading again.
func TestRetryAfterACrashDoesNotRepeatWork(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	id := b.submit(nil)
	b.drain(job.Medium)
	b.crash[id] = publish.AfterSubmit
	if _, err := b.Stack.App.Publisher.Run(ctx, worker.Delivery{JobID: id}); err == nil {
		t.Fatal("want a crash")
	}
	b.Must(b.Call("POST", "/v1/jobs/"+id+"/cancel", b.freshToken(), nil), 200)
	r := b.Must(b.Call("POST", "/v1/jobs/"+id+"/retry", b.freshToken(), nil), 200)
	if r.Body["attempts"] != 0.0 {
		t.Fatalf("retry: %s", r.Raw)
	}
	b.drain(job.Medium)
	if v, err := b.Stack.App.Publisher.Run(ctx, worker.Delivery{JobID: id}); err != nil || !v.Done {
		t.Fatalf("run after retry: %+v %v", v, err)
	}
	if j := b.job(id); j.Status != job.Succeeded {
		t.Fatalf("status %s", j.Status)
	}
	if n := b.calls("/api/v1/oauth2/stash/submit"); n != 1 {
		t.Errorf("%d uploads to the API, want 1 (the retry must find the first)", n)
	}
	if n := len(b.Stack.Simulator.Publications()); n != 1 {
		t.Errorf("%d publications, want 1", n)
	}
}

// TestCrashThenCancelKeepsThePublication: the worker dies right after the
// API published the item, and the user cancels before the message comes
// back; the next delivery finds a cancelled job, asks the API what the
// interrupted run did, and records the publication on the item.
func TestCrashThenCancelKeepsThePublication(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	id := b.submit(nil)
	b.drain(job.Medium)
	b.crash[id] = publish.AfterPublish
	if _, err := b.Stack.App.Publisher.Run(ctx, worker.Delivery{JobID: id}); err == nil {
		t.Fatal("want a crash")
	}
	b.Must(b.Call("POST", "/v1/jobs/"+id+"/cancel", b.freshToken(), nil), 200)
	if v, err := b.Stack.App.Publisher.Run(ctx, worker.Delivery{JobID: id}); err != nil || !v.Done {
		t.Fatalf("redelivery: %+v %v", v, err)
	}
	pubs := b.Stack.Simulator.Publications()
	if len(pubs) != 1 {
		t.Fatalf("%d publications, want 1", len(pubs))
	}
	j := b.job(id)
	it := j.Items[0]
	if j.Status != job.Cancelled || it.Status != job.ItemPublished || it.Output == nil || it.Output.DeviationID != pubs[0].DeviationID {
		t.Errorf("job %s item %s output %+v; want cancelled with the publication %s kept", j.Status, it.Status, it.Output, pubs[0].DeviationID)
	}
}
