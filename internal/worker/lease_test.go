package worker_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/conveyor/conveyor/internal/aws/queue"
	"github.com/conveyor/conveyor/internal/deviantart"
	"github.com/conveyor/conveyor/internal/handler"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/publish"
	"github.com/conveyor/conveyor/internal/retry"
	"github.com/conveyor/conveyor/internal/worker"
	"github.com/conveyor/conveyor/localstack/awstest"
	"github.com/conveyor/conveyor/localstack/simulator"
	"github.com/conveyor/conveyor/localstack/stack"
)

// newWorker is one more publisher instance on the test's stack, as another
// Lambda would be: its own name, the AWS heartbeat (30s: nothing notices a
// cancel between two calls but the lease check), the default cancel
// notice, and api as its API.
func newWorker(b *awstest.Bundle, name string, api publish.API, now func() time.Time) *worker.Worker {
	app := b.Stack.App
	cfg := app.Config
	return worker.New(worker.Config{
		Store:     app.Store,
		Policy:    retry.Policy{Base: cfg.RetryBase, Max: cfg.RetryMax, MaxAttempts: cfg.MaxAttempts, ParkAfter: cfg.ParkAfter},
		Heartbeat: 30 * time.Second, Worker: name, Now: now, Logger: app.Logger,
		Kinds: job.NewRegistry(publish.New(publish.Config{Store: app.Store, Objects: app.Bucket, Tokens: app.Accounts, API: api, Logger: app.Logger})),
	})
}

// gatedSubmit holds the first Submit until released: a call in flight.
type gatedSubmit struct {
	publish.API
	once    sync.Once
	entered chan struct{}
	release chan struct{}
}

func newGatedSubmit(api publish.API) *gatedSubmit {
	return &gatedSubmit{API: api, entered: make(chan struct{}), release: make(chan struct{})}
}

func (g *gatedSubmit) Submit(ctx context.Context, tok string, s deviantart.Submission) (int64, error) {
	g.once.Do(func() {
		close(g.entered)
		<-g.release
	})
	return g.API.Submit(ctx, tok, s)
}

// queued receives the messages visible on tier's queue now.
func queued(t *testing.T, b *awstest.Bundle, tier job.Tier) []queueMsg {
	t.Helper()
	url := b.Stack.App.Config.QueueURLs[tier]
	var out []queueMsg
	for _, m := range awstest.ReceiveAll(t, b.Stack.App.Clients.SQS, url, 60) {
		msg, err := queue.Decode(aws.ToString(m.Body))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, queueMsg{Message: msg, url: url, receipt: aws.ToString(m.ReceiptHandle), group: m.Attributes["MessageGroupId"]})
	}
	return out
}

// sent waits until tier's queue hands out at least one message and returns
// what it holds: a message the API sent before it answered is in the queue,
// but a receive may come back empty on a loaded emulator (as SQS's own
// receives may), so one empty receive is not proof of absence; the deadline
// only bounds a hang.
func sent(t *testing.T, b *awstest.Bundle, tier job.Tier) []queueMsg {
	t.Helper()
	for end := time.Now().Add(20 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if ms := queued(t, b, tier); len(ms) > 0 || time.Now().After(end) {
			return ms
		}
	}
}

type queueMsg struct {
	queue.Message
	url, receipt, group string
}

// run delivers m to pub as the consumer would: deleted when done, else
// visible again at once (the test plays the time the queue would wait).
func (m queueMsg) run(t *testing.T, b *awstest.Bundle, pub *worker.Worker) worker.Verdict {
	t.Helper()
	ctx := context.Background()
	v, err := pub.Run(ctx, worker.Delivery{JobID: m.JobID, Owner: m.Owner, Uploads: m.Uploads, Receives: 1})
	if err != nil {
		t.Fatalf("run of %s: %v", m.JobID, err)
	}
	sqsc := b.Stack.App.Clients.SQS
	if v.Done {
		_, err = sqsc.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(m.url), ReceiptHandle: aws.String(m.receipt)})
	} else {
		_, err = sqsc.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(m.url), ReceiptHandle: aws.String(m.receipt)})
	}
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// drain delivers every message of tier's queue to pub until none is left
// or rounds are spent; it returns the verdicts.
func drain(t *testing.T, b *awstest.Bundle, tier job.Tier, pub *worker.Worker, rounds int) []worker.Verdict {
	t.Helper()
	var out []worker.Verdict
	for range rounds {
		ms := queued(t, b, tier)
		if len(ms) == 0 {
			break
		}
		for _, m := range ms {
			v := m.run(t, b, pub)
			t.Logf("drain: job %s send %d group %s: %+v", m.JobID, m.Send, m.group, v)
			out = append(out, v)
		}
	}
	return out
}

// checkPublishedOnce checks that each of the job's items was published
// exactly once on the API and that this publication is its recorded output.
func checkPublishedOnce(t *testing.T, b *awstest.Bundle, id string) job.Job {
	t.Helper()
	j, err := b.Stack.App.Store.GetJob(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	byStack := map[string][]simulator.Publication{}
	for _, p := range b.Stack.Simulator.Publications() {
		byStack[p.Stack] = append(byStack[p.Stack], p)
	}
	for _, it := range j.Items {
		pubs := byStack[it.ID]
		if len(pubs) != 1 {
			t.Errorf("item %s: %d publications on the API, want exactly 1", it.ID, len(pubs))
			continue
		}
		if it.Status != job.ItemPublished || it.Output == nil || it.Output.DeviationID != pubs[0].DeviationID {
			t.Errorf("item %s: status %s, output %+v; the API published %s", it.ID, it.Status, it.Output, pubs[0].DeviationID)
		}
	}
	return j
}

// TestCancelThenRetryWhileACallIsInFlightPublishesOnce: worker A's upload
// is held in flight; the owner cancels and retries meanwhile, and A's call
// lasts longer than the cancel notice (A's clock moves past it). Worker B
// gets the retry's message but may not claim the job while A holds it
// (the cancel kept A's lease); A's call returns, A sees before publishing
// that the job is no longer its own, records the upload and releases the
// job; B then runs the retry, finds the upload, and publishes once.
func TestCancelThenRetryWhileACallIsInFlightPublishesOnce(t *testing.T) {
	t.Parallel()
	testTwoWorkersOneHeldCall(t, true, func(b *awstest.Bundle, tok, id string) {
		b.Must(b.Call("POST", "/v1/jobs/"+id+"/cancel", tok, nil), 200)
		b.Must(b.Call("POST", "/v1/jobs/"+id+"/retry", tok, nil), 200)
	})
}

// TestStopThenRestartWhileACallIsInFlightPublishesOnce is the same with an
// operator's stop and restart.
func TestStopThenRestartWhileACallIsInFlightPublishesOnce(t *testing.T) {
	t.Parallel()
	testTwoWorkersOneHeldCall(t, true, func(b *awstest.Bundle, _, id string) {
		admin := b.Token("ops", "admin", "enterprise")
		r := b.Must(b.Call("POST", "/v1/admin/jobs/stop", admin, map[string]any{"jobIds": []string{id}}), 200)
		if got := r.Body["stopped"].([]any); len(got) != 1 {
			t.Fatalf("stop: %v", r.Body)
		}
		r = b.Must(b.Call("POST", "/v1/admin/jobs/restart", admin, map[string]any{"jobIds": []string{id}}), 200)
		if got := r.Body["restarted"].([]any); len(got) != 1 {
			t.Fatalf("restart: %v", r.Body)
		}
	})
}

// TestACancelWithinTheNoticeLetsTheNextCallGoAndPublishesOnce: the same
// cancel and retry, but A's next call starts less than the cancel notice
// after A last saw the job (A's clock stands still): A publishes without
// reading the job, as it would for a cancel landing during the call. What
// A did is still recorded on the item before B runs, A lets the job go,
// and B's retry finds the item published: one upload, one publication.
func TestACancelWithinTheNoticeLetsTheNextCallGoAndPublishesOnce(t *testing.T) {
	t.Parallel()
	testTwoWorkersOneHeldCall(t, false, func(b *awstest.Bundle, tok, id string) {
		b.Must(b.Call("POST", "/v1/jobs/"+id+"/cancel", tok, nil), 200)
		b.Must(b.Call("POST", "/v1/jobs/"+id+"/retry", tok, nil), 200)
	})
}

// testTwoWorkersOneHeldCall holds worker A's upload in flight while
// interrupt cancels (or stops) and retries (or restarts) the job. late:
// A's clock moves past the cancel notice during the call, so A checks the
// job before it publishes; otherwise it stands still and A publishes.
func testTwoWorkersOneHeldCall(t *testing.T, late bool, interrupt func(b *awstest.Bundle, tok, id string)) {
	b := awstest.Setup(t, nil, stack.Options{DisablePollers: true})
	tok := b.Token("u-held", "user", "pro")
	b.Connect(tok)
	app := b.Stack.App
	gate := newGatedSubmit(app.API)
	clk := newClock()
	a, w := newWorker(b, "w-A", gate, clk.Now), newWorker(b, "w-B", app.API, nil)
	id := submit(b, tok, "held", 1)
	first := sent(t, b, job.Medium)
	if len(first) != 1 || first[0].JobID != id {
		t.Fatalf("queued: %+v, want the job's message", first)
	}
	var aDone sync.WaitGroup
	aDone.Go(func() { first[0].run(t, b, a) })
	<-gate.entered // A's upload is in flight
	interrupt(b, tok, id)

	// B gets every message there is while A's call is in flight: none
	// may start the job.
	for _, v := range drain(t, b, job.Medium, w, 1) {
		if v.Done && strings.Contains(v.Reason, "succeeded") {
			t.Errorf("worker B ran the job while A held it: %+v", v)
		}
	}
	j, err := app.Store.GetJob(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if j.Status != job.Queued || j.Attempts != 0 {
		t.Errorf("while A holds it: status %s, attempts %d; want queued, no attempt spent", j.Status, j.Attempts)
	}

	if late {
		clk.Advance(worker.CancelNoticeDefault + time.Second)
	}
	close(gate.release)
	aDone.Wait()
	pubs := b.Stack.Simulator.Publications()
	switch {
	case late && len(pubs) != 0:
		t.Errorf("%d publications once A's call returned and before B ran, want none (A lost the job, B waited)", len(pubs))
	case !late && len(pubs) != 1:
		t.Errorf("%d publications once A's call returned and before B ran, want A's one (the cancel was within the notice)", len(pubs))
	case !late:
		j, err := app.Store.GetJob(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if it := j.Items[0]; it.Status != job.ItemPublished || it.Output == nil || it.Output.DeviationID != pubs[0].DeviationID || j.LeaseOwner != "" {
			t.Errorf("after A: item %s with output %+v, lease owner %q; want A's publication %s recorded and the job let go",
				it.Status, it.Output, j.LeaseOwner, pubs[0].DeviationID)
		}
	}
	// B takes what the queue holds until the job is done: a message the
	// queue has not handed out yet (its group still locked by the delete
	// of A's) comes in a later round; the deadline only bounds a hang.
	for end := time.Now().Add(15 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		drain(t, b, job.Medium, w, 5)
		if j, err = app.Store.GetJob(context.Background(), id); err == nil && j.Status == job.Succeeded {
			break
		}
	}
	j = checkPublishedOnce(t, b, id)
	if j.Status != job.Succeeded {
		t.Errorf("status %s, want succeeded (error %+v)", j.Status, j.Error)
	}
	if n := b.Stack.Simulator.Stats().Calls[simulator.PathSubmit]["200"]; n != 1 {
		t.Errorf("%d uploads, want 1 (B finds A's)", n)
	}
}

// lostResponse is a transport that makes a publication and then loses its
// answer (the connection dropped), after calling during (the owner's cancel
// landing while the call was in flight).
type lostResponse struct {
	next   http.RoundTripper
	during func()
	once   sync.Once
}

func (l *lostResponse) RoundTrip(r *http.Request) (*http.Response, error) {
	res, err := l.next.RoundTrip(r)
	if err != nil || !strings.HasSuffix(r.URL.Path, simulator.PathPublish) {
		return res, err
	}
	lost := false
	l.once.Do(func() {
		l.during()
		lost = true
	})
	if !lost {
		return res, nil
	}
	res.Body.Close()
	return nil, errors.New("connection reset by peer")
}

// TestUnknownOutcomeOnACancelledJobIsRecorded: the job is cancelled while
// its publication is in flight, and the publication's answer is lost (the
// API published). The job will not run again; still, what the API did
// ends up on the item: the cancel leaves a delivery that waits for the run
// to let go, asks the API, and records the output on the cancelled job.
func TestUnknownOutcomeOnACancelledJobIsRecorded(t *testing.T) {
	t.Parallel()
	b := awstest.Setup(t, nil, stack.Options{DisablePollers: true})
	tok := b.Token("u-unknown", "user", "pro")
	b.Connect(tok)
	app := b.Stack.App
	id := submit(b, tok, "unknown", 1)
	lossy, err := deviantart.New(deviantart.Config{BaseURL: app.Config.DeviantArtURL, ClientID: app.Config.DeviantArtClientID,
		ClientSecret: app.Config.DeviantArtClientSecret, CallTimeout: 5 * time.Second, UploadRateMin: 1 << 20,
		HTTPClient: &http.Client{Transport: &lostResponse{next: http.DefaultTransport, during: func() {
			b.Must(b.Call("POST", "/v1/jobs/"+id+"/cancel", tok, nil), 200)
		}}}})
	if err != nil {
		t.Fatal(err)
	}
	a, w := newWorker(b, "w-A", lossy, nil), newWorker(b, "w-B", app.API, nil)
	vs := drain(t, b, job.Medium, a, 1) // A publishes, loses the answer, the job is cancelled meanwhile
	if n := len(b.Stack.Simulator.Publications()); n != 1 {
		t.Fatalf("%d publications, want the one whose answer was lost (A's verdicts %+v)", n, vs)
	}
	drain(t, b, job.Medium, w, 5) // whatever the queue holds for the job now
	j := checkPublishedOnce(t, b, id)
	if j.Status != job.Cancelled {
		t.Errorf("status %s, want cancelled", j.Status)
	}
	if j.Unsettled() {
		t.Errorf("items still unsettled: %+v", j.Items)
	}
	if j.LeaseOwner != "" {
		t.Errorf("the cancelled job is still held by %s", j.LeaseOwner)
	}
}

// TestALongJobDoesNotTimeOutItsBatchMates: one batch, as the publisher
// function gets it, under an invocation deadline 14s away: a twenty-item
// job beside two one-item jobs of other owners (each in its owner's slot,
// a message group of its own), every API call slowed to 800ms, each
// call's deadline 3s (room for a loaded machine: a call that times out
// spends an attempt), a margin of 1s, so calls start for the first 10s —
// ample for the one-item jobs, while the long one needs 16s of calls at
// the least. The consumer returns before the deadline; the short jobs
// succeed; the long one keeps what it did, is handed back — queued, no
// attempt spent, its message moved out of its owner's slot into a group of
// its own, visible at once — and finishes in the next invocation, each
// item published once.
func TestALongJobDoesNotTimeOutItsBatchMates(t *testing.T) {
	t.Parallel()
	b := awstest.Setup(t, map[string]string{"CONVEYOR_CALL_TIMEOUT": "3s", "CONVEYOR_DEADLINE_MARGIN": "1s"}, stack.Options{DisablePollers: true})
	app := b.Stack.App
	owner := func(name string) string {
		tok := b.Token(name, "user", "pro")
		b.Connect(tok)
		return tok
	}
	long := submit(b, owner("u-budget"), "long", 20)
	mates := []string{submit(b, owner("u-mate-1"), "mate 1", 1), submit(b, owner("u-mate-2"), "mate 2", 1)}
	set := b.Stack.Simulator.Settings()
	set.LatencyMs = 800
	if !b.Stack.Simulator.SetSettings(set) {
		t.Fatal("simulator settings refused")
	}

	ms := queued(t, b, job.Medium)
	if len(ms) != 3 {
		t.Fatalf("%d messages, want 3", len(ms))
	}
	url := app.Config.QueueURLs[job.Medium]
	name := url[strings.LastIndex(url, "/")+1:]
	var ev events.SQSEvent
	for i, m := range ms {
		body, _ := json.Marshal(m.Message)
		ev.Records = append(ev.Records, events.SQSMessage{MessageId: fmt.Sprint("m", i), ReceiptHandle: m.receipt, Body: string(body),
			EventSourceARN: "arn:aws:sqs:us-east-1:123456789012:" + name,
			Attributes:     map[string]string{"MessageGroupId": m.group, "ApproximateReceiveCount": "1"}})
	}
	deadline := time.Now().Add(14 * time.Second)
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	pub := app.Publisher
	resp := handler.ConsumeMessages(ctx, ev, app.Clients.SQS, handler.NewQueueURLs(url), app.Logger, func(queue.Message) bool { return true },
		func(ctx context.Context, msg queue.Message, receives int) (handler.Outcome, error) {
			v, err := pub.Run(ctx, worker.Delivery{JobID: msg.JobID, Owner: msg.Owner, Uploads: msg.Uploads, Receives: receives})
			return handler.Outcome{Done: v.Done, RetryIn: v.RetryIn}, err
		})
	if over := time.Since(deadline); over >= 0 {
		t.Errorf("the batch ended %s after the invocation's deadline", over)
	}
	// The event source mapping deletes what the batch did not report
	// failed: in a FIFO queue a message left in flight would hold its
	// group (the owner's slot) until its visibility timeout.
	failed := map[string]bool{}
	for _, f := range resp.BatchItemFailures {
		failed[f.ItemIdentifier] = true
	}
	for i, r := range ev.Records {
		if !failed[r.MessageId] {
			if _, err := app.Clients.SQS.DeleteMessage(context.Background(), &sqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: aws.String(ms[i].receipt)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	get := func(id string) job.Job {
		j, err := app.Store.GetJob(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		return j
	}
	for _, id := range mates {
		if j := get(id); j.Status != job.Succeeded {
			t.Errorf("batch-mate %s: %s, want succeeded", id, j.Status)
		}
	}
	j := get(long)
	if j.Status != job.Queued || j.Attempts != 0 {
		t.Errorf("long job: %s after %d attempts, want queued with no attempt spent", j.Status, j.Attempts)
	}
	done := 0
	for _, it := range j.Items {
		if it.Status != job.ItemPending {
			done++
		}
	}
	if done == 0 || done == len(j.Items) {
		t.Errorf("long job: %d of %d items done in the first invocation, want some (kept) and not all", done, len(j.Items))
	}
	if len(resp.BatchItemFailures) != 0 {
		t.Errorf("batch failures %+v, want none (the long job's message moved out of its owner's slot)", resp.BatchItemFailures)
	}

	set.LatencyMs = 0
	b.Stack.Simulator.SetSettings(set)
	// Its moved copy is delivered at once (it may come while the job is
	// not yet claimable, and wait again): the deliveries run until the job
	// is done.
	b.Eventually(func() bool {
		for _, m := range queued(t, b, job.Medium) {
			m.run(t, b, pub)
		}
		j := get(long)
		return j.Finished()
	}, "the long job did not finish on its next deliveries")
	if j := checkPublishedOnce(t, b, long); j.Status != job.Succeeded || j.Attempts != 1 {
		t.Errorf("long job after the next invocation: %s after %d attempts, want succeeded after 1", j.Status, j.Attempts)
	}
}

// submitHTTP submits an http job that POSTs to url and returns its id.
func submitHTTP(b *awstest.Bundle, tok, url string) string {
	b.T.Helper()
	r := b.Must(b.Call("POST", "/v1/jobs", tok, map[string]any{"type": "http",
		"params": map[string]any{"method": "POST", "url": url, "timeoutMs": 2000}}), 201)
	return r.Body["id"].(string)
}

// TestARunWhoseOwnLeaseLapsedTakesItBack: the run's own lease lapses
// before its call (on a loaded machine, a heartbeat's write that lands too
// late; here the simulated clock jumps past the lease right after the
// claim) while nobody else took the job. The check before the call is not
// a loss: its conditional write takes the lease back, the request is sent
// and the job succeeds — not left running under a lapsed lease, its
// message deleted, until recovery finds it stuck.
func TestARunWhoseOwnLeaseLapsedTakesItBack(t *testing.T) {
	t.Parallel()
	clk := newClock()
	var jumped atomic.Bool
	// A heartbeat of a minute: none is written during the run, so the
	// lease the check reads is the claim's.
	b := awstest.Setup(t, map[string]string{"CONVEYOR_HEARTBEAT_INTERVAL": "1m"}, stack.Options{DisablePollers: true, Now: clk.Now,
		Crash: func(point string, _ *job.Job) error {
			if point == worker.AfterClaim && jumped.CompareAndSwap(false, true) {
				clk.Advance(4 * time.Minute) // past the claim's lease of three heartbeats
			}
			return nil
		}})
	var calls atomic.Int32
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		calls.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(target.Close)
	app := b.Stack.App
	id := submitHTTP(b, b.Token("u-lapsed", "user", "pro"), target.URL+"/hook")

	v, err := app.Publisher.Run(context.Background(), worker.Delivery{JobID: id, Receives: 1})
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	if !jumped.Load() {
		t.Fatal("the clock never jumped: the run did not claim the job")
	}
	j, err := app.Store.GetJob(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if j.Status != job.Succeeded || j.Attempts != 1 || j.LeaseOwner != "" || calls.Load() != 1 {
		t.Errorf("after the run (verdict %+v): %s, %d attempts, lease owner %q, %d requests; want succeeded, 1, none, 1",
			v, j.Status, j.Attempts, j.LeaseOwner, calls.Load())
	}
}

// TestARunThatCannotRecordItsOutcomeLeavesTheJobClaimable: the run's
// request fails and its invocation ends before the failure is written
// (the target cancels the delivery's context as it answers). The job is
// not held for a lease by a run that is over: it is back in the queue,
// the attempt spent, its message due again at once, and the next
// delivery runs it.
func TestARunThatCannotRecordItsOutcomeLeavesTheJobClaimable(t *testing.T) {
	t.Parallel()
	b := awstest.Setup(t, map[string]string{"CONVEYOR_HEARTBEAT_INTERVAL": "1m"}, stack.Options{DisablePollers: true})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var calls atomic.Int32
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if calls.Add(1) == 1 {
			cancel() // the invocation ends while the target answers
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(target.Close)
	app := b.Stack.App
	id := submitHTTP(b, b.Token("u-unrecorded", "user", "pro"), target.URL+"/hook")
	get := func() job.Job {
		t.Helper()
		j, err := app.Store.GetJob(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		return j
	}

	v, err := app.Publisher.Run(ctx, worker.Delivery{JobID: id, Receives: 1})
	if err != nil || v.Done || v.RetryIn <= 0 || v.RetryIn > time.Second {
		t.Errorf("run whose failure was not written: verdict %+v, %v; want its message back within a second", v, err)
	}
	if j := get(); j.Status != job.Queued || j.LeaseOwner != "" || j.LeaseUntil != nil || j.Attempts != 1 || calls.Load() != 1 {
		t.Fatalf("after the run: %s, lease %q until %v, %d attempts, %d requests; want queued, no lease, 1 attempt spent, 1 request",
			j.Status, j.LeaseOwner, j.LeaseUntil, j.Attempts, calls.Load())
	}

	v, err = app.Publisher.Run(context.Background(), worker.Delivery{JobID: id, Receives: 2})
	if err != nil || !v.Done {
		t.Errorf("next delivery: verdict %+v, %v; want done", v, err)
	}
	if j := get(); j.Status != job.Succeeded || j.Attempts != 2 || calls.Load() != 2 {
		t.Errorf("after the next delivery: %s, %d attempts, %d requests; want succeeded, 2, 2", j.Status, j.Attempts, calls.Load())
	}
}

// lateWrite is a kind whose attempt does its work and then writes its
// success under a context that has already ended: the invocation's budget
// ran out during the write.
type lateWrite struct{}

func (lateWrite) Name() string                                                { return "late-write" }
func (lateWrite) Phases() []string                                            { return []string{"work"} }
func (lateWrite) Normalize(s job.Spec) (job.Spec, error)                      { return s, nil }
func (lateWrite) Validate(context.Context, job.ValidationEnv, job.Spec) error { return nil }
func (lateWrite) Prepare(context.Context, string, job.Spec, *job.Job) error   { return nil }

func (lateWrite) Work(ctx context.Context, a job.Run) error {
	ended, end := context.WithCancel(ctx)
	end()
	return a.Save(ended, func(j *job.Job) {
		j.CompletePhase("work", "done", a.Now())
		_ = j.Apply(job.Succeed, a.Now())
	})
}

// TestASuccessWhoseWriteFailedIsRecordedAsTheAttemptsFailure: the kind's
// write of its success fails, and its Work returns that error. The run
// records the attempt's failure from the job as the table holds it — a
// temporary error, the job retrying, its lease let go — not from the
// success it could not write.
func TestASuccessWhoseWriteFailedIsRecordedAsTheAttemptsFailure(t *testing.T) {
	t.Parallel()
	b := awstest.Setup(t, map[string]string{"CONVEYOR_HEARTBEAT_INTERVAL": "1m"}, stack.Options{DisablePollers: true, Kinds: []job.Kind{lateWrite{}}})
	app := b.Stack.App
	r := b.Must(b.Call("POST", "/v1/jobs", b.Token("u-late", "user", "pro"), map[string]any{"type": "late-write", "params": map[string]any{}}), 201)
	id := r.Body["id"].(string)

	v, err := app.Publisher.Run(context.Background(), worker.Delivery{JobID: id, Receives: 1})
	if err != nil || v.Done {
		t.Errorf("run: verdict %+v, %v; want the message back for a retry", v, err)
	}
	j, err := app.Store.GetJob(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if j.Status != job.Queued || j.Error == nil || j.Attempts != 1 || j.LeaseOwner != "" || j.FinishedAt != nil {
		t.Errorf("after the run: %s, error %+v, %d attempts, lease owner %q, finished %v; want queued to retry with the write's error, 1 attempt, no lease",
			j.Status, j.Error, j.Attempts, j.LeaseOwner, j.FinishedAt)
	}
}
