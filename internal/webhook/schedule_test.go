package webhook_test

import (
	"testing"
	"time"

	"github.com/conveyor/conveyor/internal/webhook"
)

// TestRetrySchedule: waits double from the base to the cap, each less up
// to half at random; the default schedule spans about a day.
func TestRetrySchedule(t *testing.T) {
	t.Parallel()
	r := 0.0
	s := webhook.Schedule{Base: 30 * time.Second, Max: 6 * time.Hour, Attempts: 15, Rand: func() float64 { return r }}
	want := []time.Duration{30 * time.Second, time.Minute, 2 * time.Minute, 4 * time.Minute, 8 * time.Minute, 16 * time.Minute,
		32 * time.Minute, 64 * time.Minute, 128 * time.Minute, 256 * time.Minute, 6 * time.Hour, 6 * time.Hour, 6 * time.Hour, 6 * time.Hour}
	for i, w := range want {
		if got := s.Wait(i + 1); got != w {
			t.Errorf("wait after failure %d: %s, want %s", i+1, got, w)
		}
	}
	r = 0.999999
	if got := s.Wait(1); got < 15*time.Second || got > 15*time.Second+time.Millisecond {
		t.Errorf("the most jitter takes %s of 30s, want half", got)
	}
	if got := s.Wait(1000); got < 3*time.Hour || got > 6*time.Hour {
		t.Errorf("a late wait %s, want within the cap's half and the cap", got)
	}
	shortest, longest := s.Span()
	if shortest < 16*time.Hour || longest > 33*time.Hour || shortest > longest {
		t.Errorf("the default schedule spans %s to %s, want about a day", shortest, longest)
	}
	if got := (webhook.Schedule{Base: 100 * time.Millisecond, Max: 500 * time.Millisecond, Attempts: 3}).Wait(1); got != time.Second {
		t.Errorf("a wait under a second: %s, want a second (the shortest SQS visibility)", got)
	}
	for _, bad := range []webhook.Schedule{{}, {Base: time.Second, Max: time.Millisecond, Attempts: 1}, {Base: time.Second, Max: 13 * time.Hour, Attempts: 1}, {Base: time.Second, Max: time.Second}} {
		if bad.Validate() == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
	t.Logf("the default schedule: %d attempts over %s to %s", s.Attempts, shortest, longest)
}
