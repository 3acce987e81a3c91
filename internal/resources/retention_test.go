package resources_test

import (
	"testing"
	"time"

	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/resources"
)

func TestUploadLifecycleArithmetic(t *testing.T) {
	t.Parallel()
	const day = 24 * time.Hour
	if got, want := resources.UploadObjectHorizon, resources.UploadUseWindow+resources.MaxScheduleAhead+resources.RunMargin+resources.MaxStaleAfter; got != want {
		t.Errorf("horizon = %v, want use window + scheduleAt horizon + run margin + stale stage = %v", got, want)
	}
	if resources.MaxStaleAfter < resources.StaleAfterDefault {
		t.Errorf("the default stale stage %v exceeds what the lifecycle allows for (%v)", resources.StaleAfterDefault, resources.MaxStaleAfter)
	}
	days := resources.UploadObjectExpiryDays()
	if exp := time.Duration(days) * day; exp < resources.UploadObjectHorizon || exp >= resources.UploadObjectHorizon+day {
		t.Errorf("lifecycle %d days for a %v horizon: want the horizon rounded up to whole days", days, resources.UploadObjectHorizon)
	}
	if days != 409 { // 7 + 365 + 30 + 7
		t.Errorf("lifecycle = %d days, want 409", days)
	}
	for _, env := range job.Envs {
		if got := resources.For(env).Bucket.UploadObjectExpiry; got != time.Duration(days)*day {
			t.Errorf("%s: bucket expiry %v, want %d days", env, got, days)
		}
	}
}

// Retention's schedules share the sweep index's shards: every shard is
// swept by exactly one of them, every minute, and the recovery function's
// reservation lets each of its schedules overlap one run.
func TestRetentionSchedulesOwnEveryShardOnce(t *testing.T) {
	t.Parallel()
	for _, env := range job.Envs {
		def := resources.For(env)
		owner := map[int]string{}
		parts, others := 0, 0
		for _, sc := range def.Schedules {
			if sc.Function != resources.FuncRecovery {
				continue
			}
			if sc.Task != resources.TaskRetain {
				others++
				if sc.Shards != nil {
					t.Errorf("%s %s: task %s owns shards %v; only retention is split", env, sc.Name, sc.Task, sc.Shards)
				}
				continue
			}
			parts++
			if sc.Interval != time.Minute || len(sc.Shards) == 0 {
				t.Errorf("%s %s: every %s over shards %v; want every minute over some shards", env, sc.Name, sc.Interval, sc.Shards)
			}
			for _, n := range sc.Shards {
				if n < 0 || n >= resources.SweepShards {
					t.Errorf("%s %s: shard %d is not one of the index's %d", env, sc.Name, n, resources.SweepShards)
				}
				if o, ok := owner[n]; ok {
					t.Errorf("%s: shard %d is swept by both %s and %s", env, n, o, sc.Name)
				}
				owner[n] = sc.Name
			}
		}
		if parts != resources.RetainParts {
			t.Errorf("%s: %d retention schedules, want RetainParts = %d", env, parts, resources.RetainParts)
		}
		for n := range resources.SweepShards {
			if _, ok := owner[n]; !ok {
				t.Errorf("%s: shard %d is swept by no retention schedule", env, n)
			}
		}
		if rc, want := resources.FunctionSizes[resources.FuncRecovery].ReservedConcurrency, 2*(parts+others); rc < want {
			t.Errorf("%s: the recovery function reserves %d executions; its %d schedules, each with one overlapping run, need %d", env, rc, parts+others, want)
		}
	}
}
