package resources_test

import (
	"slices"
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

// The release and retention tasks are split over schedules that share the
// sweep index's shards: for each, every shard is swept by exactly one of
// its Parts schedules, every minute; every other task's schedule sweeps
// every shard; and the recovery function's reservation lets each of its
// schedules overlap one run.
func TestSplitSchedulesOwnEveryShardOnce(t *testing.T) {
	t.Parallel()
	for _, env := range job.Envs {
		def := resources.For(env)
		owner := map[string]map[int]string{} // task → shard → schedule
		parts := map[string]int{}
		recovery := 0
		for _, sc := range def.Schedules {
			if sc.Function != resources.FuncRecovery {
				continue
			}
			recovery++
			parts[sc.Task]++
			if resources.Parts(sc.Task) == 1 {
				if sc.Shards != nil {
					t.Errorf("%s %s: task %s owns shards %v; it is not split", env, sc.Name, sc.Task, sc.Shards)
				}
				continue
			}
			if sc.Interval != time.Minute || len(sc.Shards) == 0 {
				t.Errorf("%s %s: every %s over shards %v; want every minute over some shards", env, sc.Name, sc.Interval, sc.Shards)
			}
			if owner[sc.Task] == nil {
				owner[sc.Task] = map[int]string{}
			}
			for _, n := range sc.Shards {
				if n < 0 || n >= resources.SweepShards {
					t.Errorf("%s %s: shard %d is not one of the index's %d", env, sc.Name, n, resources.SweepShards)
				}
				if o, ok := owner[sc.Task][n]; ok {
					t.Errorf("%s: shard %d is swept by both %s and %s", env, n, o, sc.Name)
				}
				owner[sc.Task][n] = sc.Name
			}
		}
		for _, task := range []string{resources.TaskRelease, resources.TaskRetain} {
			if parts[task] != resources.Parts(task) || parts[task] < 2 {
				t.Errorf("%s: %d %s schedules, want Parts = %d (at least 2: one invocation does not keep up)", env, parts[task], task, resources.Parts(task))
			}
			for n := range resources.SweepShards {
				if _, ok := owner[task][n]; !ok {
					t.Errorf("%s: shard %d is swept by no %s schedule", env, n, task)
				}
			}
		}
		if rc, want := resources.FunctionSizes[resources.FuncRecovery].ReservedConcurrency, 2*recovery; rc < want {
			t.Errorf("%s: the recovery function reserves %d executions; its %d schedules, each with one overlapping run, need %d", env, rc, recovery, want)
		}
	}
}

func TestPartShards(t *testing.T) {
	t.Parallel()
	if got := resources.PartShards(0, 1); got != nil {
		t.Errorf("PartShards(0, 1) = %v, want nil (every shard)", got)
	}
	if got, want := resources.PartShards(1, 4), []int{1, 5, 9, 13}; !slices.Equal(got, want) {
		t.Errorf("PartShards(1, 4) = %v, want %v", got, want)
	}
}
