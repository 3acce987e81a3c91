package handler

import (
	"context"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/google/go-cmp/cmp"
)

func msg(id, group string) events.SQSMessage {
	return events.SQSMessage{MessageId: id, Attributes: map[string]string{"MessageGroupId": group}}
}

// TestConsumeFIFOKeepsGroupOrderAndFailsTheRestOfAGroup: a failure in one
// group fails that message and every later one of its group, and nothing
// of another group; within a group the order is kept.
func TestConsumeFIFOKeepsGroupOrderAndFailsTheRestOfAGroup(t *testing.T) {
	t.Parallel()
	ev := events.SQSEvent{Records: []events.SQSMessage{
		msg("a1", "a"), msg("b1", "b"), msg("a2", "a"), msg("c1", "c"), msg("b2", "b"), msg("a3", "a"), msg("b3", "b"),
	}}
	var mu sync.Mutex
	seen := map[string][]string{}
	resp := ConsumeFIFO(context.Background(), ev, func(_ context.Context, m events.SQSMessage) bool {
		mu.Lock()
		g := m.Attributes["MessageGroupId"]
		seen[g] = append(seen[g], m.MessageId)
		mu.Unlock()
		return m.MessageId != "a2" // a2 fails: a3 must not even run
	})
	var failed []string
	for _, f := range resp.BatchItemFailures {
		failed = append(failed, f.ItemIdentifier)
	}
	sort.Strings(failed)
	if diff := cmp.Diff([]string{"a2", "a3"}, failed); diff != "" {
		t.Errorf("failures (-want +got):\n%s", diff)
	}
	want := map[string][]string{"a": {"a1", "a2"}, "b": {"b1", "b2", "b3"}, "c": {"c1"}}
	if diff := cmp.Diff(want, seen); diff != "" {
		t.Errorf("processed per group, in order (-want +got):\n%s", diff)
	}
}

// TestConsumeFIFORunsGroupsInParallel: the jobs of a batch do not wait for
// each other.
func TestConsumeFIFORunsGroupsInParallel(t *testing.T) {
	t.Parallel()
	var ev events.SQSEvent
	for _, g := range []string{"a", "b", "c", "d", "e"} {
		ev.Records = append(ev.Records, msg(g+"1", g))
	}
	var running, peak atomic.Int32
	release := make(chan struct{})
	started := make(chan struct{}, len(ev.Records))
	go func() {
		// Every group started: let them all finish. The minute only
		// bounds a consumer that runs the groups one by one, whose first
		// group would otherwise wait here for ever.
		timeout := time.After(time.Minute)
		for range len(ev.Records) {
			select {
			case <-started:
			case <-timeout:
				close(release)
				return
			}
		}
		close(release)
	}()
	ConsumeFIFO(context.Background(), ev, func(context.Context, events.SQSMessage) bool {
		n := running.Add(1)
		started <- struct{}{}
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		<-release
		running.Add(-1)
		return true
	})
	if peak.Load() != 5 {
		t.Errorf("at most %d groups ran at once, want 5", peak.Load())
	}
}
