// Package retry decides, in one place, what a worker does after a failed
// attempt: retry later (exponential backoff with full jitter), fail now, or
// snooze without spending an attempt. It owns the error vocabulary that
// handlers use to say so (Permanent, Temporary, Snooze) and the
// classification of API, network and deadline errors that carry no mark.
//
// The package is pure: no I/O, and time and randomness are injected.
package retry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"syscall"
	"time"
)

// Limits that hold whatever the policy says.
const (
	// MaxVisibility is the longest SQS can hide a message (12 h): no delay
	// Decide returns is longer, whatever a Retry-After or a snooze asks.
	MaxVisibility = 12 * time.Hour
	// MinSnooze is the shortest delay of a snooze, so that a snooze whose
	// time has come (or passed) does not turn into a busy loop.
	MinSnooze = time.Second
)

// Class is what kind of failure an error is.
type Class int

// The classes. The zero value is ClassTemporary.
const (
	// ClassTemporary: the same attempt may succeed later; it spends an attempt.
	ClassTemporary Class = iota
	// ClassPermanent: retrying cannot help; the job fails now.
	ClassPermanent
	// ClassSnooze: the attempt was not made (e.g. the circuit is open);
	// come back later without spending an attempt.
	ClassSnooze
)

// String returns "temporary", "permanent" or "snooze".
func (c Class) String() string {
	switch c {
	case ClassTemporary:
		return "temporary"
	case ClassPermanent:
		return "permanent"
	case ClassSnooze:
		return "snooze"
	}
	return fmt.Sprintf("Class(%d)", int(c))
}

// mark is implemented by the three explicit wrappers.
type mark interface {
	error
	class() Class
}

// PermanentError marks an error as not worth retrying. Create it with
// Permanent; find it with errors.As. Its message is the wrapped error's.
type PermanentError struct{ err error }

// Error returns the wrapped error's message unchanged.
func (e *PermanentError) Error() string { return e.err.Error() }

// Unwrap returns the wrapped error.
func (e *PermanentError) Unwrap() error { return e.err }

func (e *PermanentError) class() Class { return ClassPermanent }

// TemporaryError marks an error as worth retrying, not sooner than After.
// Create it with Temporary; find it with errors.As. Its message is the
// wrapped error's.
type TemporaryError struct {
	err   error
	after time.Duration
}

// Error returns the wrapped error's message unchanged.
func (e *TemporaryError) Error() string { return e.err.Error() }

// Unwrap returns the wrapped error.
func (e *TemporaryError) Unwrap() error { return e.err }

// After is the least delay before the next attempt (0: backoff only).
func (e *TemporaryError) After() time.Duration { return e.after }

func (e *TemporaryError) class() Class { return ClassTemporary }

// SnoozeError asks to come back at Until without spending an attempt.
// Create it with Snooze; find it with errors.As. Its message is the wrapped
// error's.
type SnoozeError struct {
	err   error
	until time.Time
}

// Error returns the wrapped error's message unchanged.
func (e *SnoozeError) Error() string { return e.err.Error() }

// Unwrap returns the wrapped error.
func (e *SnoozeError) Unwrap() error { return e.err }

// Until is when the work may be tried again.
func (e *SnoozeError) Until() time.Time { return e.until }

func (e *SnoozeError) class() Class { return ClassSnooze }

// Permanent marks err as not worth retrying: the job fails now, its error
// kept with retryable=false. Permanent(nil) is nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &PermanentError{err: err}
}

// Temporary marks err as worth retrying; after > 0 is the least delay
// before the next attempt (e.g. a Retry-After), after ≤ 0 leaves the delay
// to the backoff. Temporary(nil, …) is nil.
func Temporary(err error, after time.Duration) error {
	if err == nil {
		return nil
	}
	return &TemporaryError{err: err, after: max(after, 0)}
}

// Snooze asks to come back at until without spending an attempt, for work
// that was never tried (the circuit is open). A snooze never exhausts the
// attempt budget. Snooze(nil, …) is nil.
func Snooze(err error, until time.Time) error {
	if err == nil {
		return nil
	}
	return &SnoozeError{err: err, until: until}
}

// Classify says what kind of failure err is. The rules, first match wins:
//
//  1. An explicit mark (Permanent, Temporary, Snooze) anywhere in err's
//     tree decides; when marks are nested the outermost wins, since the
//     code that wrapped last knew the most.
//  2. An error implementing interface{ Temporary() bool } that is not a
//     net.Error decides by it: an HTTP API error says true for 429 and
//     5xx, false for other 4xx. (net.Error's Temporary is deprecated and
//     false for a refused connection, so network errors skip this rule.)
//  3. Deadlines and cancellations (context.DeadlineExceeded,
//     context.Canceled), network errors (net.Error, *net.OpError),
//     io.ErrUnexpectedEOF, ECONNRESET and ECONNREFUSED are temporary.
//  4. Anything else is temporary too: unknown errors are, in practice,
//     infrastructure hiccups (an SDK throttle, a DNS blip) far more often
//     than bugs that retrying cannot fix, and MaxAttempts bounds the cost
//     of being wrong.
//
// A nil error is classified as temporary (rule 4).
func Classify(err error) Class {
	c, _ := classify(err)
	return c
}

// classify is Classify with a short reason for logs.
func classify(err error) (Class, string) {
	if err == nil {
		return ClassTemporary, "no error given"
	}
	var m mark
	if errors.As(err, &m) {
		return m.class(), "marked " + m.class().String()
	}
	var decided, temporary bool
	walk(err, func(e error) bool {
		t, ok := e.(interface{ Temporary() bool })
		if !ok {
			return true
		}
		if _, isNet := e.(net.Error); isNet {
			return true
		}
		decided, temporary = true, t.Temporary()
		return false
	})
	if decided {
		if temporary {
			return ClassTemporary, "the error says it is temporary"
		}
		return ClassPermanent, "the error says it is not temporary"
	}
	var ne net.Error
	var op *net.OpError
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return ClassTemporary, "deadline exceeded"
	case errors.Is(err, context.Canceled):
		return ClassTemporary, "canceled"
	case errors.As(err, &ne) && ne.Timeout():
		return ClassTemporary, "timeout"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.ECONNREFUSED):
		return ClassTemporary, "connection refused or reset"
	case errors.Is(err, io.ErrUnexpectedEOF):
		return ClassTemporary, "unexpected EOF"
	case errors.As(err, &op), errors.As(err, &ne):
		return ClassTemporary, "network error"
	}
	return ClassTemporary, "unknown error, assumed temporary"
}

// walk visits err's tree depth first, in the order errors.As does, until
// visit returns false.
func walk(err error, visit func(error) bool) bool {
	if err == nil {
		return true
	}
	if !visit(err) {
		return false
	}
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		return walk(u.Unwrap(), visit)
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			if !walk(e, visit) {
				return false
			}
		}
	}
	return true
}

// leastDelay is the longest delay err's tree asks for: the outermost
// Temporary mark's after and any RetryAfter() in the tree, capped at
// MaxVisibility.
func leastDelay(err error) time.Duration {
	var least time.Duration
	walk(err, func(e error) bool {
		switch t := e.(type) {
		case *TemporaryError:
			least = max(least, t.after)
		case interface{ RetryAfter() time.Duration }:
			least = max(least, t.RetryAfter())
		}
		return true
	})
	return min(least, MaxVisibility)
}

// Policy is the retry policy of a job type. The zero Policy is not valid;
// the publisher's comes from internal/config (CONVEYOR_RETRY_BASE,
// CONVEYOR_RETRY_MAX, CONVEYOR_MAX_ATTEMPTS, CONVEYOR_PARK_AFTER), where
// the defaults live.
type Policy struct {
	// Base is the ceiling of the first backoff; each attempt doubles it.
	Base time.Duration
	// Max caps every backoff (at most MaxVisibility, 12h).
	Max time.Duration
	// MaxAttempts is the attempt budget, the first attempt included.
	MaxAttempts int
	// Rand returns a number in [0,1) for the jitter (default
	// math/rand/v2's Float64). Values outside [0,1) are clamped.
	Rand func() float64
	// ParkAfter is the shortest wait that moves a job from the queue to
	// the table (see Park; 0: only waits near the DLQ park).
	ParkAfter time.Duration
}

// Validate reports whether the policy can be used: Base positive, Max
// between Base and MaxVisibility, at least one attempt.
func (p Policy) Validate() error {
	switch {
	case p.Base <= 0:
		return fmt.Errorf("retry base must be positive, got %s", p.Base)
	case p.Max < p.Base:
		return fmt.Errorf("retry max (%s) must not be below retry base (%s)", p.Max, p.Base)
	case p.Max > MaxVisibility:
		return fmt.Errorf("retry max (%s) must not exceed %s, the longest SQS visibility timeout", p.Max, MaxVisibility)
	case p.MaxAttempts < 1:
		return fmt.Errorf("max attempts must be at least 1, got %d", p.MaxAttempts)
	}
	return nil
}

// ceiling is min(Max, Base·2^(attempt-1)) without overflow.
func (p Policy) ceiling(attempt int) time.Duration {
	if p.Base <= 0 || p.Max <= 0 {
		return 0
	}
	shift := max(attempt, 1) - 1
	if shift >= 63 || p.Base > p.Max>>shift {
		return p.Max
	}
	return p.Base << shift
}

// Backoff is the full-jitter delay after the attempt-th failure (1-based):
// uniform in [0, min(Max, Base·2^(attempt-1))). It never overflows and never
// exceeds Max, however large attempt is; attempt < 1 counts as 1.
func (p Policy) Backoff(attempt int) time.Duration {
	ceil := p.ceiling(attempt)
	if ceil == 0 {
		return 0
	}
	r := rand.Float64
	if p.Rand != nil {
		r = p.Rand
	}
	f := r()
	switch {
	case !(f >= 0): // negative or NaN
		f = 0
	case f >= 1:
		f = math.Nextafter(1, 0)
	}
	return min(time.Duration(f*float64(ceil)), ceil)
}

// Decision is what the worker does after a failed attempt.
type Decision struct {
	// Class is the failure's class (see Classify).
	Class Class
	// Retry: try again after Delay. For ClassSnooze the attempt is not
	// spent.
	Retry bool
	// Delay is how long to wait before the next attempt (0 unless Retry);
	// never longer than MaxVisibility.
	Delay time.Duration
	// Exhausted: a temporary failure with no attempt left; the job fails.
	Exhausted bool
	// Spent: the attempt counts against MaxAttempts. It does not when the
	// call was refused before it reached the API (snooze) or the API said
	// "not now" (429): waiting is not a run.
	Spent bool
	// Reason is a short explanation for logs; it never repeats the error's
	// message, which callers log on its own.
	Reason string
}

// Decide says what to do after err ended an attempt. attempt counts the
// attempts spent, this one included (1-based; < 1 counts as 1).
//
//   - Permanent: Retry=false.
//   - Snooze: Retry=true, Delay=until-now (at least MinSnooze), never
//     exhausted.
//   - Temporary with attempt ≥ MaxAttempts: Exhausted=true, Retry=false.
//   - Temporary otherwise: Retry=true, Delay=max(Backoff(attempt), least),
//     where least is the Temporary mark's after or the error's RetryAfter(),
//     whichever is longer. Delay is thus at most Max unless the error itself
//     asked for more, and never more than MaxVisibility.
func (p Policy) Decide(err error, attempt int, now time.Time) Decision {
	attempt = max(attempt, 1)
	c, why := classify(err)
	switch c {
	case ClassPermanent:
		return Decision{Class: c, Spent: true, Reason: "permanent: " + why}
	case ClassSnooze:
		var s *SnoozeError
		errors.As(err, &s)
		d := min(max(s.until.Sub(now), MinSnooze), MaxVisibility)
		return Decision{Class: c, Retry: true, Delay: d, Reason: fmt.Sprintf("snoozed for %s, no attempt spent: %s", d, why)}
	}
	if RateLimited(err) {
		d := max(p.Backoff(attempt), leastDelay(err))
		return Decision{Class: c, Retry: true, Delay: d,
			Reason: fmt.Sprintf("rate limited (%s), no attempt spent: retry in %s", why, d)}
	}
	if attempt >= p.MaxAttempts {
		return Decision{Class: c, Exhausted: true, Spent: true,
			Reason: fmt.Sprintf("temporary (%s), but %d of %d attempts spent", why, attempt, p.MaxAttempts)}
	}
	d := max(p.Backoff(attempt), leastDelay(err))
	return Decision{Class: c, Retry: true, Delay: d, Spent: true,
		Reason: fmt.Sprintf("temporary (%s): attempt %d of %d, retry in %s", why, attempt, p.MaxAttempts, d)}
}

// RateLimited reports whether err is the API answering 429 (an error with
// StatusCode() 429 in its chain).
func RateLimited(err error) bool {
	var sc interface{ StatusCode() int }
	return errors.As(err, &sc) && sc.StatusCode() == 429
}

// Park says whether a job that must wait for wait, whose message has been
// received receives times out of the maxReceives its queue allows before
// the dead-letter queue, should wait in the table instead of in the queue
// (message deleted, sent again when due). Long waits park, so an outage
// costs no receives; so does any wait once the message nears the DLQ,
// so that waiting can never dead-letter a live job. Short waits stay in
// the queue (a visibility timeout), which is faster than the release sweep.
func (p Policy) Park(wait time.Duration, receives, maxReceives int) bool {
	return (p.ParkAfter > 0 && wait >= p.ParkAfter) || (maxReceives > 0 && receives >= maxReceives-2)
}

// VisibilityFor converts a delay into whole seconds for SQS
// ChangeMessageVisibility: rounded up, clamped to [0, 43200].
func VisibilityFor(d time.Duration) int32 {
	if d <= 0 {
		return 0
	}
	if d >= MaxVisibility {
		return int32(MaxVisibility / time.Second)
	}
	s := d / time.Second
	if d%time.Second != 0 {
		s++
	}
	return int32(s)
}
