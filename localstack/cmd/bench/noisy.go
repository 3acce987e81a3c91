package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/conveyor/conveyor/internal/accounts"
	"github.com/conveyor/conveyor/internal/apiclient"
	"github.com/conveyor/conveyor/internal/httpapi"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/publish"
	"github.com/conveyor/conveyor/localstack/simulator"
)

// noisyResult is the noisy-neighbour figure: a quiet owner's submit→finish
// alone, and again while a noisy owner of the same tier has a backlog.
type noisyResult struct {
	NoisyJobs    int     `json:"noisy_jobs"`
	QuietJobs    int     `json:"quiet_jobs"`
	SimLatencyMs float64 `json:"sim_latency_ms"`
	AloneP50     float64 `json:"quiet_alone_p50_ms"`
	AloneP95     float64 `json:"quiet_alone_p95_ms"`
	NoisyP50     float64 `json:"quiet_with_noisy_p50_ms"`
	NoisyP95     float64 `json:"quiet_with_noisy_p95_ms"`
	NoisyLeft    int     `json:"noisy_jobs_still_queued_after"`
}

// noisyPhase measures fairness inside a tier: two free owners (the low
// tier); the quiet one submits its jobs one after another and waits for
// each, first alone, then after the noisy one queued noisy jobs at once.
// The simulator's latency makes each job take a while, so the noisy
// backlog lasts.
func (e *env) noisyPhase(ctx context.Context, noisy, quiet int, latency time.Duration) (noisyResult, error) {
	r := noisyResult{NoisyJobs: noisy, QuietJobs: quiet, SimLatencyMs: ms(latency)}
	s := e.s
	set := s.Simulator.Settings()
	set.LatencyMs = int(latency / time.Millisecond)
	if !s.Simulator.SetSettings(set) {
		return r, fmt.Errorf("the simulator refused latency %s", latency)
	}
	defer func() { set.LatencyMs = 0; s.Simulator.SetSettings(set) }()
	qc, qup, err := e.freeOwner(ctx, "bench-quiet")
	if err != nil {
		return r, err
	}
	nc, nup, err := e.freeOwner(ctx, "bench-noisy")
	if err != nil {
		return r, err
	}
	progress("noisy neighbour: %d quiet jobs alone (simulator latency %s)", quiet, latency)
	alone, err := timeQuietJobs(ctx, qc, qup, quiet, "alone")
	if err != nil {
		return r, err
	}
	progress("noisy neighbour: %d noisy jobs queued at once, then %d quiet jobs", noisy, quiet)
	ids, err := queueNoisyJobs(ctx, nc, nup, noisy)
	if err != nil {
		return r, err
	}
	with, err := timeQuietJobs(ctx, qc, qup, quiet, "beside a backlog")
	if err != nil {
		return r, err
	}
	if r.NoisyLeft, err = drainNoisyJobs(ctx, nc, ids); err != nil {
		return r, err
	}
	r.AloneP50, r.AloneP95 = pct(alone, 50), pct(alone, 95)
	r.NoisyP50, r.NoisyP95 = pct(with, 50), pct(with, 95)
	return r, nil
}

// freeOwner makes owner sub on the free plan, with a connected account and
// one upload, and returns its client and the upload's ID.
func (e *env) freeOwner(ctx context.Context, sub string) (*apiclient.Client, string, error) {
	s := e.s
	tok, err := httpapi.Mint(s.Config.JWTSecret, httpapi.Claims{Subject: sub, Role: httpapi.RoleUser, Plan: "free", ExpiresAt: time.Now().Add(time.Hour)})
	if err != nil {
		return nil, "", err
	}
	c := apiclient.New(s.APIURL, apiclient.WithToken(tok))
	if err := c.Connect(ctx, accounts.ConnectRequest{Provider: "deviantart", RefreshToken: fmt.Sprintf("rt-%s-%d", sub, time.Now().UnixNano())}); err != nil {
		return nil, "", err
	}
	up, err := c.Upload(ctx, "image.png", "image/png", simulator.PNG(64))
	if err != nil {
		return nil, "", err
	}
	return c, up.ID, nil
}

// timeQuietJobs submits n jobs on upload up as the quiet owner c, one
// after another, each waited for, and returns their submit→finish times.
func timeQuietJobs(ctx context.Context, c *apiclient.Client, up string, n int, label string) ([]time.Duration, error) {
	var ds []time.Duration
	for i := range n {
		start := time.Now()
		j, _, err := c.SubmitJob(ctx, apiclient.PublishRequest(publish.Params{Title: fmt.Sprintf("quiet %s %d", label, i)}, up))
		if err != nil {
			return nil, err
		}
		wctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
		j, err = c.WaitJob(wctx, j.ID, 20*time.Millisecond, func(j job.Job) bool { return j.Finished() })
		cancel()
		if err != nil {
			return nil, fmt.Errorf("the quiet owner's job %s: %w", j.ID, err)
		}
		ds = append(ds, time.Since(start))
	}
	return ds, nil
}

// queueNoisyJobs submits n jobs on upload up as the noisy owner c at once
// (16 at a time) and returns their IDs.
func queueNoisyJobs(ctx context.Context, c *apiclient.Client, up string, n int) ([]string, error) {
	ids := make([]string, n)
	sem := make(chan struct{}, 16)
	errs := make(chan error, n)
	for i := range n {
		sem <- struct{}{}
		go func() {
			defer func() { <-sem }()
			j, _, err := c.SubmitJob(ctx, apiclient.PublishRequest(publish.Params{Title: fmt.Sprintf("noisy %d", i)}, up))
			ids[i] = j.ID
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			return nil, err
		}
	}
	return ids, nil
}

// drainNoisyJobs counts the noisy owner c's jobs ids still queued, then
// waits for every one to finish: the backlog drains before the next phase
// counts its requests. It returns the count.
func drainNoisyJobs(ctx context.Context, c *apiclient.Client, ids []string) (left int, err error) {
	for _, id := range ids {
		if j, err := c.GetJob(ctx, id); err == nil && !j.Finished() {
			left++
		}
	}
	progress("noisy neighbour: waiting for the %d noisy jobs still queued", left)
	for _, id := range ids {
		wctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
		_, err := c.WaitJob(wctx, id, 100*time.Millisecond, func(j job.Job) bool { return j.Finished() })
		cancel()
		if err != nil {
			return left, fmt.Errorf("the noisy owner's job %s: %w", id, err)
		}
	}
	return left, nil
}

// print writes the figure.
func (r noisyResult) print(w io.Writer) {
	fmt.Fprintf(w, "Noisy neighbour: a free owner queues %d jobs at once; another free owner's %d jobs, one after another (simulator latency %.0f ms)\n",
		r.NoisyJobs, r.QuietJobs, r.SimLatencyMs)
	fmt.Fprintf(w, "  quiet owner's submit→finish alone\tp50 %.0f ms, p95 %.0f ms\n", r.AloneP50, r.AloneP95)
	fmt.Fprintf(w, "  beside the noisy backlog\tp50 %.0f ms, p95 %.0f ms (%d noisy jobs still queued after)\n\n", r.NoisyP50, r.NoisyP95, r.NoisyLeft)
}
