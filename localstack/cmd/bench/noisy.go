package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/conveyor/conveyor/internal/accounts"
	"github.com/conveyor/conveyor/internal/apiclient"
	"github.com/conveyor/conveyor/internal/config"
	"github.com/conveyor/conveyor/internal/httpapi"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/publish"
	"github.com/conveyor/conveyor/localstack/simulator"
	"github.com/conveyor/conveyor/localstack/stack"
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
	// Aged, when measured, is the same figure with the noisy backlog
	// older than the stuck threshold (a stack of its own whose
	// CONVEYOR_STUCK_AFTER is short): recovery re-sends that backlog,
	// into the noisy owner's slots, while the quiet owner's jobs run.
	Aged *agedResult `json:"stuck_backlog,omitempty"`
}

// agedResult is the noisy-neighbour figure beside a backlog older than
// the stuck threshold.
type agedResult struct {
	StuckAfterMs float64 `json:"stuck_after_ms"`
	AgedMs       float64 `json:"backlog_age_ms"`
	AloneP50     float64 `json:"quiet_alone_p50_ms"`
	AloneP95     float64 `json:"quiet_alone_p95_ms"`
	NoisyP50     float64 `json:"quiet_with_stuck_backlog_p50_ms"`
	NoisyP95     float64 `json:"quiet_with_stuck_backlog_p95_ms"`
	NoisyLeft    int     `json:"noisy_jobs_still_queued_after"`
}

// agedNoisyPhase is the noisy-neighbour figure on a stack of its own (the
// same emulators, its own resources and simulator) whose stuck threshold
// is stuckAfter and whose recovery runs every 500 ms: the noisy backlog is
// left to grow older than the threshold before the quiet owner's jobs are
// timed, so recovery has re-sent what is still queued.
func (b *bench) agedNoisyPhase(ctx context.Context, noisy, quiet int, latency, stuckAfter time.Duration) (agedResult, error) {
	r := agedResult{StuckAfterMs: ms(stuckAfter), AgedMs: ms(stuckAfter + time.Second)}
	cfgEnv := map[string]string{"CONVEYOR_HEARTBEAT_INTERVAL": "30s", "CONVEYOR_STUCK_AFTER": stuckAfter.String(), "CONVEYOR_RECOVERY_INTERVAL": "500ms",
		config.VarRateLimits: stack.RateLimitsForLoad}
	progress("stuck backlog: a stack whose CONVEYOR_STUCK_AFTER is %s", stuckAfter)
	s, err := stack.Start(ctx, stack.Options{
		Endpoints: b.emu.Endpoints(), APIAddr: "127.0.0.1:0", Prefix: "bench-aged",
		Getenv: func(k string) string { return cfgEnv[k] }, PollerConcurrency: 8, MinPollers: b.o.pollers,
		Logger: slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})), Metrics: io.Discard,
	})
	if err != nil {
		return r, err
	}
	defer s.Close()
	e := &env{s: s}
	nr, err := e.noisyAged(ctx, noisy, quiet, latency, stuckAfter+time.Second)
	if err != nil {
		return r, err
	}
	r.AloneP50, r.AloneP95, r.NoisyP50, r.NoisyP95, r.NoisyLeft = nr.AloneP50, nr.AloneP95, nr.NoisyP50, nr.NoisyP95, nr.NoisyLeft
	return r, nil
}

// noisyPhase measures fairness inside a tier: two free owners (the low
// tier); the quiet one submits its jobs one after another and waits for
// each, first alone, then after the noisy one queued noisy jobs at once.
// The simulator's latency makes each job take a while, so the noisy
// backlog lasts.
func (e *env) noisyPhase(ctx context.Context, noisy, quiet int, latency time.Duration) (noisyResult, error) {
	return e.noisyAged(ctx, noisy, quiet, latency, 0)
}

// noisyAged is noisyPhase with the noisy backlog left to age before the
// quiet owner's jobs are timed.
func (e *env) noisyAged(ctx context.Context, noisy, quiet int, latency, age time.Duration) (noisyResult, error) {
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
	if age > 0 {
		progress("noisy neighbour: letting the backlog age %s", age)
		select {
		case <-ctx.Done():
			return r, ctx.Err()
		case <-time.After(age):
		}
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
	fmt.Fprintf(w, "  beside the noisy backlog\tp50 %.0f ms, p95 %.0f ms (%d noisy jobs still queued after)\n", r.NoisyP50, r.NoisyP95, r.NoisyLeft)
	if a := r.Aged; a != nil {
		fmt.Fprintf(w, "  beside a backlog older than the stuck threshold (%.0f ms old, CONVEYOR_STUCK_AFTER %.0f ms, a stack of its own)\n", a.AgedMs, a.StuckAfterMs)
		fmt.Fprintf(w, "    quiet owner alone\tp50 %.0f ms, p95 %.0f ms\n", a.AloneP50, a.AloneP95)
		fmt.Fprintf(w, "    beside the re-sent backlog\tp50 %.0f ms, p95 %.0f ms (%d noisy jobs still queued after)\n", a.NoisyP50, a.NoisyP95, a.NoisyLeft)
	}
	fmt.Fprintln(w)
}
