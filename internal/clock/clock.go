// Package clock gives tests one simulated clock that only moves when the
// test moves it.
//
// Services take the time as a `now func() time.Time`; a test
// passes a Simulated's Now and advances it, so no test of logic waits for
// real time to pass.
package clock

import (
	"sync"
	"time"
)

// Simulated is a clock that stands still until Advance or Set moves it. It
// is safe for concurrent use: services read it while the test moves it.
type Simulated struct {
	mu sync.Mutex
	t  time.Time
}

// NewSimulated returns a clock that reads t (in UTC) until it is moved.
func NewSimulated(t time.Time) *Simulated { return &Simulated{t: t.UTC()} }

// Now returns the clock's current time.
func (c *Simulated) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock forward by d (backward when d is negative) and
// returns the new time.
func (c *Simulated) Advance(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
	return c.t
}

// Set moves the clock to t (in UTC).
func (c *Simulated) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t.UTC()
}
