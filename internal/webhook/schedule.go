package webhook

import (
	"errors"
	"math/rand/v2"
	"time"

	"github.com/conveyor/conveyor/internal/retry"
)

// Defaults of Schedule: 15 attempts over about a day (Span: 16h to 32h).
const (
	RetryBaseDefault   = 30 * time.Second
	RetryMaxDefault    = 6 * time.Hour
	MaxAttemptsDefault = 15
)

// Schedule spaces the attempts of one delivery: after the k-th failed
// attempt the next comes Base·2^(k-1) later, capped at Max, less up to
// half of it at random (so that deliveries that failed together do not
// come back together); Attempts bounds them, the first included.
type Schedule struct {
	// Base is the wait after the first failure (default RetryBaseDefault, 30s).
	Base time.Duration
	// Max caps every wait (default RetryMaxDefault, 6h; at most 12h, the
	// longest SQS visibility timeout).
	Max time.Duration
	// Attempts is the attempt budget (default MaxAttemptsDefault, 15).
	Attempts int
	// Rand returns a number in [0,1) for the jitter (default
	// math/rand/v2's Float64).
	Rand func() float64
}

func (s Schedule) withDefaults() Schedule {
	if s.Base == 0 {
		s.Base = RetryBaseDefault
	}
	if s.Max == 0 {
		s.Max = max(RetryMaxDefault, s.Base)
	}
	if s.Attempts == 0 {
		s.Attempts = MaxAttemptsDefault
	}
	if s.Rand == nil {
		s.Rand = rand.Float64
	}
	return s
}

// Validate reports a schedule that cannot work.
func (s Schedule) Validate() error {
	if s.Base <= 0 || s.Max < s.Base || s.Max > retry.MaxVisibility || s.Attempts < 1 {
		return errors.New("webhook retry schedule: Base > 0, Base ≤ Max ≤ 12h, Attempts ≥ 1")
	}
	return nil
}

// ceiling is the wait after the attempt-th failure before jitter.
func (s Schedule) ceiling(attempt int) time.Duration {
	d := s.Base
	for range max(attempt, 1) - 1 {
		if d >= s.Max/2 {
			return s.Max
		}
		d *= 2
	}
	return min(d, s.Max)
}

// Wait is how long after its attempt-th failed attempt (1-based) a
// delivery is tried again: in [ceiling/2, ceiling], at least a second.
func (s Schedule) Wait(attempt int) time.Duration {
	f := 0.0
	if s.Rand != nil {
		f = min(max(s.Rand(), 0), 1)
	}
	c := s.ceiling(attempt)
	return max(c-time.Duration(float64(c/2)*f), time.Second)
}

// Span is the shortest and the longest time from a delivery's first
// attempt to its last, when every attempt fails at once.
func (s Schedule) Span() (shortest, longest time.Duration) {
	for k := 1; k < s.Attempts; k++ {
		c := s.ceiling(k)
		shortest += max(c-c/2, time.Second)
		longest += max(c, time.Second)
	}
	return shortest, longest
}
