package job

import (
	"errors"
	"testing"
	"time"
)

// TestACancelledRunKeepsTheJobUntilItLetsGo: a cancel and a retry keep the
// running run's lease, so no other worker may claim the retried job before
// that run released it or its lease lapsed; the run's own ends clear it.
func TestACancelledRunKeepsTheJobUntilItLetsGo(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	fresh := func() *Job {
		j := &Job{Status: Queued, MaxAttempts: 7, Items: []Item{{ID: "itm_1", Status: ItemPending}}}
		if _, err := j.Claim("w-a", t0.Add(90*time.Second), t0); err != nil {
			t.Fatal(err)
		}
		return j
	}
	j := fresh()
	if err := j.Apply(Cancel, t0.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if j.LeaseOwner != "w-a" {
		t.Fatalf("cancel dropped the lease (owner %q)", j.LeaseOwner)
	}
	if err := j.Apply(Retry, t0.Add(2*time.Second)); err != nil {
		t.Fatal(err)
	}
	if j.Status != Queued || j.Attempts != 0 || j.LeaseOwner != "w-a" {
		t.Fatalf("after retry: %s, %d attempts, owner %q; want queued, 0, w-a", j.Status, j.Attempts, j.LeaseOwner)
	}
	var held *LeaseHeldError
	if _, err := j.Claim("w-b", t0.Add(3*time.Minute), t0.Add(3*time.Second)); !errors.As(err, &held) || !errors.Is(err, ErrLeaseHeld) {
		t.Fatalf("claim by another worker while held = %v, want a *LeaseHeldError", err)
	}
	if j.Status != Queued || j.Attempts != 0 {
		t.Fatalf("a refused claim changed the job: %s, %d attempts", j.Status, j.Attempts)
	}
	// The lease lapsed: the next run claims it.
	if _, err := j.Claim("w-b", t0.Add(3*time.Minute), t0.Add(91*time.Second)); err != nil {
		t.Fatalf("claim once the lease lapsed: %v", err)
	}
	if j.LeaseOwner != "w-b" || j.Attempts != 1 || !j.Items[0].Tried {
		t.Errorf("claimed: owner %q, attempts %d, tried %v", j.LeaseOwner, j.Attempts, j.Items[0].Tried)
	}

	// Released by the run that lost it: claimable at once.
	j = fresh()
	_ = j.Apply(Cancel, t0.Add(time.Second))
	if j.Release("w-b", t0.Add(2*time.Second)) {
		t.Error("a worker that does not hold the lease released it")
	}
	if !j.Release("w-a", t0.Add(2*time.Second)) || j.LeaseOwner != "" || j.LeaseUntil != nil {
		t.Errorf("release by its holder: owner %q until %v", j.LeaseOwner, j.LeaseUntil)
	}
	_ = j.Apply(Retry, t0.Add(3*time.Second))
	if _, err := j.Claim("w-b", t0.Add(time.Minute), t0.Add(3*time.Second)); err != nil {
		t.Errorf("claim after the release: %v", err)
	}

	// A running job is ended by its run, never released.
	j = fresh()
	if j.Release("w-a", t0) {
		t.Error("a running job was released")
	}
	for _, a := range []Action{Succeed, Fail} {
		j = fresh()
		if err := j.Apply(a, t0.Add(time.Second)); err != nil || j.LeaseOwner != "" {
			t.Errorf("%s: owner %q, %v; want the lease cleared", a, j.LeaseOwner, err)
		}
	}
}

// TestAnAbandonedRunLeavesTheJobClaimable: a run whose outcome could not
// be recorded gives the running job back at once, the attempt spent and
// the items still tried; only the run that holds the job may.
func TestAnAbandonedRunLeavesTheJobClaimable(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	j := &Job{Status: Queued, MaxAttempts: 7, Items: []Item{{ID: "itm_1", Status: ItemPending}}}
	if _, err := j.Claim("w-a", t0.Add(90*time.Second), t0); err != nil {
		t.Fatal(err)
	}
	if j.Abandon("w-b", t0.Add(time.Second)) {
		t.Error("a worker that does not hold the job abandoned it")
	}
	if !j.Abandon("w-a", t0.Add(time.Second)) {
		t.Fatal("the holder could not abandon its running job")
	}
	if j.Status != Queued || j.LeaseOwner != "" || j.LeaseUntil != nil || j.Attempts != 1 || !j.Items[0].Tried {
		t.Errorf("abandoned: %s, owner %q until %v, %d attempts, tried %v; want queued, no lease, 1, tried",
			j.Status, j.LeaseOwner, j.LeaseUntil, j.Attempts, j.Items[0].Tried)
	}
	if _, err := j.Claim("w-b", t0.Add(time.Minute), t0.Add(2*time.Second)); err != nil || j.Attempts != 2 {
		t.Errorf("claim after the abandon: %v, %d attempts; want claimed, 2", err, j.Attempts)
	}
	if err := j.Apply(Cancel, t0.Add(3*time.Second)); err != nil {
		t.Fatal(err)
	}
	if j.Abandon("w-b", t0.Add(4*time.Second)) || j.Status != Cancelled {
		t.Errorf("a cancelled job was abandoned (now %s): only a running one is", j.Status)
	}
}
