package job

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestNextCoversEveryStatusAndAction(t *testing.T) {
	t.Parallel()
	// want[action][from] = to; a missing entry means the transition is refused.
	want := map[Action]map[Status]Status{
		Release: {Scheduled: Queued},
		Start:   {Queued: Running, Running: Running},
		Succeed: {Running: Succeeded},
		Fail:    {Scheduled: Failed, Queued: Failed, Running: Failed},
		Requeue: {Queued: Queued, Running: Queued},
		Cancel:  {Scheduled: Cancelled, Queued: Cancelled, Running: Cancelled},
		Retry:   {Failed: Queued, Cancelled: Queued, Stale: Queued},
		Expire:  {Succeeded: Stale, Failed: Stale, Cancelled: Stale},
	}
	for a, tos := range want {
		for _, from := range Statuses {
			got, err := Next(from, a)
			to, ok := tos[from]
			switch {
			case ok && err != nil:
				t.Errorf("%s from %s: unexpected error %v", a, from, err)
			case ok && got != to:
				t.Errorf("%s from %s = %s, want %s", a, from, got, to)
			case !ok && !errors.Is(err, ErrTransition):
				t.Errorf("%s from %s = %s, %v; want ErrTransition", a, from, got, err)
			}
		}
	}
	if _, err := Next(Queued, Action("explode")); err == nil {
		t.Error("unknown action accepted")
	}
}

func TestContractConflicts(t *testing.T) {
	t.Parallel()
	// The API's 409 cases: cancel a finished job, retry an active one.
	for _, s := range []Status{Succeeded, Failed, Cancelled, Stale} {
		if Allowed(s, Cancel) {
			t.Errorf("cancel allowed from %s", s)
		}
	}
	for _, s := range []Status{Scheduled, Queued, Running, Succeeded} {
		if Allowed(s, Retry) {
			t.Errorf("retry allowed from %s", s)
		}
	}
}

// The phases of a job in these tests (the publish kind's).
const (
	PhaseToken    = "token"
	PhaseDownload = "download"
	PhaseUpload   = "upload"
	PhasePublish  = "publish"
)

func TestApplyKeepsFinishedWorkOnRetry(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	j := &Job{Status: Queued, Phases: NewPhases(PhaseToken, PhaseDownload, PhaseUpload, PhasePublish), Items: []Item{
		{ID: "itm_a", Status: ItemPublished, Output: &Output{DeviationID: "d1"}},
		{ID: "itm_b", Status: ItemFailed, StashItemID: 42, Error: &Error{Code: "x"}},
		{ID: "itm_c", Status: ItemFailed},
	}}
	steps := []Action{Start, Fail}
	for _, a := range steps {
		if err := j.Apply(a, now); err != nil {
			t.Fatal(err)
		}
	}
	j.CompletePhase(PhaseToken, "", now)
	j.Attempts = 3
	j.Error = &Error{Code: "boom"}
	if err := j.Apply(Retry, now.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	got := []ItemStatus{j.Items[0].Status, j.Items[1].Status, j.Items[2].Status}
	if diff := cmp.Diff([]ItemStatus{ItemPublished, ItemUploaded, ItemPending}, got); diff != "" {
		t.Errorf("items after retry (-want +got):\n%s", diff)
	}
	if j.Status != Queued || j.Attempts != 0 || j.Error != nil || j.FinishedAt != nil {
		t.Errorf("retry did not reset the job: %+v", j)
	}
	if j.Phases[0].Status != PhaseCompleted {
		t.Errorf("completed phase was reset: %+v", j.Phases[0])
	}
}

func TestApplyRefusedLeavesJobUntouched(t *testing.T) {
	t.Parallel()
	j := &Job{Status: Succeeded}
	before := *j
	err := j.Apply(Cancel, time.Now())
	var te *TransitionError
	if !errors.As(err, &te) || te.From != Succeeded || te.Action != Cancel {
		t.Fatalf("err = %v, want TransitionError{succeeded, cancel}", err)
	}
	if diff := cmp.Diff(before, *j); diff != "" {
		t.Errorf("job changed (-before +after):\n%s", diff)
	}
}

func TestProgressFollowsPhases(t *testing.T) {
	t.Parallel()
	now := time.Now()
	j := &Job{Phases: NewPhases(PhaseToken, PhaseDownload, PhaseUpload, PhasePublish)}
	tests := []struct {
		do   func()
		want int
	}{
		{func() { j.StartPhase(PhaseToken, "", now) }, 0},
		{func() { j.CompletePhase(PhaseToken, "", now) }, 25},
		{func() { j.StartPhase(PhaseDownload, "", now); j.SetPhaseProgress(PhaseDownload, 50, "1/2") }, 37},
		{func() { j.CompletePhase(PhaseDownload, "", now); j.CompletePhase(PhaseUpload, "", now) }, 75},
		{func() { j.CompletePhase(PhasePublish, "", now) }, 100},
	}
	for i, tt := range tests {
		tt.do()
		if j.Progress != tt.want {
			t.Errorf("step %d: progress = %d, want %d", i, j.Progress, tt.want)
		}
	}
	if got := j.CurrentPhase(); got != len(j.Phases) {
		t.Errorf("CurrentPhase = %d, want %d", got, len(j.Phases))
	}
}

func BenchmarkNext(b *testing.B) {
	for b.Loop() {
		_, _ = Next(Running, Succeed)
	}
}
