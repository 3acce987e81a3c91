// Package breaker is the distributed circuit breaker around every external
// call, keyed per host and per token, whose state lives in DynamoDB so that
// hundreds of concurrent Lambdas that share nothing else agree on it.
//
// This file is the pure state machine (no I/O, time injected): closed →
// failures ≥ Threshold within Window → open for Cooldown → half-open, where
// exactly one probe is admitted under a lease → success closes, failure
// re-opens. A 429 flags the key at once and keeps it open at least until
// its Retry-After.
package breaker

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"
)

// Defaults, as in the configuration table.
const (
	WindowDefault     = time.Minute
	ThresholdDefault  = 5
	CooldownDefault   = 5 * time.Minute
	ProbeLeaseDefault = 30 * time.Second
	CacheTTLDefault   = 5 * time.Second
)

// Config tunes the breaker.
type Config struct {
	// Window is the period failures are counted in (default 1m).
	Window time.Duration
	// Threshold is the failures within Window that open the circuit (default 5).
	Threshold int
	// Cooldown is how long the circuit stays open (default 5m).
	Cooldown time.Duration
	// ProbeLease is how long a half-open probe holds before another
	// instance may probe (default 30s).
	ProbeLease time.Duration
	// CacheTTL is how long an instance trusts its snapshot of the state
	// (default 5s): a closed breaker costs no read per call.
	CacheTTL time.Duration
}

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{Window: WindowDefault, Threshold: ThresholdDefault, Cooldown: CooldownDefault, ProbeLease: ProbeLeaseDefault, CacheTTL: CacheTTLDefault}
}

// Validate checks the configuration.
func (c Config) Validate() error {
	switch {
	case c.Window <= 0, c.Cooldown <= 0, c.ProbeLease <= 0, c.CacheTTL < 0:
		return errors.New("breaker durations must be positive")
	case c.Threshold < 1:
		return errors.New("breaker threshold must be at least 1")
	}
	return nil
}

// State is a breaker's state.
type State string

// States. Half-open is derived: an open record whose OpenUntil passed.
const (
	Closed   State = "closed"
	Open     State = "open"
	HalfOpen State = "half_open"
)

// Record is the persisted state of one key.
type Record struct {
	Key         string    `dynamodbav:"key" json:"key"`
	State       State     `dynamodbav:"state" json:"state"`
	Failures    int       `dynamodbav:"failures" json:"failures"`
	WindowStart time.Time `dynamodbav:"windowStart" json:"windowStart"`
	OpenedAt    time.Time `dynamodbav:"openedAt" json:"openedAt"`
	OpenUntil   time.Time `dynamodbav:"openUntil" json:"openUntil"`
	ProbeUntil  time.Time `dynamodbav:"probeUntil" json:"probeUntil"`
	ProbeOwner  string    `dynamodbav:"probeOwner" json:"-"`
	Version     int64     `dynamodbav:"version" json:"-"`
	UpdatedAt   time.Time `dynamodbav:"updatedAt" json:"updatedAt"`
}

// Effective is the state as of now (open past its OpenUntil is half-open).
func (r Record) Effective(now time.Time) State {
	if r.State == Open && !now.Before(r.OpenUntil) {
		return HalfOpen
	}
	if r.State == "" {
		return Closed
	}
	return r.State
}

// Outcome is what an external call's result means for the breaker.
type Outcome int

// Outcomes.
const (
	Success Outcome = iota
	Failure
	RateLimited
)

// Admission says whether a call may go ahead.
type Admission struct {
	Allow bool
	// Probe: this call is the half-open probe; lease it before calling.
	Probe bool
	// RetryAt is when a refused call may be tried again.
	RetryAt time.Time
}

// Admit decides whether a call may go ahead now.
func Admit(c Config, r Record, now time.Time) Admission {
	switch r.Effective(now) {
	case Open:
		return Admission{RetryAt: r.OpenUntil}
	case HalfOpen:
		if now.Before(r.ProbeUntil) {
			return Admission{RetryAt: r.ProbeUntil}
		}
		return Admission{Allow: true, Probe: true}
	}
	return Admission{Allow: true}
}

// LeaseProbe gives owner the half-open probe, if nobody holds a live one.
func LeaseProbe(c Config, r Record, owner string, now time.Time) (Record, bool) {
	if r.Effective(now) != HalfOpen || now.Before(r.ProbeUntil) {
		return r, false
	}
	r.ProbeOwner, r.ProbeUntil, r.UpdatedAt = owner, now.Add(c.ProbeLease), now
	r.Version++
	return r, true
}

// Transition is a change of state, for logs and metrics.
type Transition struct {
	Key      string
	From, To State
	At       time.Time
	Reason   string
}

// OnResult applies a call's outcome. owner identifies the caller, so that
// the probe's result closes or re-opens the circuit. changed is false when
// nothing needs to be written (a success on a healthy breaker).
func OnResult(c Config, r Record, o Outcome, retryAfter time.Duration, owner string, now time.Time) (next Record, changed bool, t *Transition) {
	next = r
	from := r.Effective(now)
	probe := from == HalfOpen && r.ProbeOwner == owner && now.Before(r.ProbeUntil)
	open := func(until time.Time, reason string) {
		next.State, next.OpenedAt, next.OpenUntil = Open, now, until
		next.Failures, next.WindowStart = 0, now
		next.ProbeOwner, next.ProbeUntil = "", time.Time{}
		t = &Transition{Key: r.Key, From: from, To: Open, At: now, Reason: reason}
	}
	switch {
	case o == Success && probe:
		next = Record{Key: r.Key, State: Closed, Version: r.Version, WindowStart: now}
		t = &Transition{Key: r.Key, From: HalfOpen, To: Closed, At: now, Reason: "probe succeeded"}
	case o == Success:
		return r, false, nil
	case probe:
		open(now.Add(max(c.Cooldown, retryAfter)), "probe failed")
	case from == Open || from == HalfOpen:
		// A call that started before the circuit opened: only a longer
		// Retry-After matters.
		if o == RateLimited && now.Add(retryAfter).After(r.OpenUntil) {
			next.OpenUntil = now.Add(retryAfter)
		} else {
			return r, false, nil
		}
	default:
		if next.WindowStart.IsZero() || !now.Before(next.WindowStart.Add(c.Window)) {
			next.Failures, next.WindowStart = 0, now
		}
		next.Failures++
		switch {
		case o == RateLimited && retryAfter > 0:
			open(now.Add(retryAfter), fmt.Sprintf("429 with Retry-After %s", retryAfter))
		case next.Failures >= c.Threshold:
			open(now.Add(c.Cooldown), fmt.Sprintf("%d failures within %s", next.Failures, c.Window))
		default:
			next.State = Closed
		}
	}
	next.UpdatedAt = now
	next.Version = r.Version + 1
	return next, true, t
}

// OpenError is the "circuit open" refusal; the call never reached the API.
type OpenError struct {
	Key     string
	RetryAt time.Time
}

func (e *OpenError) Error() string {
	return fmt.Sprintf("circuit open for %s until %s", e.Key, e.RetryAt.UTC().Format(time.RFC3339))
}

// Key builds a breaker key of a kind ("host", "token").
func Key(kind, value string) string { return kind + ":" + value }

// TokenKey is the key of a credential: a hash prefix, never the token.
func TokenKey(token string) string {
	h := sha256.Sum256([]byte(token))
	return Key("token", hex.EncodeToString(h[:8]))
}
