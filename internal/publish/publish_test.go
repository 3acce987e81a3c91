package publish_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/conveyor/conveyor/internal/accounts"
	"github.com/conveyor/conveyor/internal/aws/sealer"
	"github.com/conveyor/conveyor/internal/clock"
	"github.com/conveyor/conveyor/internal/envelope"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/publish"
	"github.com/conveyor/conveyor/internal/worker"
	"github.com/conveyor/conveyor/localstack/awstest"
	"github.com/conveyor/conveyor/localstack/simulator"
	"github.com/conveyor/conveyor/localstack/stack"
)

func TestMain(m *testing.M) { awstest.Main(m) }

// newClock returns a simulated clock that starts now.
func newClock() *clock.Simulated { return clock.NewSimulated(time.Now()) }

// submit connects the user (once), uploads n images and submits a job.
func submit(b *awstest.Bundle, tok, title string, n int) string {
	b.T.Helper()
	var items []any
	for i := range n {
		items = append(items, map[string]any{"uploadId": b.Upload(tok, awstest.PNG(b.T, 4+i))})
	}
	r := b.Must(b.Call("POST", "/v1/jobs", tok, map[string]any{"items": items, "params": map[string]any{"title": title}}), 201)
	return r.Body["id"].(string)
}

func publicationsOf(sim *simulator.Server, j job.Job) map[string]int {
	stacks := map[string]bool{}
	for _, it := range j.Items {
		stacks[it.ID] = true
	}
	out := map[string]int{}
	for _, p := range sim.Publications() {
		if stacks[p.Stack] {
			out[p.Stack]++
		}
	}
	return out
}

func TestTemporaryErrorsAreRetriedToSuccess(t *testing.T) {
	t.Parallel()
	b := awstest.Setup(t, nil, stack.Options{})
	tok := b.Token("u-retry", "user", "enterprise")
	b.Connect(tok)
	b.Stack.Simulator.AddFault(simulator.Fault{Path: "/api/v1/oauth2/stash/submit", Status: 500, Count: 2})
	id := submit(b, tok, "flaky", 1)
	r := b.WaitStatus(tok, id, "succeeded")
	if got := r.Body["attempts"].(float64); got != 3 {
		t.Errorf("attempts = %v, want 3 (two 500s, then success)", got)
	}
	if r.Body["error"] != nil {
		t.Errorf("a succeeded job keeps an error: %v", r.Body["error"])
	}
}

func TestPermanentErrorFailsAtOnce(t *testing.T) {
	t.Parallel()
	b := awstest.Setup(t, nil, stack.Options{})
	tok := b.Token("u-perm", "user", "free")
	b.Connect(tok)
	b.Stack.Simulator.AddFault(simulator.Fault{Path: "/api/v1/oauth2/stash/publish", Status: 400, Count: 1})
	id := submit(b, tok, "refused", 1)
	r := b.WaitStatus(tok, id, "failed")
	e := r.Body["error"].(map[string]any)
	if e["retryable"] != false || e["code"] != "permanent_error" {
		t.Errorf("error = %v, want a permanent, non-retryable one", e)
	}
	if got := r.Body["attempts"].(float64); got != 1 {
		t.Errorf("attempts = %v, want 1", got)
	}
	items := r.Body["items"].([]any)
	if items[0].(map[string]any)["status"] != "failed" {
		t.Errorf("item status = %v, want failed", items[0])
	}
}

// TestCrashAtEveryBoundaryPublishesOnce kills the run at every crash point
// (between phases, and right after each external call returned but before
// its result was stored), then lets the redelivered message run: the job
// succeeds and each item is submitted and published exactly once.
func TestCrashAtEveryBoundaryPublishesOnce(t *testing.T) {
	t.Parallel()
	clk := newClock()
	var mu sync.Mutex
	crashAt := map[string]string{} // job id → crash point (fires once)
	b := awstest.Setup(t, nil, stack.Options{DisablePollers: true, Now: clk.Now, Crash: func(point string, j *job.Job) error {
		mu.Lock()
		defer mu.Unlock()
		if crashAt[j.ID] == point {
			delete(crashAt, j.ID)
			return errors.New("killed")
		}
		return nil
	}})
	tok := b.Token("u-crash", "user", "pro")
	b.Connect(tok)
	pub := b.Stack.App.Publisher
	ctx := context.Background()
	points := []string{worker.AfterClaim, publish.AfterToken, publish.AfterSubmit, publish.AfterUpload, publish.AfterPublish, publish.AfterItem}
	// One item: its upload's write is folded into the publish write, so a
	// crash after the upload leaves nothing recorded but the claim's
	// "tried". Two items: the first upload is written on its own.
	for _, pc := range crossPoints(points, 1, 2) {
		point, items := pc.point, pc.items
		id := submit(b, tok, fmt.Sprintf("crash %s %d", point, items), items)
		mu.Lock()
		crashAt[id] = point
		mu.Unlock()
		before := b.Stack.Simulator.Stats().Calls["/api/v1/oauth2/stash/submit"]["200"]
		if _, err := pub.Run(ctx, worker.Delivery{JobID: id}); !errors.Is(err, worker.ErrCrash) {
			t.Fatalf("%s: first run = %v, want a crash", point, err)
		}
		// The message comes back after the visibility timeout; by then the
		// dead worker's lease has lapsed.
		clk.Advance(time.Minute)
		v, err := pub.Run(ctx, worker.Delivery{JobID: id})
		if err != nil || !v.Done {
			t.Fatalf("%s: redelivery = %+v, %v", point, v, err)
		}
		j, err := b.Stack.App.Store.GetJob(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if j.Status != job.Succeeded {
			t.Errorf("%s: status %s, want succeeded", point, j.Status)
		}
		pubs := publicationsOf(b.Stack.Simulator, j)
		for _, it := range j.Items {
			if pubs[it.ID] != 1 {
				t.Errorf("%s: item %s published %d times, want 1", point, it.ID, pubs[it.ID])
			}
			if it.Output == nil || it.Output.DeviationID == "" {
				t.Errorf("%s: item %s has no output", point, it.ID)
			}
		}
		after := b.Stack.Simulator.Stats().Calls["/api/v1/oauth2/stash/submit"]["200"]
		if after-before != items {
			t.Errorf("%s: %d submits for %d items, want %d", point, after-before, items, items)
		}
	}
}

type crashCase struct {
	point string
	items int
}

// crossPoints pairs every crash point with every item count.
func crossPoints(points []string, counts ...int) []crashCase {
	var out []crashCase
	for _, n := range counts {
		for _, p := range points {
			out = append(out, crashCase{p, n})
		}
	}
	return out
}

func TestSimultaneousDuplicateDeliveriesPublishOnce(t *testing.T) {
	t.Parallel()
	b := awstest.Setup(t, nil, stack.Options{DisablePollers: true})
	tok := b.Token("u-dup", "user", "pro")
	b.Connect(tok)
	id := submit(b, tok, "twice", 1)
	var wg sync.WaitGroup
	verdicts := make([]worker.Verdict, 4)
	for i := range verdicts {
		wg.Go(func() {
			v, err := b.Stack.App.Publisher.Run(context.Background(), worker.Delivery{JobID: id})
			if err != nil {
				t.Errorf("run %d: %v", i, err)
			}
			verdicts[i] = v
		})
	}
	wg.Wait()
	j, err := b.Stack.App.Store.GetJob(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if j.Status != job.Succeeded {
		t.Fatalf("status %s, want succeeded (verdicts %+v), error %+v, items %+v", j.Status, verdicts, j.Error, j.Items)
	}
	if n := publicationsOf(b.Stack.Simulator, j)[j.Items[0].ID]; n != 1 {
		t.Errorf("published %d times, want 1", n)
	}
	if j.Attempts != 1 {
		t.Errorf("attempts = %d, want 1 (duplicates must not claim)", j.Attempts)
	}
}

// TestConcurrentRefreshesRefreshOnce runs eight instances (as eight
// Lambdas, each with its own cache) asking for a token of one account whose
// access token expired: the API sees one refresh, all get the same token,
// and the rotated refresh token is what is stored.
func TestConcurrentRefreshesRefreshOnce(t *testing.T) {
	t.Parallel()
	b := awstest.Setup(t, nil, stack.Options{DisablePollers: true})
	tok := b.Token("u-refresh", "user", "pro")
	original := "rt-original-" + fmt.Sprint(time.Now().UnixNano())
	b.Must(b.Call("PUT", "/v1/account/connection", tok, map[string]any{"provider": "deviantart", "refreshToken": original,
		"accessToken": "stale", "expiresAt": time.Now().Add(-time.Hour).Format(time.RFC3339)}), 204)
	app := b.Stack.App
	sealer := sealer.New(app.Clients.KMS, app.Config.KMSKeyID)
	before := b.Stack.Simulator.Stats().Refreshes
	tokens := make([]string, 8)
	var wg sync.WaitGroup
	for i := range tokens {
		wg.Go(func() {
			svc := accounts.New(accounts.Config{Store: app.Store, Sealer: sealer, Refresher: app.API, Worker: fmt.Sprintf("lambda-%d", i)})
			got, err := svc.AccessToken(context.Background(), "u-refresh")
			if err != nil {
				t.Errorf("instance %d: %v", i, err)
			}
			tokens[i] = got
		})
	}
	wg.Wait()
	if n := b.Stack.Simulator.Stats().Refreshes - before; n != 1 {
		t.Errorf("refresh calls = %d, want 1", n)
	}
	for i, tk := range tokens {
		if tk == "" || tk != tokens[0] {
			t.Errorf("instance %d got %q, instance 0 got %q", i, tk, tokens[0])
		}
	}
	acct, err := app.Store.GetAccount(context.Background(), "u-refresh", accounts.Provider)
	if err != nil {
		t.Fatal(err)
	}
	rt, err := sealer.Open(context.Background(), acct.Refresh, map[string]string{"user": "u-refresh", "provider": accounts.Provider, "token": "refresh", envelope.ContextPurpose: envelope.PurposeAccountToken})
	if err != nil {
		t.Fatal(err)
	}
	if string(rt) == original || len(rt) == 0 {
		t.Errorf("stored refresh token was not rotated")
	}
	if acct.LeaseOwner != "" {
		t.Errorf("refresh lease not released: %q", acct.LeaseOwner)
	}
}

// TestFailingJobDoesNotHoldBackAnother: job A is told by the API to come
// back in 5 minutes; job B (another user: A's token is flagged by its 429),
// submitted after, finishes while A still waits — each job is its own
// message group.
func TestFailingJobDoesNotHoldBackAnother(t *testing.T) {
	t.Parallel()
	b := awstest.Setup(t, nil, stack.Options{})
	tok := b.Token("u-groups", "user", "free")
	b.Connect(tok)
	b.Stack.Simulator.AddFault(simulator.Fault{Path: "/api/v1/oauth2/stash/publish", Status: 429, RetryAfter: 300, Count: 1})
	a := submit(b, tok, "first, throttled", 1)
	b.Eventually(func() bool {
		j, err := b.Stack.App.Store.GetJob(context.Background(), a)
		return err == nil && j.Status == job.Queued && j.RetryAt != nil
	}, "job A to back off")
	other := b.Token("u-groups-2", "user", "free")
	b.Connect(other)
	second := submit(b, other, "second", 1)
	b.WaitStatus(other, second, "succeeded")
	ja, err := b.Stack.App.Store.GetJob(context.Background(), a)
	if err != nil {
		t.Fatal(err)
	}
	jb, err := b.Stack.App.Store.GetJob(context.Background(), second)
	if err != nil {
		t.Fatal(err)
	}
	if ja.Status != job.Queued || ja.RetryAt == nil || jb.FinishedAt == nil || !jb.FinishedAt.Before(*ja.RetryAt) {
		t.Errorf("job A = %s retryAt %v, job B finished %v; want B done while A still waits out its Retry-After", ja.Status, ja.RetryAt, jb.FinishedAt)
	}
	if ja.Error == nil || !ja.Error.Retryable {
		t.Errorf("job A error = %+v, want a retryable one", ja.Error)
	}
}

// TestRateLimitStormOpensTheCircuitAndNoJobFails: a 429 storm opens the
// breaker; while open the API hears (almost) nothing — only a probe per
// cooldown — no job fails or spends attempts on it, and every job succeeds
// once the storm ends.
func TestRateLimitStormOpensTheCircuitAndNoJobFails(t *testing.T) {
	t.Parallel()
	// The release and recovery sweeps run every second here (every minute
	// and every five in AWS) and take back a queued job after 3 s without
	// a receive (20 minutes in AWS): however a job's message travels
	// through the storm — moved out of its owner's slot, delayed, parked,
	// or once lost on the way (a failure of this test, under a loaded
	// suite, saw a snoozed job's message never come back) — the job's end
	// waits on the sweeps' seconds, not on their minutes.
	b := awstest.Setup(t, map[string]string{
		"CONVEYOR_BREAKER_THRESHOLD": "3", "CONVEYOR_BREAKER_WINDOW": "30s",
		"CONVEYOR_BREAKER_COOLDOWN": "2s", "CONVEYOR_BREAKER_CACHE": "100ms", "CONVEYOR_MAX_ATTEMPTS": "3",
		"CONVEYOR_SCHEDULE_INTERVAL": "1s", "CONVEYOR_RECOVERY_INTERVAL": "1s", "CONVEYOR_STUCK_AFTER": "3s",
	}, stack.Options{})
	tok := b.Token("u-storm", "user", "corporate")
	b.Connect(tok)
	sim := b.Stack.Simulator
	sim.AddFault(simulator.Fault{Path: "/api/v1/oauth2/stash/", Status: 429, RetryAfter: 2})
	var jobs []string
	for i := range 6 {
		jobs = append(jobs, submit(b, tok, fmt.Sprintf("storm %d", i), 1))
	}
	stashCalls := func() int {
		n := 0
		for path, byStatus := range sim.Stats().Calls {
			if len(path) > len("/api/v1/oauth2/stash") && path[:len("/api/v1/oauth2/stash")] == "/api/v1/oauth2/stash" {
				for _, c := range byStatus {
					n += c
				}
			}
		}
		return n
	}
	b.Eventually(func() bool {
		list, _ := b.Stack.App.Breaker.List(context.Background())
		for _, r := range list {
			if r.State == "open" {
				return true
			}
		}
		return false
	}, "a breaker to open")
	// Calls admitted before the circuit opened may still be on their way:
	// start counting once the API has heard nothing for a while (how long
	// that takes does not decide the outcome).
	last, quietSince := stashCalls(), time.Now()
	b.Eventually(func() bool {
		if n := stashCalls(); n != last {
			last, quietSince = n, time.Now()
		}
		return time.Since(quietSince) > 500*time.Millisecond
	}, "the calls admitted before the circuit opened to end")
	before, began := stashCalls(), time.Now()
	b.Eventually(func() bool { return time.Since(began) >= 3*time.Second }, "an observation window")
	during, window := stashCalls()-before, time.Since(began)
	// The code's guarantee, for the window as measured: while open, each
	// key lets one probe through per cooldown (the token's 429s open only
	// its own circuit; the host's, were it open, would add its probe).
	const keys, cooldown = 2, 2 * time.Second
	if limit := keys * (int(window/cooldown) + 1); during > limit {
		t.Errorf("%d calls reached the API in %s while the circuit was open; the probes allow at most %d", during, window.Round(time.Millisecond), limit)
	}
	sim.ClearFaults()
	for _, id := range jobs {
		r := b.WaitStatus(tok, id, "succeeded")
		if a := r.Body["attempts"].(float64); a > 3 {
			t.Errorf("job %s spent %v attempts", id, a)
		}
	}
	t.Logf("calls that reached the API while open: %d in %s", during, window.Round(time.Millisecond))
}

// TestPauseHoldsOnEveryCopyOfTheTierFlag pauses a tier, then lets a
// dozen of its jobs be delivered: their claims check different copies of
// the tier's flag (store.TierFlagShards), and every one parks instead of
// starting. After the resume they all run.
func TestPauseHoldsOnEveryCopyOfTheTierFlag(t *testing.T) {
	t.Parallel()
	b := awstest.Setup(t, nil, stack.Options{DisablePollers: true})
	tok := b.Token("u-pause-copies", "user", "free") // the low tier
	b.Connect(tok)
	ctx := context.Background()
	ids := make([]string, 12)
	for i := range ids {
		ids[i] = submit(b, tok, fmt.Sprintf("paused %d", i), 1)
	}
	admin := b.Token("ops", "admin", "pro")
	b.Must(b.Call("POST", "/v1/admin/tiers/low/pause", admin, nil), 200)
	st := b.Stack.App.Store
	for _, id := range ids {
		v, err := b.Stack.App.Publisher.Run(ctx, worker.Delivery{JobID: id})
		if err != nil {
			t.Fatal(err)
		}
		j, err := st.GetJob(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if j.Status != job.Queued || j.Waiting != "paused" || j.Attempts != 0 {
			t.Errorf("job %s delivered while its tier is paused: verdict %+v, status %s, waiting %q, attempts %d", id, v, j.Status, j.Waiting, j.Attempts)
		}
	}
	if pubs := b.Stack.Simulator.Stats().Calls["/api/v1/oauth2/stash/submit"]["200"]; pubs != 0 {
		t.Errorf("%d submits while the tier was paused", pubs)
	}
	b.Must(b.Call("POST", "/v1/admin/tiers/low/resume", admin, nil), 200)
	for _, id := range ids {
		// The resume released them at once (sent again; run directly here).
		if j, _ := st.GetJob(ctx, id); j.Waiting != "" || j.Wait != nil {
			t.Errorf("job %s still parked after the resume: waiting %q wait %+v", id, j.Waiting, j.Wait)
		}
		if _, err := b.Stack.App.Publisher.Run(ctx, worker.Delivery{JobID: id}); err != nil {
			t.Fatal(err)
		}
		if j, _ := st.GetJob(ctx, id); j.Status != job.Succeeded {
			t.Errorf("job %s after the resume: %s", id, j.Status)
		}
	}
}
