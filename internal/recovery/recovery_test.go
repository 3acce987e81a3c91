package recovery_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/conveyor/conveyor/internal/aws/awsclient"
	"github.com/conveyor/conveyor/internal/aws/store"
	"github.com/conveyor/conveyor/internal/clock"
	"github.com/conveyor/conveyor/internal/httpapi"
	"github.com/conveyor/conveyor/internal/ids"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/publish"
	"github.com/conveyor/conveyor/internal/worker"
	"github.com/conveyor/conveyor/localstack/awstest"
	"github.com/conveyor/conveyor/localstack/stack"
)

func TestMain(m *testing.M) { awstest.Main(m) }

type bundle struct {
	*awstest.Bundle
	clk     *clock.Simulated
	counter *awsclient.Counter
	tok     string
	crash   map[string]string
	// at runs instead of a crash when a job reaches a point (and the run
	// goes on), e.g. to cancel the job while it publishes.
	at map[string]func()
	mu sync.Mutex
}

// setup runs a stack without pollers or tickers: the test drives the
// publisher and the recovery runs with its own clock.
func setup(t *testing.T) *bundle { return setupEnv(t, nil) }

// setupEnv is setup with extra environment variables (e.g. compressed
// retention stages).
func setupEnv(t *testing.T, extra map[string]string) *bundle {
	b := &bundle{clk: clock.NewSimulated(time.Now().UTC()), counter: awsclient.NewCounter(), crash: map[string]string{}, at: map[string]func(){}}
	env := map[string]string{"CONVEYOR_STUCK_AFTER": "20m", "CONVEYOR_MAX_ATTEMPTS": "3"}
	for k, v := range extra {
		env[k] = v
	}
	b.Bundle = awstest.Setup(t, env, stack.Options{
		DisablePollers: true, Now: b.clk.Now, Counter: b.counter,
		Crash: func(point string, j *job.Job) error {
			b.mu.Lock()
			hook := b.at[j.ID+"@"+point]
			delete(b.at, j.ID+"@"+point)
			crash := b.crash[j.ID] == point
			if crash {
				delete(b.crash, j.ID)
			}
			b.mu.Unlock()
			if hook != nil {
				hook()
			}
			if crash {
				return errors.New("killed")
			}
			return nil
		},
	})
	b.tok = b.Token("u-rec", "user", "standard")
	b.Connect(b.tok)
	t.Cleanup(func() {
		if n := b.counter.Get("DynamoDB.Scan"); n != 0 {
			t.Errorf("%d DynamoDB Scans were issued; recovery must only query indexes", n)
		}
	})
	return b
}

func (b *bundle) submit(body map[string]any) string {
	b.T.Helper()
	if body == nil {
		body = map[string]any{}
	}
	body["items"] = []any{map[string]any{"uploadId": b.Upload(b.tok, awstest.PNG(b.T, 5))}}
	if body["params"] == nil {
		body["params"] = map[string]any{"title": "recover me " + ids.New("x")}
	}
	return b.Must(b.Call("POST", "/v1/jobs", b.tok, body), 201).Body["id"].(string)
}

// freshToken is valid at the test clock's now.
func (b *bundle) freshToken() string {
	tok, err := httpapi.Mint(b.Stack.Config.JWTSecret, httpapi.Claims{Subject: "u-rec", Role: httpapi.RoleUser, Plan: "standard", ExpiresAt: b.clk.Now().Add(time.Hour)})
	if err != nil {
		b.T.Fatal(err)
	}
	return tok
}

func (b *bundle) job(id string) job.Job {
	b.T.Helper()
	j, err := b.Stack.App.Store.GetJob(context.Background(), id)
	if err != nil {
		b.T.Fatal(err)
	}
	return j
}

// drain receives every message of the tier's queue and returns their count.
func (b *bundle) drain(tier job.Tier) int {
	b.T.Helper()
	ms := awstest.ReceiveAll(b.T, b.Stack.App.Clients.SQS, b.Stack.Config.QueueURLs[tier], 0)
	for _, m := range ms {
		_, _ = b.Stack.App.Clients.SQS.DeleteMessage(context.Background(), &sqs.DeleteMessageInput{QueueUrl: aws.String(b.Stack.Config.QueueURLs[tier]), ReceiptHandle: m.ReceiptHandle})
	}
	return len(ms)
}

func TestDeadWorkerIsRequeuedAndPublishesOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	id := b.submit(nil)
	b.drain(job.Medium)
	b.crash[id] = publish.AfterUpload
	if _, err := b.Stack.App.Publisher.Run(ctx, worker.Delivery{JobID: id}); !errors.Is(err, worker.ErrCrash) {
		t.Fatalf("run = %v, want a crash", err)
	}
	if j := b.job(id); j.Status != job.Running {
		t.Fatalf("after the crash: %s, want running", j.Status)
	}
	rec := b.Stack.App.Recoverer
	if res, _ := rec.Run(ctx); res.Requeued != 0 {
		t.Fatalf("a fresh heartbeat was judged stuck: %+v", res)
	}
	b.clk.Advance(21 * time.Minute)
	res, err := rec.Run(ctx)
	if err != nil || res.Orphans != 1 || res.Requeued != 1 {
		t.Fatalf("recovery = %+v, %v; want one orphan requeued", res, err)
	}
	if n := b.drain(job.Medium); n != 1 {
		t.Fatalf("%d messages after recovery, want 1", n)
	}
	if v, err := b.Stack.App.Publisher.Run(ctx, worker.Delivery{JobID: id}); err != nil || !v.Done {
		t.Fatalf("redelivery: %+v %v", v, err)
	}
	j := b.job(id)
	if j.Status != job.Succeeded {
		t.Fatalf("status %s", j.Status)
	}
	n := 0
	for _, p := range b.Stack.Simulator.Publications() {
		if p.Stack == j.Items[0].ID {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d publications, want 1", n)
	}
}

func TestExhaustedStuckJobFails(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	id := b.submit(nil)
	// MAX_ATTEMPTS is 3: three runs whose worker dies spend them; the
	// recovery after the third fails the job.
	for run := range 3 {
		b.drain(job.Medium)
		b.crash[id] = worker.AfterClaim
		if _, err := b.Stack.App.Publisher.Run(ctx, worker.Delivery{JobID: id}); !errors.Is(err, worker.ErrCrash) {
			t.Fatalf("run %d = %v, want a crash", run, err)
		}
		b.clk.Advance(21 * time.Minute)
		if _, err := b.Stack.App.Recoverer.Run(ctx); err != nil {
			t.Fatal(err)
		}
	}
	j := b.job(id)
	if j.Status != job.Failed || j.Error == nil || j.Error.Code != "stuck" || !j.Error.Retryable || j.Attempts != 3 {
		t.Fatalf("job = %s attempts %d %+v, want failed with a retryable stuck error after 3 runs", j.Status, j.Attempts, j.Error)
	}
	// The user can retry it.
	b.Must(b.Call("POST", "/v1/jobs/"+id+"/retry", b.freshToken(), nil), 200)
}

// TestStuckFailureAfterAPublicationKeepsTheOutput: the last run the job
// had died right after the API published its item. The recovery fails the
// job as stuck (its runs are spent) and sends it once more; that delivery
// asks the API what happened and records the publication on the failed
// job's item. Nothing is published again, and the owner's retry finishes
// the job from there.
func TestStuckFailureAfterAPublicationKeepsTheOutput(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	id := b.submit(nil)
	points := []string{worker.AfterClaim, worker.AfterClaim, publish.AfterPublish} // MAX_ATTEMPTS is 3
	for run, point := range points {
		b.drain(job.Medium)
		b.crash[id] = point
		if _, err := b.Stack.App.Publisher.Run(ctx, worker.Delivery{JobID: id}); !errors.Is(err, worker.ErrCrash) {
			t.Fatalf("run %d = %v, want a crash at %s", run, err, point)
		}
		b.clk.Advance(21 * time.Minute)
		if _, err := b.Stack.App.Recoverer.Run(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if j := b.job(id); j.Status != job.Failed || j.Error == nil || j.Error.Code != "stuck" {
		t.Fatalf("job = %s %+v, want failed as stuck", j.Status, j.Error)
	}
	if n := b.drain(job.Medium); n != 1 {
		t.Fatalf("%d messages after the stuck failure, want 1 (the reconciling delivery)", n)
	}
	if v, err := b.Stack.App.Publisher.Run(ctx, worker.Delivery{JobID: id, Receives: 1}); err != nil || !v.Done {
		t.Fatalf("reconciling delivery: %+v %v", v, err)
	}
	pubs := b.Stack.Simulator.Publications()
	if len(pubs) != 1 {
		t.Fatalf("%d publications, want 1", len(pubs))
	}
	j := b.job(id)
	it := j.Items[0]
	if j.Status != job.Failed || it.Status != job.ItemPublished || it.Output == nil || it.Output.DeviationID != pubs[0].DeviationID {
		t.Fatalf("job %s item %s output %+v; want failed with the publication %s recorded", j.Status, it.Status, it.Output, pubs[0].DeviationID)
	}
	// The owner retries: the item is done, so the run only finishes.
	b.Must(b.Call("POST", "/v1/jobs/"+id+"/retry", b.freshToken(), nil), 200)
	b.drain(job.Medium)
	if v, err := b.Stack.App.Publisher.Run(ctx, worker.Delivery{JobID: id}); err != nil || !v.Done {
		t.Fatalf("run after the retry: %+v %v", v, err)
	}
	if j := b.job(id); j.Status != job.Succeeded || j.Items[0].Output == nil {
		t.Errorf("after the retry: %s %+v, want succeeded with the output", j.Status, j.Items[0].Output)
	}
	if n := len(b.Stack.Simulator.Publications()); n != 1 {
		t.Errorf("%d publications after the retry, want 1", n)
	}
}

func TestScheduledJobStartsAfterItsTimeNotBefore(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	at := b.clk.Now().Add(time.Hour).Truncate(time.Second)
	id := b.submit(map[string]any{"scheduleAt": at.Format(time.RFC3339)})
	if j := b.job(id); j.Status != job.Scheduled {
		t.Fatalf("status %s, want scheduled", j.Status)
	}
	if n := b.drain(job.Medium); n != 0 {
		t.Fatalf("a scheduled job was sent at once (%d messages)", n)
	}
	b.clk.Advance(59 * time.Minute)
	if res, _ := b.Stack.App.Recoverer.ReleaseScheduled(ctx, nil); res.Released != 0 {
		t.Fatalf("released a minute early: %+v", res)
	}
	b.clk.Advance(time.Minute + time.Second)
	res, err := b.Stack.App.Recoverer.ReleaseScheduled(ctx, nil)
	if err != nil || res.Released != 1 {
		t.Fatalf("release = %+v, %v", res, err)
	}
	if j := b.job(id); j.Status != job.Queued {
		t.Errorf("status %s, want queued", j.Status)
	}
	if n := b.drain(job.Medium); n != 1 {
		t.Errorf("%d messages, want 1", n)
	}
	if v, err := b.Stack.App.Publisher.Run(ctx, worker.Delivery{JobID: id}); err != nil || !v.Done {
		t.Fatalf("run: %+v %v", v, err)
	}
	if j := b.job(id); j.Status != job.Succeeded || !j.StartedAt.After(at) {
		t.Errorf("job %s started %v, schedule %v", j.Status, j.StartedAt, at)
	}
}

func TestRetentionStaleThenDeleted(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	id := b.submit(nil)
	if v, err := b.Stack.App.Publisher.Run(ctx, worker.Delivery{JobID: id}); err != nil || !v.Done {
		t.Fatalf("run: %+v %v", v, err)
	}
	key := b.job(id).Items[0].Key
	b.clk.Advance(167 * time.Hour)
	if res, _ := b.Stack.App.Recoverer.Retain(ctx, nil); res.Staled != 0 {
		t.Fatalf("staled early: %+v", res)
	}
	b.clk.Advance(2 * time.Hour)
	res, err := b.Stack.App.Recoverer.Retain(ctx, nil)
	if err != nil || res.Staled != 1 {
		t.Fatalf("recovery = %+v, %v", res, err)
	}
	j := b.job(id)
	if j.Status != job.Stale || j.ExpiresAt == 0 {
		t.Fatalf("job = %s expiresAt %d", j.Status, j.ExpiresAt)
	}
	if _, err := b.Stack.App.Bucket.Head(ctx, key); err == nil {
		t.Error("the stale job's object is still in S3")
	}
	b.clk.Advance(720 * time.Hour)
	if _, err := b.Stack.App.Store.GetJob(ctx, id); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("expired job still readable: %v", err)
	}
	r := b.Call("GET", "/v1/jobs/"+id, b.freshToken(), nil)
	if r.Status != 404 {
		t.Errorf("GET expired job: %d", r.Status)
	}
}

func TestRecoveryRunCost(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	for range 3 {
		b.submit(nil)
	}
	b.counter.Reset()
	if _, err := b.Stack.App.Recoverer.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Stack.App.Recoverer.ReleaseScheduled(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Stack.App.Recoverer.Retain(ctx, nil); err != nil {
		t.Fatal(err)
	}
	t.Logf("one recovery, release and retention run each with nothing due: %d requests %v", b.counter.Total(), b.counter.Snapshot())
	// Only the runs' own requests: the stack's S3 notification bridge
	// polls its queue meanwhile.
	for k, n := range b.counter.Snapshot() {
		if k != "DynamoDB.Query" && k != "SQS.ReceiveMessage" && n > 0 {
			t.Errorf("a run with nothing due made %d %s requests: %v", n, k, b.counter.Snapshot())
		}
	}
}
