package queue

import (
	"strings"
	"testing"
)

func TestFairGroups(t *testing.T) {
	t.Parallel()
	f := Fairness{PerPlan: map[string]int{"free": 2, "pro": 4, "off": 0}, PerOwner: map[string]int{"big": 16}}
	groups := map[string]bool{}
	for i := range 200 {
		m := Message{Kind: KindJob, JobID: "job_" + strings.Repeat("a", i%7) + string(rune('a'+i%26)) + string(rune('a'+i/26)), Owner: "u1", Plan: "free", Send: 1}
		g := f.group(m)
		if !IsOwnerGroup(g) {
			t.Fatalf("%+v: group %q, want one of the owner's slots", m, g)
		}
		if again := f.group(m); again != g {
			t.Fatalf("the same job in two groups: %q, %q", g, again)
		}
		groups[g] = true
	}
	if len(groups) != 2 {
		t.Errorf("a free owner's jobs in %d groups, want its 2 slots: %v", len(groups), groups)
	}
	for _, c := range []struct {
		name string
		m    Message
		want string
	}{
		{"an operator's override", Message{JobID: "job_x", Owner: "big", Plan: "free", Send: 1}, "o:big:"},
		{"zero slots: the job's own group", Message{JobID: "job_x", Owner: "u2", Plan: "off", Send: 3}, "job_x-3"},
		{"a moved message: the job's own group", Message{JobID: "job_x", Owner: "u1", Plan: "free", Send: 3}.Moved(), "job_x-3-m1"},
		{"no owner (a message from before owners were sent)", Message{JobID: "job_x", Send: 1}, "job_x-1"},
		{"a webhook delivery", Message{JobID: "job_x", Owner: "u1", DeliveryID: "dlv-1"}, "dlv-1"},
		{"an unknown plan: the default slots", Message{JobID: "job_x", Owner: "u3", Plan: "gold", Send: 1}, "o:u3:"},
	} {
		if g := f.group(c.m); !strings.HasPrefix(g, c.want) {
			t.Errorf("%s: group %q, want %q…", c.name, g, c.want)
		}
	}
	if g := (Fairness{}).group(Message{JobID: "job_x", Owner: "u1", Plan: "free", Send: 2}); g != "job_x-2" {
		t.Errorf("no fairness configured: %q, want a group per job", g)
	}
	// Each later send of a job takes the owner's next slot; a moved
	// message goes back to the slot it names.
	first := Message{JobID: "job_y", Owner: "u1", Plan: "free", Send: 1}
	second := first
	second.Send++
	if a, b := f.group(first), f.group(second); a == b || !IsOwnerGroup(b) {
		t.Errorf("a job's next send in %q after %q: want the owner's other slot", b, a)
	}
	waiting := first.Moved()
	waiting.Slot = f.group(first)
	back := waiting.Readmitted()
	if !waiting.Waits() || back.Waits() || back.dedupID() == waiting.dedupID() || back.dedupID() == first.dedupID() {
		t.Errorf("readmitted %+v from %+v: want a copy of its own, not waiting", back, waiting)
	}
	moved := Message{JobID: "job_x", Send: 3}.Moved().Moved()
	if moved.dedupID() != "job_x-3-m2" {
		t.Errorf("a second move's dedup id %q, want its own", moved.dedupID())
	}
	long := OwnerGroup(strings.Repeat("é", 80), 3)
	if len(long) > 128 || strings.ContainsFunc(long, func(r rune) bool { return r < '!' || r > '~' }) {
		t.Errorf("group of a long, non-ASCII owner %q: too long or not ASCII", long)
	}
}

func TestParseSlots(t *testing.T) {
	t.Parallel()
	got, err := ParseSlots(FairSlotsDefault)
	if err != nil || got["free"] != 2 || got["enterprise"] != 8 || FormatSlots(got) != "corporate=6,enterprise=8,free=2,pro=4,standard=3" {
		t.Fatalf("default: %v %v", got, err)
	}
	if got, err := ParseSlots(""); err != nil || len(got) != 0 {
		t.Errorf("empty: %v %v", got, err)
	}
	for _, bad := range []string{"free", "free=-1", "=3", "free=x", "free=1001"} {
		if _, err := ParseSlots(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
