package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/conveyor/conveyor/internal/aws/awsclient"
	"github.com/conveyor/conveyor/internal/aws/store"
	"github.com/conveyor/conveyor/internal/config"
	"github.com/conveyor/conveyor/internal/fault"
	"github.com/conveyor/conveyor/internal/ratelimit"
)

// rateResult is the cost of the per-owner rate check (docs/limits.md) under
// the default limits, one scenario a row.
type rateResult struct {
	Scenarios []rateScenario `json:"scenarios"`
}

// rateScenario is one owner's traffic through one instance's limiter.
type rateScenario struct {
	Name      string `json:"name"`
	Plan      string `json:"plan"`
	Requests  int    `json:"requests"`
	Served    int    `json:"served"`
	Throttled int    `json:"throttled"`
	// WriteUnitsPerRequest is the DynamoDB write units consumed (as the
	// emulator reports them) over the scenario's requests.
	WriteUnitsPerRequest float64 `json:"write_units_per_request"`
	// MeanUs and P99Us are the time the check added to a request.
	MeanUs float64 `json:"check_mean_us"`
	P99Us  float64 `json:"check_p99_us"`
}

// rateCheck measures the rate check on the stack's table, through the
// store's RateLease and a limiter of the default limits (one instance),
// every request it makes counted in write units.
func (b *bench) rateCheck(ctx context.Context, table string) (*rateResult, error) {
	progress("the rate check: its write units and time a request, under the default limits")
	counter := awsclient.NewCounter()
	st := store.New(dynamodb.NewFromConfig(counter.Attach(b.floorCfg)), table, nil)
	rates, err := config.ParseRates(config.RateLimitsDefault)
	if err != nil {
		return nil, err
	}
	plans := map[string]ratelimit.Limit{}
	for p, r := range rates {
		plans[p] = ratelimit.Limit{Rate: r.PerSecond, Burst: r.Burst}
	}
	lm, err := ratelimit.New(ratelimit.Config{Store: st, PerPlan: plans})
	if err != nil {
		return nil, err
	}
	run := func(name, owner, plan string, n int, every time.Duration) (rateScenario, error) {
		sc := rateScenario{Name: name, Plan: plan, Requests: n}
		before := counter.Units()["write"]
		took := make([]time.Duration, 0, n)
		for range n {
			start := time.Now()
			err := lm.Admit(ctx, owner, plan)
			took = append(took, time.Since(start))
			var th *fault.Throttled
			switch {
			case err == nil:
				sc.Served++
			case errors.As(err, &th):
				sc.Throttled++
			default:
				return sc, err
			}
			time.Sleep(every)
		}
		sc.WriteUnitsPerRequest = (counter.Units()["write"] - before) / float64(n)
		var sum time.Duration
		for _, d := range took {
			sum += d
		}
		slices.Sort(took)
		sc.MeanUs = float64(sum.Microseconds()) / float64(n)
		sc.P99Us = float64(took[(len(took)*99)/100].Microseconds())
		return sc, nil
	}
	// One unmeasured lease first: the connection and the emulator's first
	// write are not the check's.
	if err := lm.Admit(ctx, "rate-warm-up", "free"); err != nil {
		return nil, err
	}
	var out rateResult
	for _, s := range []struct {
		name, owner, plan string
		n                 int
		every             time.Duration
	}{
		{"a burst of 50 submissions", "rate-burst", "free", 50, 0},
		{"a script hammering past its burst", "rate-burst", "free", 400, 0},
		{"steady at half its rate (5 a second)", "rate-steady", "standard", 20, 200 * time.Millisecond},
	} {
		sc, err := run(s.name, s.owner, s.plan, s.n, s.every)
		if err != nil {
			return nil, fmt.Errorf("the rate check, %s: %w", s.name, err)
		}
		out.Scenarios = append(out.Scenarios, sc)
	}
	return &out, nil
}

// print writes the rate check's rows.
func (r *rateResult) print(w io.Writer) {
	fmt.Fprintln(w, "the rate check (default limits, one instance)\tplan\trequests\tserved\tthrottled\twrite units/request\tmean µs\tp99 µs")
	for _, s := range r.Scenarios {
		fmt.Fprintf(w, "  %s\t%s\t%d\t%d\t%d\t%.3f\t%.0f\t%.0f\n", s.Name, s.Plan, s.Requests, s.Served, s.Throttled, s.WriteUnitsPerRequest, s.MeanUs, s.P99Us)
	}
	fmt.Fprintln(w)
}
