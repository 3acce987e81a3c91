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
		{"a webhook delivery without webhook slots", Message{JobID: "job_x", Owner: "u1", DeliveryID: "dlv-1"}, "dlv-1"},
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
	if !waiting.Waits() || back.Waits() || dedupID(back) == dedupID(waiting) || dedupID(back) == dedupID(first) {
		t.Errorf("readmitted %+v from %+v: want a copy of its own, not waiting", back, waiting)
	}
	moved := Message{JobID: "job_x", Send: 3}.Moved().Moved()
	if dedupID(moved) != "job_x-3-m2" {
		t.Errorf("a second move's dedup id %q, want its own", dedupID(moved))
	}
	long := OwnerGroup(strings.Repeat("é", 80), 3)
	if len(long) > 128 || strings.ContainsFunc(long, func(r rune) bool { return r < '!' || r > '~' }) {
		t.Errorf("group of a long, non-ASCII owner %q: too long or not ASCII", long)
	}
}

// TestWebhookGroups: a delivery goes to one of its owner's webhook
// slots, every delivery to one endpoint to the same slot; a moved delivery
// waits in a group of its own and goes back to its slot with a copy of its
// own.
func TestWebhookGroups(t *testing.T) {
	t.Parallel()
	f := Fairness{Webhooks: 4}
	slots := map[string]bool{}
	for i := range 100 {
		ep := "whe_" + string(rune('a'+i%26)) + string(rune('a'+i/26))
		var g string
		for j := range 5 {
			m := Message{Kind: KindWebhook, JobID: "job_" + string(rune('a'+j)), Owner: "u1", Seq: int64(j), DeliveryID: "dlv_" + ep + string(rune('a'+j)), Endpoint: ep}
			got := f.group(m)
			if !IsOwnerGroup(got) || (g != "" && got != g) {
				t.Fatalf("deliveries to %s in %q and %q, want one slot of the owner's", ep, g, got)
			}
			g = got
		}
		slots[g] = true
		job := f.group(Message{Kind: KindWebhook, JobID: "job_" + ep, Owner: "u1", DeliveryID: "dlv_" + ep})
		if !IsOwnerGroup(job) {
			t.Fatalf("a job's webhookUrl delivery in %q, want one of the owner's slots", job)
		}
		slots[job] = true
	}
	if len(slots) != 4 {
		t.Errorf("an owner's deliveries in %d groups, want its 4 webhook slots: %v", len(slots), slots)
	}
	m := Message{Kind: KindWebhook, JobID: "job_x", Owner: "u1", DeliveryID: "dlv_x", Endpoint: "whe_x"}
	waiting := m.Moved()
	waiting.Slot = f.group(m)
	back := waiting.Readmitted()
	if f.group(waiting) != "dlv_x-m1" || !waiting.Waits() || back.Waits() || dedupID(back) != "dlv_x-m2" {
		t.Errorf("a moved delivery in %q (waits %v), back as %q: want its own group, then a copy of its own", f.group(waiting), waiting.Waits(), dedupID(back))
	}
	if g := (Fairness{Webhooks: 4}).group(Message{JobID: "job_x", DeliveryID: "dlv_y"}); g != "dlv_y" {
		t.Errorf("a delivery naming no owner: %q, want a group of its own", g)
	}
}
