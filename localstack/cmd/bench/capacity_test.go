package main

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/recovery"
)

func TestCapacityFindsTheFirstBottleneck(t *testing.T) {
	t.Parallel()
	thirds := map[job.Tier]float64{job.High: 1.0 / 3, job.Medium: 1.0 / 3, job.Low: 1.0 / 3}
	base := mix{TierShare: thirds, PublisherBatchSeconds: 1, JobsPerBatch: 10, PublisherSecondsPerJob: 0.1,
		APIRequestsPerJob: 5, APISecondsPerJob: 0.05, StatsWritesPerJob: 0.1, ClaimsPerJob: 1, SweepWCUPerJob: 6, EventsPerJob: 7}
	conc := map[job.Tier]int{job.High: 300, job.Medium: 200, job.Low: 100}
	for _, c := range []struct {
		name   string
		m      mix
		d      design
		want   string
		wantAt float64
	}{
		{"one copy of the tier flags", base, design{TierConcurrency: conc, TierFlagShards: 1, SweepShards: 16, StatsShards: 4},
			"dynamodb tier flag", 1500},
		{"four sweep shards", base, design{TierConcurrency: conc, TierFlagShards: 8, SweepShards: 4, StatsShards: 4},
			"dynamodb sweep index shard", 666.67},
		{"the low tier's concurrency", base, design{TierConcurrency: map[job.Tier]int{job.High: 50, job.Medium: 20, job.Low: 5}, TierFlagShards: 8, SweepShards: 16, StatsShards: 4},
			"lambda concurrency low", 150},
		{"the table's write units", func() mix {
			m := base
			m.WriteUnitsPerJob = map[string]float64{"table": 80, "bySweep": 20}
			return m
		}(), design{TierConcurrency: conc, TierFlagShards: 8, SweepShards: 16, StatsShards: 4},
			"dynamodb on-demand table throughput", 500},
		{"a counter write per job", mix{TierShare: thirds, StatsWritesPerJob: 1, ClaimsPerJob: 1}, design{TierConcurrency: conc, TierFlagShards: 8, SweepShards: 16, StatsShards: 1},
			"dynamodb hourly stats counter", 1000},
		// One retention invocation a minute at 3,008 MB with a fresh gzip
		// writer per event (1.6 ms a job staled, 2.1 its upload expired):
		// 1.70 vCPU × 50 s ÷ 3.7 ms a minute.
		{"retention in one invocation", func() mix {
			m := base
			m.Sweeps = map[string]sweepCost{recovery.SweepStale: {ItemsPerS: 4000, CPUMsPerItem: 1.6}, recovery.SweepMedia: {ItemsPerS: 2000, CPUMsPerItem: 2.1}}
			return m
		}(), design{TierConcurrency: conc, TierFlagShards: 8, SweepShards: 16, StatsShards: 4, RetainParts: 1, RecoveryMemoryMB: 3008, SweepBudget: 50 * time.Second},
			"recovery stale + media", 383},
		{"retention's writes in the table", func() mix {
			m := base
			m.WriteUnitsPerJob = map[string]float64{"table": 30}
			m.Sweeps = map[string]sweepCost{recovery.SweepStale: {ItemsPerS: 5000, CPUMsPerItem: 0.5, TableWCUPerItem: 8}, recovery.SweepMedia: {ItemsPerS: 2500, CPUMsPerItem: 0.7, TableWCUPerItem: 2}}
			return m
		}(), design{TierConcurrency: conc, TierFlagShards: 8, SweepShards: 16, StatsShards: 4, RetainParts: 4, RecoveryMemoryMB: 3008, SweepBudget: 50 * time.Second},
			"dynamodb on-demand table throughput", 1000},
		// One release run a minute, 16 items at a time: the scheduled
		// sweep's half of 50 s at 489 items/s, by its round trips.
		{"one release run a minute", func() mix {
			m := base
			m.Sweeps = map[string]sweepCost{recovery.SweepScheduled: {ItemsPerS: 489, CPUMsPerItem: 1.47}, recovery.SweepParked: {ItemsPerS: 620, CPUMsPerItem: 1.24}}
			return m
		}(), design{TierConcurrency: conc, TierFlagShards: 8, SweepShards: 16, StatsShards: 4, ReleaseParts: 1, RecoveryMemoryMB: 3008, SweepBudget: 50 * time.Second},
			"recovery release scheduled", 204},
		// The same run 128 items at a time: its processor binds, 1.70 vCPU
		// × 25 s ÷ 1.47 ms a minute.
		{"one release run a minute, 128 at a time", func() mix {
			m := base
			m.Sweeps = map[string]sweepCost{recovery.SweepScheduled: {ItemsPerS: 3500, CPUMsPerItem: 1.47}, recovery.SweepParked: {ItemsPerS: 3500, CPUMsPerItem: 1.24}}
			return m
		}(), design{TierConcurrency: conc, TierFlagShards: 8, SweepShards: 16, StatsShards: 4, ReleaseParts: 1, RecoveryMemoryMB: 3008, SweepBudget: 50 * time.Second},
			"recovery release scheduled", 482},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			got := capacity(c.m, c.d)
			if len(got) == 0 || got[0].Name != c.want || math.Abs(got[0].JobsPerS-c.wantAt) > 1 {
				t.Fatalf("first bottleneck = %+v, want %s at %.0f jobs/s", got[0], c.want, c.wantAt)
			}
		})
	}
}

func TestShippedDesignSustainsAThousandJobsPerSecond(t *testing.T) {
	t.Parallel()
	// The bench's mix at 300 ms per external call: a 10-job batch takes
	// about a second.
	m := mix{TierShare: map[job.Tier]float64{job.High: 1.0 / 3, job.Medium: 1.0 / 3, job.Low: 1.0 / 3},
		PublisherBatchSeconds: 1.2, JobsPerBatch: 8, PublisherSecondsPerJob: 0.15, APIRequestsPerJob: 5, APISecondsPerJob: 0.06,
		StatsWritesPerJob: 0.15, ClaimsPerJob: 1, SweepWCUPerJob: 6, EventsPerJob: 7}
	m.Sweeps = sweepsMeasured
	m.WriteUnitsPerJob = map[string]float64{"table": 24.5}
	got := capacity(m, currentDesign())
	if got[0].JobsPerS < 1000 {
		t.Fatalf("the shipped design saturates at %.0f jobs/s (%s), want ≥ 1,000", got[0].JobsPerS, got[0].Name)
	}
	// Every sweep keeps up with the pipeline: the sweeps' lines are not
	// the first bottleneck (one retention invocation a minute was, bound
	// by its processor near 530 jobs/s, and one release run a minute near
	// 200 jobs/s by its round trips), and each is in the model.
	seen := map[string]bool{}
	for _, l := range got {
		if !strings.HasPrefix(l.Name, "recovery ") {
			continue
		}
		seen[l.Name] = true
		if l.JobsPerS <= got[0].JobsPerS {
			t.Errorf("%s binds at %.0f jobs/s, at or below the pipeline's first bottleneck (%s, %.0f)", l.Name, l.JobsPerS, got[0].Name, got[0].JobsPerS)
		}
	}
	for _, name := range []string{"recovery release scheduled", "recovery release parked", "recovery stuck", "recovery stale", "recovery stale + media"} {
		if !seen[name] {
			t.Errorf("the model has no line %q", name)
		}
	}
	if i := slices.IndexFunc(got, func(l limit) bool { return l.Name == "recovery stuck" }); i < 0 || !math.IsInf(got[i].JobsPerS, 1) || !strings.Contains(got[i].Reasoning, "stuck jobs/s") {
		t.Errorf("the stuck line should be not job-bound and state the stuck jobs/s it keeps up with")
	}
}
