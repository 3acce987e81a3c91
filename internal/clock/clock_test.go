package clock_test

import (
	"sync"
	"testing"
	"time"

	"github.com/conveyor/conveyor/internal/clock"
)

func TestSimulatedMovesOnlyWhenTold(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 5, 1, 12, 0, 0, 0, time.FixedZone("MSK", 3*3600))
	c := clock.NewSimulated(t0)
	if got := c.Now(); !got.Equal(t0) || got.Location() != time.UTC {
		t.Fatalf("Now() = %v, want %v in UTC", got, t0)
	}
	if got := c.Now(); !got.Equal(t0) {
		t.Fatalf("the clock moved by itself: %v", got)
	}
	if got := c.Advance(90 * time.Second); !got.Equal(t0.Add(90*time.Second)) || !c.Now().Equal(got) {
		t.Fatalf("Advance(90s) = %v, Now() = %v, want %v", got, c.Now(), t0.Add(90*time.Second))
	}
	c.Advance(-time.Minute)
	if want := t0.Add(30 * time.Second); !c.Now().Equal(want) {
		t.Fatalf("after going back a minute Now() = %v, want %v", c.Now(), want)
	}
	later := time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)
	c.Set(later)
	if !c.Now().Equal(later) {
		t.Fatalf("after Set Now() = %v, want %v", c.Now(), later)
	}
}

func TestSimulatedIsSafeForConcurrentUse(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	c := clock.NewSimulated(t0)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				c.Advance(time.Second)
				_ = c.Now()
			}
		})
	}
	wg.Wait()
	if want := t0.Add(800 * time.Second); !c.Now().Equal(want) {
		t.Fatalf("Now() = %v, want %v after 800 one-second steps", c.Now(), want)
	}
}
