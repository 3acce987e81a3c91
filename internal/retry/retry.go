// Package retry decides what a worker does after an error: retry later with
// exponential backoff and full jitter, fail now, or snooze without spending
// an attempt. The error vocabulary (Permanent, Temporary, Snooze) and the
// classification of API, network and deadline errors live here, in one place.
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

// Defaults, as in the configuration table.
const (
	BaseDefault        = 2 * time.Second
	MaxDefault         = 15 * time.Minute
	MaxAttemptsDefault = 7
	// MaxVisibility is the longest SQS can hide a message (12 h).
	MaxVisibility = 12 * time.Hour
)

// Class is what kind of failure an error is.
type Class int

// The classes.
const (
	ClassTemporary Class = iota
	ClassPermanent
	ClassSnooze
)

func (c Class) String() string {
	switch c {
	case ClassPermanent:
		return "permanent"
	case ClassSnooze:
		return "snooze"
	default:
		return "temporary"
	}
}

type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

type temporaryError struct {
	err   error
	after time.Duration
}

func (e *temporaryError) Error() string { return e.err.Error() }
func (e *temporaryError) Unwrap() error { return e.err }

type snoozeError struct {
	err   error
	until time.Time
}

func (e *snoozeError) Error() string { return e.err.Error() }
func (e *snoozeError) Unwrap() error { return e.err }

// Permanent marks err as not worth retrying: the job fails now.
func Permanent(err error) error { return &permanentError{err} }

// Temporary marks err as worth retrying, not before after (0: backoff only).
func Temporary(err error, after time.Duration) error { return &temporaryError{err, after} }

// Snooze asks to come back at until without spending an attempt (the
// circuit is open: the call was never made).
func Snooze(err error, until time.Time) error { return &snoozeError{err, until} }

// Classify says what kind of failure err is. Explicit marks win; then an
// error's own Temporary() (API errors: 429 and 5xx temporary, other 4xx
// permanent); deadlines, cancellations and network errors are temporary.
// Unknown errors are temporary too: they are usually infrastructure
// hiccups, and MaxAttempts bounds them.
func Classify(err error) Class {
	var p *permanentError
	var t *temporaryError
	var s *snoozeError
	switch {
	case errors.As(err, &s):
		return ClassSnooze
	case errors.As(err, &p):
		return ClassPermanent
	case errors.As(err, &t):
		return ClassTemporary
	}
	var tmp interface{ Temporary() bool }
	if errors.As(err, &tmp) {
		if _, isNet := tmp.(net.Error); !isNet {
			if tmp.Temporary() {
				return ClassTemporary
			}
			return ClassPermanent
		}
	}
	var ne net.Error
	var op *net.OpError
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled),
		errors.As(err, &ne), errors.As(err, &op), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.ECONNREFUSED):
		return ClassTemporary
	}
	return ClassTemporary
}

// retryAfter is the least delay err asks for.
func retryAfter(err error) time.Duration {
	var t *temporaryError
	if errors.As(err, &t) && t.after > 0 {
		return t.after
	}
	var ra interface{ RetryAfter() time.Duration }
	if errors.As(err, &ra) {
		return ra.RetryAfter()
	}
	return 0
}

// Policy is the retry policy of a job type.
type Policy struct {
	// Base and Max bound the exponential backoff.
	Base, Max time.Duration
	// MaxAttempts is the attempt budget.
	MaxAttempts int
	// Rand returns a number in [0,1); default math/rand/v2.
	Rand func() float64
}

// DefaultPolicy is Base 2s, Max 15m, 7 attempts.
func DefaultPolicy() Policy {
	return Policy{Base: BaseDefault, Max: MaxDefault, MaxAttempts: MaxAttemptsDefault}
}

// Validate checks the policy.
func (p Policy) Validate() error {
	switch {
	case p.Base <= 0:
		return errors.New("retry base must be positive")
	case p.Max < p.Base:
		return errors.New("retry max must not be below base")
	case p.MaxAttempts < 1:
		return errors.New("max attempts must be at least 1")
	}
	return nil
}

// Backoff is the full-jitter delay before attempt+1: uniform in
// [0, min(Max, Base·2^(attempt-1))]. Safe for any attempt.
func (p Policy) Backoff(attempt int) time.Duration {
	if attempt < 1 {
		attempt = 1
	}
	ceiling := float64(p.Max)
	if exp := float64(p.Base) * math.Pow(2, float64(attempt-1)); exp < ceiling {
		ceiling = exp
	}
	r := p.Rand
	if r == nil {
		r = rand.Float64
	}
	return time.Duration(r() * ceiling)
}

// Decision is what to do after a failed attempt.
type Decision struct {
	Class Class
	// Retry: run again after Delay.
	Retry bool
	Delay time.Duration
	// Exhausted: a temporary failure with no attempts left.
	Exhausted bool
	Reason    string
}

// Decide classifies err after attempt attempts (1-based, this one included).
func (p Policy) Decide(err error, attempt int, now time.Time) Decision {
	c := Classify(err)
	switch c {
	case ClassSnooze:
		var s *snoozeError
		errors.As(err, &s)
		d := s.until.Sub(now)
		if d < time.Second {
			d = time.Second
		}
		return Decision{Class: c, Retry: true, Delay: min(d, MaxVisibility), Reason: "snoozed: " + err.Error()}
	case ClassPermanent:
		return Decision{Class: c, Reason: "permanent: " + err.Error()}
	}
	if attempt >= p.MaxAttempts {
		return Decision{Class: c, Exhausted: true, Reason: fmt.Sprintf("temporary, but %d of %d attempts spent", attempt, p.MaxAttempts)}
	}
	d := p.Backoff(attempt)
	if ra := retryAfter(err); ra > 0 {
		d = max(d, min(ra, MaxVisibility))
	}
	return Decision{Class: c, Retry: true, Delay: d, Reason: "temporary: " + err.Error()}
}

// VisibilityFor is d in whole seconds for ChangeMessageVisibility, rounded
// up and clamped to [0, 43200].
func VisibilityFor(d time.Duration) int32 {
	if d <= 0 {
		return 0
	}
	s := int64((d + time.Second - 1) / time.Second)
	return int32(min(s, int64(MaxVisibility/time.Second)))
}
