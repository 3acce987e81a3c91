package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/conveyor/conveyor/internal/accounts"
	"github.com/conveyor/conveyor/internal/apiclient"
	"github.com/conveyor/conveyor/internal/httpapi"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/submission"
	"github.com/conveyor/conveyor/localstack/simulator"
)

// runSeed is the seed subcommand: it fills the running local stack (the
// one CONVEYOR_API_URL and CONVEYOR_JWT_SECRET name, as .local/env sets
// them) with jobs of every kind and shape, for a fuzzer or a person to
// read a stack that holds thousands of jobs: publish jobs (some scheduled
// a week ahead, some cancelled), and http jobs with and without headers,
// bodies, methods and timeouts. The http jobs name https URLs, as every
// deployed environment requires, on the simulator's host (which serves
// plain http, so they fail their calls and end failed after their
// retries): what the stack then holds and shows is what a deployed one
// can. Progress goes to stderr.
func runSeed(args []string) int { return seed(args, os.Getenv, os.Stderr) }

func seed(args []string, getenv func(string) string, stderr io.Writer) int {
	fs := flag.NewFlagSet("seed", flag.ContinueOnError)
	n := fs.Int("jobs", 2000, "jobs to submit")
	users := fs.Int("users", 20, "owners the jobs are spread over (each connected, with one upload)")
	conc := fs.Int("concurrency", 8, "requests at once")
	if code, done := parse(fs, args); done {
		return code
	}
	api, secret, simURL := getenv("CONVEYOR_API_URL"), getenv("CONVEYOR_JWT_SECRET"), getenv("CONVEYOR_SIMULATOR_URL")
	if api == "" || secret == "" || simURL == "" {
		fmt.Fprintln(stderr, "seed: CONVEYOR_API_URL, CONVEYOR_JWT_SECRET and CONVEYOR_SIMULATOR_URL are unset: source the stack's .local/env (set -a; . .local/env)")
		return 2
	}
	if *n < 0 || *users < 1 || *conc < 1 {
		fmt.Fprintln(stderr, "seed: -jobs ≥ 0, -users ≥ 1, -concurrency ≥ 1")
		return 2
	}
	u, err := url.Parse(simURL)
	if err != nil || u.Host == "" {
		fmt.Fprintf(stderr, "seed: CONVEYOR_SIMULATOR_URL %q is not a URL\n", simURL)
		return 2
	}
	sim := "https://" + u.Host
	ctx := context.Background()
	start := time.Now()
	owners := make([]owner, *users)
	for i := range owners {
		o, err := newOwner(ctx, api, []byte(secret), fmt.Sprintf("seed-%02d", i), []string{"free", "pro", "enterprise"}[i%3])
		if err != nil {
			fmt.Fprintf(stderr, "seed: owner %d: %v\n", i, err)
			return 1
		}
		owners[i] = o
	}
	var done, failed atomic.Int64
	var firstErr atomic.Value
	work := make(chan int)
	var wg sync.WaitGroup
	for range *conc {
		wg.Go(func() {
			for i := range work {
				if err := seedJob(ctx, owners[i%len(owners)], i, sim); err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err)
				}
				if d := done.Add(1); d%250 == 0 {
					fmt.Fprintf(stderr, "seed: %d of %d jobs (%.0f/s)\n", d, *n, float64(d)/time.Since(start).Seconds())
				}
			}
		})
	}
	for i := range *n {
		work <- i
	}
	close(work)
	wg.Wait()
	fmt.Fprintf(stderr, "seed: %d jobs over %d owners in %.1fs, %d refused\n", *n, len(owners), time.Since(start).Seconds(), failed.Load())
	if err, _ := firstErr.Load().(error); err != nil {
		fmt.Fprintf(stderr, "seed: the first refusal: %v\n", err)
		return 1
	}
	return 0
}

// owner is one seeded user: a client with its token, its account
// connected, and one confirmed upload its publish jobs name.
type owner struct {
	c      *apiclient.Client
	upload string
}

func newOwner(ctx context.Context, api string, secret []byte, sub, plan string) (owner, error) {
	tok, err := httpapi.Mint(secret, httpapi.Claims{Subject: sub, Role: httpapi.RoleUser, Plan: plan, ExpiresAt: time.Now().Add(24 * time.Hour)})
	if err != nil {
		return owner{}, err
	}
	c := apiclient.New(api, apiclient.WithToken(tok))
	if err := c.Connect(ctx, accounts.ConnectRequest{Provider: "deviantart", RefreshToken: fmt.Sprintf("rt-%s-%d", sub, time.Now().UnixNano())}); err != nil {
		return owner{}, fmt.Errorf("connecting: %w", err)
	}
	u, err := c.Upload(ctx, "seed.png", "image/png", simulator.PNG(8))
	if err != nil {
		return owner{}, fmt.Errorf("uploading: %w", err)
	}
	return owner{c: c, upload: u.ID}, nil
}

// seedJob submits the i-th job: its shape follows i, so that every shape
// is there in proportion whatever the count.
func seedJob(ctx context.Context, o owner, i int, sim string) error {
	raw := func(v any) json.RawMessage { b, _ := json.Marshal(v); return b }
	publish := submission.SubmitRequest{Type: "publish", Items: []submission.SubmitItem{{UploadID: o.upload}}}
	var req submission.SubmitRequest
	switch i % 10 {
	case 0, 1, 2:
		req = publish
		req.Params = raw(map[string]any{"title": fmt.Sprintf("Seed %d", i), "description": "Описание работы " + fmt.Sprint(i), "tags": []string{"seed", fmt.Sprint("t", i%7)}})
	case 3:
		req = publish
		req.Params = raw(map[string]any{"title": fmt.Sprintf("Scheduled %d", i)})
		at := time.Now().Add(7 * 24 * time.Hour).Add(time.Duration(i) * time.Second)
		req.ScheduleAt = &at
	case 4:
		req = publish
		req.Params = raw(map[string]any{"title": fmt.Sprintf("Cancelled %d", i)})
		at := time.Now().Add(24 * time.Hour)
		req.ScheduleAt = &at
	case 5:
		req = submission.SubmitRequest{Type: "http", Params: raw(map[string]any{"url": sim + "/healthz?seed=" + fmt.Sprint(i)})}
	case 6:
		req = submission.SubmitRequest{Type: "http", Params: raw(map[string]any{"method": "get", "url": fmt.Sprint(sim, "/healthz?seed=", i), "timeoutMs": 0, "expectStatus": []int{200}})}
	case 7:
		req = submission.SubmitRequest{Type: "http", Params: raw(map[string]any{"method": "POST", "url": sim + "/healthz", "body": fmt.Sprintf(`{"n":%d}`, i),
			"headers": map[string]string{"Authorization": "Bearer seed-secret", "Content-Type": "application/json"}, "timeoutMs": 5000})}
	case 8:
		req = submission.SubmitRequest{Type: "http", Params: raw(map[string]any{"method": "PUT", "url": fmt.Sprint(sim, "/no-such-path/", i), "expectStatus": []int{201}})}
	default:
		req = publish
		req.Params = raw(map[string]any{"title": fmt.Sprintf("Webhooked %d", i)})
		req.WebhookURL = sim + "/hook"
	}
	// Each request differs from every other (an owner's identical active
	// request is the same job: 200, not another).
	var j job.Job
	err := whenThrottled(ctx, func() (err error) { j, _, err = o.c.SubmitJob(ctx, req); return err })
	if err != nil {
		return fmt.Errorf("job %d (%s): %w", i, req.Type, err)
	}
	if i%10 == 4 {
		if err := whenThrottled(ctx, func() error { _, err := o.c.CancelJob(ctx, j.ID); return err }); err != nil && !errors.Is(err, context.Canceled) {
			return fmt.Errorf("cancelling job %d: %w", i, err)
		}
	}
	return nil
}

// whenThrottled calls call again after the answer's Retry-After while the
// API answers 429 (the owner's request rate, docs/limits.md: a stack on
// the default rates seeds at its owners' rates), at most 60 times. A 429
// is answered before the route runs, so calling again repeats nothing.
func whenThrottled(ctx context.Context, call func() error) error {
	for range 60 {
		err := call()
		var ae *apiclient.APIError
		if !errors.As(err, &ae) || ae.Status != http.StatusTooManyRequests {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(max(ae.RetryAfter, time.Second)):
		}
	}
	return call()
}
