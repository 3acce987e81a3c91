package stack_test

import (
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/conveyor/conveyor/internal/config"
	"github.com/conveyor/conveyor/localstack/awstest"
	"github.com/conveyor/conveyor/localstack/stack"
)

// TestAnOwnerHammeringTheAPIIsThrottledAndAnotherIsNot: under the default
// rates (free: 5 a second, bursts of 60), 400 creating requests of one
// free owner, eight at a time, get 201 for its burst and what refills,
// and 429 for the rest, each with a Retry-After of whole seconds and the
// error naming the limit; another free owner's request in the same second
// gets 201.
func TestAnOwnerHammeringTheAPIIsThrottledAndAnotherIsNot(t *testing.T) {
	t.Parallel()
	b := awstest.Setup(t, map[string]string{config.VarRateLimits: config.RateLimitsDefault}, stack.Options{})
	script, other := b.Token("u-script", "user", "free"), b.Token("u-other", "user", "free")
	// A job a week ahead: created (201), run by no one during the test;
	// each body its own, so that none is the same as an active job (200).
	at := time.Now().Add(7 * 24 * time.Hour).UTC().Format(time.RFC3339)
	jobOf := func(owner string, n int) map[string]any {
		return map[string]any{"type": "http", "scheduleAt": at,
			"params": map[string]any{"method": "POST", "url": "https://hooks.example.com/" + owner, "body": fmt.Sprint("request ", n)}}
	}
	const total, conc = 400, 8
	var (
		mu       sync.Mutex
		statuses = map[int]int{}
		first429 = make(chan struct{})
		once     sync.Once
		bad      []string
	)
	start := time.Now()
	var wg sync.WaitGroup
	next := make(chan int, total)
	for i := range total {
		next <- i
	}
	close(next)
	for range conc {
		wg.Go(func() {
			for i := range next {
				r := b.Call("POST", "/v1/jobs", script, jobOf("script", i))
				mu.Lock()
				statuses[r.Status]++
				mu.Unlock()
				if r.Status != 429 {
					continue
				}
				once.Do(func() { close(first429) })
				e, _ := r.Body["error"].(map[string]any)
				limit, _ := e["limit"].(map[string]any)
				secs, err := strconv.Atoi(r.Header.Get("Retry-After"))
				if err != nil || secs < 1 || e["code"] != "throttled" || e["message"] == "" ||
					limit["value"] != float64(5) || limit["period"] != "1s" || limit["burst"] != float64(60) {
					mu.Lock()
					bad = append(bad, fmt.Sprintf("Retry-After %q: %s", r.Header.Get("Retry-After"), r.Raw))
					mu.Unlock()
				}
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	// Another owner, in the same second as the script's first 429.
	select {
	case <-first429:
	case <-done:
		t.Error("the script's requests ended with no 429")
	}
	r := b.Call("POST", "/v1/jobs", other, jobOf("other", 0))
	<-done
	elapsed := time.Since(start)
	if r.Status != 201 {
		t.Errorf("another owner's request while the script is throttled: %d %s, want 201", r.Status, r.Raw)
	}
	if len(bad) > 0 {
		t.Errorf("%d of the 429s lack a Retry-After of whole seconds or the error's code and limit, e.g. %s", len(bad), bad[0])
	}
	// The bound: burst + rate × (elapsed + a lease's second).
	bound := 60 + int(5*(elapsed+time.Second).Seconds())
	if statuses[201] < 60 || statuses[201] > bound || statuses[429] == 0 || statuses[201]+statuses[429] != total {
		t.Errorf("the script's %d requests in %v: %v; want at least its burst (60) and at most %d created, the rest 429", total, elapsed.Round(time.Millisecond), statuses, bound)
	}
	t.Logf("the script's %d requests in %v: %v (bound on 201: %d)", total, elapsed.Round(time.Millisecond), statuses, bound)
}

// TestAnOwnersRateIsOneAcrossTheFunctions: the uploads and schedules
// functions admit a user's request by the same bucket as the api
// function's (its item in the table), so an owner that emptied its bucket
// on jobs is refused a presigned upload (429 with Retry-After) until a
// unit comes due, and another owner's is signed. At 1 a second, a unit
// comes due a second after the bucket was seen empty: a request later
// than that may be served, and the test says so rather than fail on a
// loaded machine's slowness.
func TestAnOwnersRateIsOneAcrossTheFunctions(t *testing.T) {
	t.Parallel()
	b := awstest.Setup(t, map[string]string{config.VarRateLimits: "free=1/20"}, stack.Options{})
	script, other := b.Token("u-spender", "user", "free"), b.Token("u-quiet", "user", "free")
	sign := map[string]any{"filename": "a.png", "contentType": "image/png", "size": 1024}
	var empty time.Time
	for i := range 100 { // past its burst, on the api function
		if r := b.Call("GET", fmt.Sprintf("/v1/jobs?limit=%d", i%200+1), script, nil); r.Status == 429 {
			empty = time.Now()
			break
		}
	}
	if empty.IsZero() {
		t.Fatal("100 requests at 1 a second with a burst of 20 were never refused")
	}
	refused := func(what string, r awstest.Response) {
		t.Helper()
		if since := time.Since(empty); since >= time.Second {
			t.Logf("%s came %v after the bucket was seen empty: a unit may have come due (%d)", what, since, r.Status)
			return
		}
		secs, err := strconv.Atoi(r.Header.Get("Retry-After"))
		if e, _ := r.Body["error"].(map[string]any); r.Status != 429 || err != nil || secs < 1 || e["code"] != "throttled" {
			t.Errorf("%s right after the owner's bucket emptied on jobs: %d Retry-After %q %s, want 429 throttled with Retry-After", what, r.Status, r.Header.Get("Retry-After"), r.Raw)
		}
	}
	refused("a sign", b.Call("POST", "/v1/uploads/sign", script, sign))
	if r := b.Call("POST", "/v1/uploads/sign", other, sign); r.Status != 201 {
		t.Errorf("another owner's sign: %d %s, want 201", r.Status, r.Raw)
	}
}
