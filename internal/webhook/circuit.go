package webhook

import (
	"errors"
	"time"
)

// Defaults of Circuit.
const (
	// CircuitFailuresDefault is the consecutive failed attempts that open
	// an endpoint's circuit.
	CircuitFailuresDefault = 5
	// CircuitCooldownDefault is how long a circuit first stays open.
	CircuitCooldownDefault = time.Minute
	// CircuitMaxDefault caps how long a circuit stays open.
	CircuitMaxDefault = time.Hour
	// DisableAfterDefault is how long an endpoint fails, without a
	// success between, before it is disabled.
	DisableAfterDefault = 5 * 24 * time.Hour
)

// Circuit is the rule of each endpoint's circuit. An endpoint whose
// deliveries fail (a timeout, a transport error, 5xx or 429) Failures times
// in a row has its circuit opened: its deliveries then wait, without an
// attempt spent and without a connection made, until the circuit's time is
// over; the next delivery is the probe (an endpoint's deliveries run one at
// a time, in its slot), and each failed probe opens it again for twice as
// long, up to Max. A success closes it.
type Circuit struct {
	// Failures is the consecutive failures that open it (default
	// CircuitFailuresDefault, 5).
	Failures int
	// Cooldown is how long it stays open the first time (default
	// CircuitCooldownDefault, 1m).
	Cooldown time.Duration
	// Max caps how long it stays open (default CircuitMaxDefault, 1h).
	Max time.Duration
	// DisableAfter is how long an endpoint's attempts fail, with no
	// success between, before a failure disables it (default
	// DisableAfterDefault, 120h): its deliveries then fail at once, until
	// its owner enables it again.
	DisableAfter time.Duration
}

func (c Circuit) withDefaults() Circuit {
	if c.Failures == 0 {
		c.Failures = CircuitFailuresDefault
	}
	if c.Cooldown == 0 {
		c.Cooldown = CircuitCooldownDefault
	}
	if c.Max == 0 {
		c.Max = CircuitMaxDefault
	}
	if c.DisableAfter == 0 {
		c.DisableAfter = DisableAfterDefault
	}
	return c
}

// Validate reports a circuit that cannot work.
func (c Circuit) Validate() error {
	if c.Failures < 1 || c.Cooldown <= 0 || c.Max < c.Cooldown || c.DisableAfter <= 0 {
		return errors.New("webhook circuit: Failures ≥ 1, Cooldown > 0, Max ≥ Cooldown and DisableAfter > 0")
	}
	return nil
}

// OpenFor is how long the circuit opens after an endpoint's failures-th
// consecutive failure: zero below Failures, then Cooldown doubling with
// each further failure, at most Max.
func (c Circuit) OpenFor(failures int) time.Duration {
	if failures < c.Failures {
		return 0
	}
	d := c.Cooldown
	for range failures - c.Failures {
		if d >= c.Max/2 {
			return c.Max
		}
		d *= 2
	}
	return min(d, c.Max)
}

// Disables reports whether a failure at now of an endpoint whose circuit
// was as st before it disables the endpoint: with it, the circuit is open,
// and the endpoint has failed, with no success between, since at least
// DisableAfter ago.
func (c Circuit) Disables(st CircuitRecord, now time.Time) bool {
	return st.Failures+1 >= c.Failures && st.FailingSinceMs != 0 && now.Sub(time.UnixMilli(st.FailingSinceMs)) >= c.DisableAfter
}

// OpenUntil is when an endpoint whose circuit is as st is may be tried
// again, and whether that is after now.
func OpenUntil(st CircuitRecord, now time.Time) (time.Time, bool) {
	if st.OpenUntilMs == 0 {
		return time.Time{}, false
	}
	until := time.UnixMilli(st.OpenUntilMs)
	return until, until.After(now)
}
