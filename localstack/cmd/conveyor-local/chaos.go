package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/conveyor/conveyor/localstack/chaos"
)

// runChaos is the chaos subcommand (make chaos): many jobs through a
// private local stack while workers die, messages repeat and the API fails;
// it prints what it injected and which invariants held, and returns 1 if
// one broke.
func runChaos(args []string) int {
	fs := flag.NewFlagSet("chaos", flag.ContinueOnError)
	jobs := fs.Int("jobs", 200, "jobs")
	crash := fs.Float64("crash", 0.1, "chance a worker dies at each crash point")
	dup := fs.Float64("dup", 0.3, "chance a job's message is delivered twice")
	faults := fs.Float64("faults", 0.2, "chance an external call fails (429/500)")
	midCall := fs.Float64("midcall", 0.05, "chance a job is cancelled (and half of those retried) while a worker killed mid-call had just uploaded or published")
	outages := fs.Int("outages", 3, "times the emulator freezes for 1.5 s (an AWS outage)")
	seed := fs.Uint64("seed", uint64(time.Now().UnixNano()), "random seed")
	long := fs.Bool("long", false, "long haul: a tier paused past 5×STUCK_AFTER, an API outage past maxReceiveCount×cooldown, cancels and retries (compressed timings)")
	if code, done := parse(fs, args); done {
		return code
	}
	fmt.Fprintf(os.Stderr, "chaos: %d jobs, seed %d, starting a private emulator and stack\n", *jobs, *seed)
	rep, err := chaos.Run(context.Background(), chaos.Options{Jobs: *jobs, CrashRate: *crash, DuplicateRate: *dup, FaultRate: *faults, MidCallCancelRate: *midCall, Seed: *seed, Outages: *outages, Timeout: 10 * time.Minute, Log: os.Stderr, LongHaul: *long})
	if err != nil {
		fmt.Fprintf(os.Stderr, "chaos: %v\n", err)
		return 1
	}
	fmt.Println(rep)
	if !rep.OK() {
		fmt.Printf("BROKEN: lost %v stuck %v double-published %v over-attempts %v outputs lost %v DLQ messages %d\n", rep.Lost, rep.Stuck, rep.DoublePublished, rep.OverAttempt, rep.LostOutputs, rep.DLQMessages)
		return 1
	}
	fmt.Println("every invariant held")
	return 0
}
