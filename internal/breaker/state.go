// Package breaker is the circuit breaker around every external call, keyed
// per host and per token, so that a failing or rate-limiting API is left
// alone instead of being hammered, and jobs wait without burning attempts.
//
// This file is the pure state machine (no I/O, time injected), shared by
// every instance through the persisted Record:
//
//	closed ── Threshold failures within Window, or a 429 ──▶ open
//	open ── OpenUntil passes (derived, no write) ──▶ half-open
//	half-open ── one probe, leased ──▶ success: closed · failure: open again
//
// A 429 flags its key at once, below the threshold, and keeps it open at
// least until its Retry-After. A host's circuit, which every owner's calls
// share, counts differently (OnHostResult): distinct owners, each once per
// Window, open it at Config.HostOwners, and a token's 429 flags only that
// token, so no one owner (and no one token) can open it. breaker.go
// shares the records between instances through a Store (store.go; the
// table, internal/aws/store); guard.go wraps the external API with it.
package breaker

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"time"
)

// MaxRetryAfter caps the Retry-After a breaker honours (12 h, the longest
// SQS can hide a message), so that a bogus header cannot block a key for
// days.
const MaxRetryAfter = 12 * time.Hour

// Config tunes the breaker. Its defaults live in internal/config
// (CONVEYOR_BREAKER_*); New refuses a Config that Validate refuses.
type Config struct {
	// Window is the period failures are counted in; a failure after
	// WindowStart+Window starts a new window.
	Window time.Duration
	// Threshold is the number of failures within one Window that opens the
	// circuit.
	Threshold int
	// Cooldown is how long the circuit stays open before a probe may go
	// through.
	Cooldown time.Duration
	// ProbeLease is how long a half-open probe holds its lease before
	// another caller may probe.
	ProbeLease time.Duration
	// CacheTTL is how long an instance of the store trusts its snapshot of
	// the records; the state machine does not use it.
	CacheTTL time.Duration
	// HostOwners is the number of distinct owners whose calls failed
	// within one Window that opens a host's circuit (OnHostResult), each
	// counted once per window whatever its number of failures, tokens or
	// accounts. At least 2, so that one owner never opens it; 0 means
	// HostOwnersDefault.
	HostOwners int
}

// HostOwnersDefault is the number of distinct owners whose failures open a
// host's circuit when Config.HostOwners is 0.
const HostOwnersDefault = 3

// hostOwners is c.HostOwners, or its default.
func (c Config) hostOwners() int {
	if c.HostOwners == 0 {
		return HostOwnersDefault
	}
	return c.HostOwners
}

// Validate reports whether c can be used: positive durations (CacheTTL may
// be 0: no cache), a threshold of at least 1 and HostOwners 0 (the default)
// or at least 2.
func (c Config) Validate() error {
	switch {
	case c.Window <= 0:
		return fmt.Errorf("breaker window must be positive, got %s", c.Window)
	case c.Threshold < 1:
		return fmt.Errorf("breaker threshold must be at least 1, got %d", c.Threshold)
	case c.Cooldown <= 0:
		return fmt.Errorf("breaker cooldown must be positive, got %s", c.Cooldown)
	case c.ProbeLease <= 0:
		return fmt.Errorf("breaker probe lease must be positive, got %s", c.ProbeLease)
	case c.CacheTTL < 0:
		return fmt.Errorf("breaker cache TTL must not be negative, got %s", c.CacheTTL)
	case c.HostOwners != 0 && c.HostOwners < 2:
		return fmt.Errorf("breaker host owners must be at least 2 (one owner must never open a host's circuit), got %d", c.HostOwners)
	}
	return nil
}

// State is a breaker's state.
type State string

// States. Only Closed and Open are ever stored by this package: HalfOpen is
// derived, an Open record whose OpenUntil has passed.
const (
	Closed   State = "closed"
	Open     State = "open"
	HalfOpen State = "half_open"
)

// Record is the persisted state of one key. The zero Record (with a Key)
// is a healthy, closed breaker, so a store needs no row for it.
type Record struct {
	// Key identifies the breaker (see Key and TokenKey).
	Key string `dynamodbav:"key" json:"key"`
	// State is Closed or Open as stored; see Effective for the state now.
	State State `dynamodbav:"state" json:"state"`
	// Failures counts failures in the current window while closed; once
	// open, the failures that opened it (plus failed probes). A host's
	// circuit counts distinct owners instead (Owners).
	Failures int `dynamodbav:"failures" json:"failures"`
	// Owners are, for a host's circuit, the owners whose calls failed in
	// the current window (at most Config.HostOwners), as OnHostResult names
	// them: an OwnerKey, a token's key, or "". Other circuits leave it
	// empty.
	Owners []string `dynamodbav:"owners,omitempty" json:"-"`
	// WindowStart is when the current failure window began (zero: none).
	WindowStart time.Time `dynamodbav:"windowStart" json:"windowStart"`
	// OpenedAt is when the circuit last opened.
	OpenedAt time.Time `dynamodbav:"openedAt" json:"openedAt"`
	// OpenUntil is when an open circuit turns half-open.
	OpenUntil time.Time `dynamodbav:"openUntil" json:"openUntil"`
	// ProbeUntil is when the lease of the current half-open probe ends.
	ProbeUntil time.Time `dynamodbav:"probeUntil" json:"probeUntil"`
	// ProbeOwner names the instance that holds (or last held) the probe.
	ProbeOwner string `dynamodbav:"probeOwner" json:"-"`
	// Version increases by one with every change, for conditional writes.
	Version int64 `dynamodbav:"version" json:"-"`
	// UpdatedAt is when the record last changed.
	UpdatedAt time.Time `dynamodbav:"updatedAt" json:"updatedAt"`
}

// Effective is the state as of now: an open record whose OpenUntil has
// passed is half-open; an empty or unknown state is closed.
func (r Record) Effective(now time.Time) State {
	switch r.State {
	case Open, HalfOpen:
		if now.Before(r.OpenUntil) {
			return Open
		}
		return HalfOpen
	}
	return Closed
}

// probing reports whether a half-open probe's lease is live at now.
func (r Record) probing(now time.Time) bool { return now.Before(r.ProbeUntil) }

// Outcome is what an external call's result means for the breaker.
type Outcome int

// Outcomes.
const (
	// Success: the API answered (a permanent 4xx counts as an answer).
	Success Outcome = iota
	// Failure: 5xx, timeout or network error.
	Failure
	// RateLimited: 429, with or without a Retry-After.
	RateLimited
	// Ignored: the call failed for a reason its caller caused (a deadline
	// it chose below the floor, a request it built wrong): it says nothing
	// about the target and changes nothing.
	Ignored
)

// String returns "success", "failure" or "rate_limited".
func (o Outcome) String() string {
	switch o {
	case Success:
		return "success"
	case Failure:
		return "failure"
	case RateLimited:
		return "rate_limited"
	case Ignored:
		return "ignored"
	}
	return fmt.Sprintf("Outcome(%d)", int(o))
}

// Admission is what a caller may do now.
type Admission struct {
	// Allow: the call may go ahead.
	Allow bool
	// Probe: the call is the half-open probe. The caller must first win
	// the lease (LeaseProbe, persisted with a conditional write) and may
	// call only if it did.
	Probe bool
	// RetryAt is, when the call is refused, the earliest time it may be
	// tried again (zero when allowed).
	RetryAt time.Time
}

// Admit says whether a call guarded by r may go ahead at now: always when
// closed; never while open (RetryAt = OpenUntil); when half-open, as the
// probe if no live lease exists, else refused until the lease ends.
func Admit(c Config, r Record, now time.Time) Admission {
	switch r.Effective(now) {
	case Open:
		return Admission{RetryAt: r.OpenUntil}
	case HalfOpen:
		if r.probing(now) {
			return Admission{RetryAt: r.ProbeUntil}
		}
		return Admission{Allow: true, Probe: true}
	}
	return Admission{Allow: true}
}

// LeaseProbe gives owner the half-open probe until now+ProbeLease, if r is
// half-open and no live lease exists; ok is false otherwise (r returned
// unchanged). Persisting next with a condition on r.Version makes exactly
// one of several concurrent callers win.
func LeaseProbe(c Config, r Record, owner string, now time.Time) (next Record, ok bool) {
	if r.Effective(now) != HalfOpen || r.probing(now) {
		return r, false
	}
	next = r
	next.ProbeOwner, next.ProbeUntil = owner, now.Add(c.ProbeLease)
	next.UpdatedAt, next.Version = now, r.Version+1
	return next, true
}

// Transition is a change of state, for logs, events and metrics.
type Transition struct {
	Key      string
	From, To State
	At       time.Time
	Reason   string
}

// OnResult applies the outcome of a call guarded by r, reported at now.
// retryAfter is the Retry-After of a RateLimited outcome (capped at
// MaxRetryAfter; ignored for other outcomes). It returns the next record,
// whether it must be persisted (with Version one higher), and the state
// transition, if any.
//
//   - Closed: a success changes nothing (changed=false: a healthy API costs
//     no writes; failures within the window are not forgiven by it). A
//     failure counts in the window (a window older than Window starts over
//     at now) and opens the circuit for Cooldown at Threshold. A 429 counts
//     the same and opens it at once until now+retryAfter, or until the
//     later of that and now+Cooldown at Threshold.
//   - Open: results of calls admitted before it opened change nothing,
//     except a 429 whose Retry-After ends later than OpenUntil, which
//     extends it.
//   - Half-open with a live probe lease: the result is the probe's. A
//     success closes the circuit and forgets every failure; a failure
//     re-opens it for a fresh Cooldown (a 429: the later of Cooldown and
//     its Retry-After). Since Admit lets nobody else through during the
//     lease, only a call that started before the circuit opened, a full
//     Cooldown earlier, could report here instead.
//   - Half-open without a live lease: no probe is running, so the result
//     is a late one and changes nothing, except a 429 with a Retry-After,
//     which re-opens the circuit until then.
//   - Ignored changes nothing in any state (a probe's lease then lapses
//     and another call probes).
func OnResult(c Config, r Record, o Outcome, retryAfter time.Duration, now time.Time) (next Record, changed bool, transition *Transition) {
	if o == Ignored {
		return r, false, nil
	}
	retryAfter = min(max(retryAfter, 0), MaxRetryAfter)
	if o != RateLimited {
		retryAfter = 0
	}
	from := r.Effective(now)
	next = r
	open := func(until time.Time, reason string) {
		next.State, next.OpenedAt, next.OpenUntil = Open, now, until
		next.ProbeOwner, next.ProbeUntil = "", time.Time{}
		transition = &Transition{Key: r.Key, From: from, To: Open, At: now, Reason: reason}
	}
	switch from {
	case Closed:
		if o == Success {
			return r, false, nil
		}
		next.State = Closed
		if next.WindowStart.IsZero() || !now.Before(next.WindowStart.Add(c.Window)) {
			next.Failures, next.WindowStart = 0, now
		}
		next.Failures++
		tripped := next.Failures >= c.Threshold
		switch {
		case o == RateLimited && tripped:
			open(now.Add(max(c.Cooldown, retryAfter)),
				fmt.Sprintf("rate limited (Retry-After %s); %d failures within %s", retryAfter, next.Failures, c.Window))
		case o == RateLimited:
			open(now.Add(retryAfter), fmt.Sprintf("rate limited (Retry-After %s)", retryAfter))
		case tripped:
			open(now.Add(c.Cooldown), fmt.Sprintf("%d failures within %s", next.Failures, c.Window))
		}
	case Open:
		until := now.Add(retryAfter)
		if retryAfter == 0 || !until.After(r.OpenUntil) {
			return r, false, nil
		}
		next.OpenUntil = until
	case HalfOpen:
		if !r.probing(now) {
			if retryAfter == 0 {
				return r, false, nil
			}
			next.Failures++
			open(now.Add(retryAfter), fmt.Sprintf("rate limited (Retry-After %s)", retryAfter))
			break
		}
		switch o {
		case Success:
			next = Record{Key: r.Key, State: Closed}
			transition = &Transition{Key: r.Key, From: HalfOpen, To: Closed, At: now, Reason: "probe succeeded"}
		case RateLimited:
			next.Failures++
			open(now.Add(max(c.Cooldown, retryAfter)), fmt.Sprintf("probe rate limited (Retry-After %s)", retryAfter))
		default:
			next.Failures++
			open(now.Add(c.Cooldown), "probe failed")
		}
	}
	next.UpdatedAt, next.Version = now, r.Version+1
	return next, true, transition
}

// OnHostResult applies to r, a host's circuit (the one every owner's calls
// to that host share), the outcome of a call made by owner, reported at
// now. owner names who the call was made for: an OwnerKey, else the key of
// the token it used (a token counts as an owner of its own), "" when
// neither is known. It is OnResult but for two rules, so that no one owner
// can stop everyone:
//
//   - A 429 of a known owner is that owner's (or its token's) own limit;
//     the token's circuit is flagged (OnResult) and, for the host, the 429
//     is an answer, a success: a half-open probe that gets one closes the
//     circuit. A 429 of nobody known counts as a failure.
//   - While closed, a failure counts its owner once per window: the
//     circuit opens for Cooldown once Config.HostOwners distinct owners
//     failed within one Window (Failures is their number, Owners their
//     names). Another failure of an owner already counted changes nothing
//     and costs no write.
//
// Open and half-open are as in OnResult, without a Retry-After: a host's
// circuit is never flagged by a 429.
func OnHostResult(c Config, r Record, o Outcome, owner string, now time.Time) (next Record, changed bool, transition *Transition) {
	switch {
	case o == RateLimited && owner != "":
		o = Success
	case o == RateLimited:
		o = Failure
	}
	if o != Failure || r.Effective(now) != Closed {
		return OnResult(c, r, o, 0, now)
	}
	next = r
	next.State = Closed
	if next.WindowStart.IsZero() || !now.Before(next.WindowStart.Add(c.Window)) {
		next.Failures, next.WindowStart, next.Owners = 0, now, nil
	} else if slices.Contains(next.Owners, owner) {
		return r, false, nil
	}
	// A copy: r (and its Owners) may be shared by a snapshot.
	next.Owners = append(slices.Clip(next.Owners), owner)
	next.Failures = len(next.Owners)
	if next.Failures >= c.hostOwners() {
		next.State, next.OpenedAt, next.OpenUntil = Open, now, now.Add(c.Cooldown)
		next.ProbeOwner, next.ProbeUntil = "", time.Time{}
		transition = &Transition{Key: r.Key, From: Closed, To: Open, At: now,
			Reason: fmt.Sprintf("failures of %d owners within %s", next.Failures, c.Window)}
	}
	next.UpdatedAt, next.Version = now, r.Version+1
	return next, true, transition
}

// OpenError is the "circuit open" refusal: the call never reached the API,
// and may be tried again at RetryAt.
type OpenError struct {
	Key     string
	RetryAt time.Time
}

// Error says "circuit open for <key> until <RFC 3339 UTC time>"; keys never
// hold a secret (see TokenKey), so neither does the message.
func (e *OpenError) Error() string {
	return fmt.Sprintf("circuit open for %s until %s", e.Key, e.RetryAt.UTC().Format(time.RFC3339))
}

// BreakerKey names the open breaker (GET /v1/admin/breakers lists it); a
// job waiting for it shows it (job.Wait.Breaker).
func (e *OpenError) BreakerKey() string { return e.Key }

// RetryAfterTime is when the refused call may be tried again.
func (e *OpenError) RetryAfterTime() time.Time { return e.RetryAt }

// Key names a breaker: kind and value joined by a colon, e.g.
// Key("host", "www.deviantart.com") = "host:www.deviantart.com". Never
// pass a secret as value; use TokenKey for credentials.
func Key(kind, value string) string { return kind + ":" + value }

// TokenKey names the breaker of a credential (an access token or an
// account id) as "token:" and the first 16 hex digits (64 bits) of its
// SHA-256: stable, distinct for distinct credentials in practice, and the
// credential cannot be recovered from it.
func TokenKey(accessOrAccountID string) string {
	h := sha256.Sum256([]byte(accessOrAccountID))
	return Key("token", hex.EncodeToString(h[:8]))
}

// OwnerKey names an owner (a tenant) as a host's circuit counts it:
// "owner:" and the first 16 hex digits of the SHA-256 of its id.
func OwnerKey(owner string) string {
	h := sha256.Sum256([]byte(owner))
	return Key("owner", hex.EncodeToString(h[:8]))
}
