package job

import (
	"errors"
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)

func queued() Job {
	q := t0
	return Job{Status: Queued, QueuedAt: &q, MaxAttempts: 7, Items: []Item{{ID: "a", Status: ItemPending}, {ID: "b", Status: ItemPublished}}}
}

func TestClaimCountsTheRunAndMarksItemsTried(t *testing.T) {
	t.Parallel()
	j := queued()
	tried, err := j.Claim("w1", t0.Add(time.Minute), t0)
	if err != nil {
		t.Fatal(err)
	}
	if j.Status != Running || j.Attempts != 1 || j.LeaseOwner != "w1" || !j.LeaseUntil.Equal(t0.Add(time.Minute)) {
		t.Fatalf("after the claim: %+v", j)
	}
	if tried[0] || tried[1] || !j.Items[0].Tried || j.Items[1].Tried {
		t.Fatalf("first claim: tried before %v, items %+v; want none before, the unfinished one now", tried, j.Items)
	}
	// A retry resets the attempts but not what the items went through.
	_ = j.Apply(Fail, t0)
	_ = j.Apply(Retry, t0)
	if tried, _ = j.Claim("w2", t0.Add(time.Minute), t0); !tried[0] || j.Attempts != 1 {
		t.Errorf("after a retry: tried before %v attempts %d; want item a tried before, attempt 1", tried, j.Attempts)
	}
	done := Job{Status: Succeeded}
	if _, err := done.Claim("w", t0, t0); !errors.Is(err, ErrTransition) {
		t.Errorf("claiming a finished job: %v", err)
	}
}

func TestSnoozeAndRetryLater(t *testing.T) {
	t.Parallel()
	j := queued()
	_, _ = j.Claim("w", t0.Add(time.Minute), t0)
	if err := j.Snooze("circuit_open", t0.Add(5*time.Minute), t0); err != nil {
		t.Fatal(err)
	}
	if j.Status != Queued || j.Attempts != 0 || !j.RetryAt.Equal(t0.Add(5*time.Minute)) || j.LeaseOwner != "" {
		t.Errorf("snoozed: %+v; want queued, no attempt spent, retry at +5m, no lease", j)
	}
	_, _ = j.Claim("w", t0.Add(time.Minute), t0)
	e := &Error{Code: "temporary_error"}
	if err := j.RetryLater(e, t0.Add(4*time.Second), t0); err != nil {
		t.Fatal(err)
	}
	if j.Attempts != 1 || j.Error != e || j.Phase != "retrying" {
		t.Errorf("retry later: attempts %d error %v phase %q; want the attempt spent", j.Attempts, j.Error, j.Phase)
	}
}

func TestParkUnparkResend(t *testing.T) {
	t.Parallel()
	j := queued()
	if err := j.Park("paused", t0.Add(time.Hour), t0); err != nil {
		t.Fatal(err)
	}
	if j.Waiting != "paused" || !j.RetryAt.Equal(t0.Add(time.Hour)) || j.Attempts != 0 {
		t.Fatalf("parked: %+v", j)
	}
	if err := j.Resend(20*time.Minute, t0); !errors.Is(err, ErrTransition) {
		t.Errorf("re-sending a parked job: %v; the release sweep owns it", err)
	}
	now := t0.Add(time.Hour)
	if err := j.Unpark(now); err != nil {
		t.Fatal(err)
	}
	if j.Waiting != "" || j.RetryAt != nil || !j.QueuedAt.Equal(now) {
		t.Fatalf("unparked: %+v", j)
	}
	if err := j.Unpark(now); !errors.Is(err, ErrTransition) {
		t.Errorf("unparking twice: %v", err)
	}
	// Re-sends of a possibly lost message: each doubles the wait.
	want := []time.Duration{0, 20 * time.Minute, 60 * time.Minute, 140 * time.Minute}
	for n := 1; n < len(want); n++ {
		if err := j.Resend(20*time.Minute, now); err != nil {
			t.Fatal(err)
		}
		if got := j.StuckFrom.Sub(now); got != want[n] || j.Resends != n || j.Attempts != 0 {
			t.Errorf("re-send %d: stuck measured from now+%s (want +%s), resends %d, attempts %d", n, got, want[n], j.Resends, j.Attempts)
		}
	}
	for range 20 {
		_ = j.Resend(20*time.Minute, now)
	}
	if got := j.StuckFrom.Sub(now); got != 20*time.Minute*((1<<MaxResendDoublings)-1) {
		t.Errorf("the doubling is not capped: +%s", got)
	}
	// A claim ends the waiting bookkeeping.
	_, _ = j.Claim("w", now, now)
	if j.Resends != 0 || j.StuckFrom != nil || j.Waiting != "" {
		t.Errorf("claimed: %+v", j)
	}
	running := Job{Status: Running}
	if err := running.Park("x", t0, t0); !errors.Is(err, ErrTransition) {
		t.Errorf("parking a running job: %v", err)
	}
}
