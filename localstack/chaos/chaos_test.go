package chaos_test

import (
	"context"
	"testing"
	"time"

	"github.com/conveyor/conveyor/localstack/awstest"
	"github.com/conveyor/conveyor/localstack/chaos"
)

func TestMain(m *testing.M) { awstest.Main(m) }

// TestSmallChaos is the small version of `make chaos` that runs in make test:
// workers killed between steps and mid-call (the API did the call, nothing
// was recorded) while the job is cancelled — and sometimes retried at once.
// Its outages freeze the emulators, so it runs on a stack with emulators of
// its own (no Endpoints): freezing shared ones would stall every other test
// using them (make test runs all packages on one pair).
func TestSmallChaos(t *testing.T) {
	t.Parallel()
	rep, err := chaos.Run(context.Background(), chaos.Options{
		Prefix: awstest.Prefix(t), Jobs: 12,
		CrashRate: 0.15, DuplicateRate: 0.3, FaultRate: 0.2, MidCallCancelRate: 0.3, Timeout: 150 * time.Second, Seed: 7,
		Outages: 2, Log: awstest.LogTail(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Log(rep)
	if rep.FirstFailure != "" {
		t.Log("first failed job: " + rep.FirstFailure)
	}
	if !rep.OK() {
		t.Errorf("invariants broken: %s\nlost %v stuck %v double %v over %v outputs lost %v", rep, rep.Lost, rep.Stuck, rep.DoublePublished, rep.OverAttempt, rep.LostOutputs)
	}
	if rep.Crashes == 0 || rep.Duplicates == 0 || rep.FaultsInjected == 0 || rep.MidCallCancels == 0 {
		t.Errorf("the run injected too little to prove anything: %s", rep)
	}
}

// TestLongHaulChaos is the small version of `make chaos LONG=1`: a tier
// paused past 5 × STUCK_AFTER, an API outage past maxReceiveCount ×
// cooldown, cancels and retries while jobs publish.
func TestLongHaulChaos(t *testing.T) {
	t.Parallel()
	rep, err := chaos.Run(context.Background(), chaos.Options{
		Endpoints: awstest.Endpoints(t), Prefix: awstest.Prefix(t), Jobs: 16,
		CrashRate: 0.1, DuplicateRate: 0.2, FaultRate: 0.1, Timeout: 240 * time.Second, Seed: 11, LongHaul: true, Log: awstest.LogTail(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Log(rep)
	if rep.FirstFailure != "" {
		t.Log("first failed job: " + rep.FirstFailure)
	}
	if !rep.OK() {
		t.Errorf("invariants broken: %s\nlost %v stuck %v double %v over %v outputs lost %v", rep, rep.Lost, rep.Stuck, rep.DoublePublished, rep.OverAttempt, rep.LostOutputs)
	}
	if rep.HeldJobs == 0 {
		t.Errorf("no job waited in the paused tier: %s", rep)
	}
}
