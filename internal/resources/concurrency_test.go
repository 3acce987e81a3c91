package resources_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/resources"
)

// Every function has a reservation; a queue consumer's covers its mappings'
// maximum concurrency (or the mappings would be throttled by their own
// function); the stream is capped below api and publisher; and each
// environment's reservations leave AWS's unreserved minimum in a default
// account (one account per environment).
func TestReservedConcurrency(t *testing.T) {
	t.Parallel()
	for _, env := range job.CloudEnvs {
		total := 0
		def := resources.For(env)
		mapped := map[string]int{}
		for _, q := range def.Queues {
			mapped[q.Consumer] += q.MaxConcurrency
		}
		for _, fn := range def.Functions {
			rc := resources.FunctionSizes[fn].ReservedConcurrency
			if rc <= 0 {
				t.Errorf("%s %s: no reserved concurrency", env, fn)
			}
			if rc < mapped[fn] {
				t.Errorf("%s %s: reserved concurrency %d below its mappings' maximum concurrency %d", env, fn, rc, mapped[fn])
			}
			total += rc
		}
		if max := resources.AccountConcurrencyDefault - resources.UnreservedConcurrencyMin; total > max {
			t.Errorf("%s reserves %d executions; a default account allows %d", env, total, max)
		}
	}
	size := resources.FunctionSizes
	if s := size[resources.FuncStream].ReservedConcurrency; s >= size[resources.FuncAPI].ReservedConcurrency ||
		s >= size[resources.FuncPublisher].ReservedConcurrency {
		t.Errorf("stream reservation %d is not below api's %d and publisher's %d", s,
			size[resources.FuncAPI].ReservedConcurrency, size[resources.FuncPublisher].ReservedConcurrency)
	}
}

func TestHighThroughputFIFO(t *testing.T) {
	t.Parallel()
	for _, env := range job.Envs {
		for _, q := range resources.For(env).Queues {
			if q.DeduplicationScope != "messageGroup" || q.FifoThroughputLimit != "perMessageGroupId" {
				t.Errorf("%s %s: DeduplicationScope %q, FifoThroughputLimit %q; want messageGroup, perMessageGroupId",
					env, q.Name, q.DeduplicationScope, q.FifoThroughputLimit)
			}
		}
	}
}

func TestRedriveAllowPolicy(t *testing.T) {
	t.Parallel()
	var got map[string]any
	if err := json.Unmarshal([]byte(resources.RedriveAllowPolicy("arn:aws:sqs:eu-west-1:123456789012:q.fifo")), &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"redrivePermission": "byQueue", "sourceQueueArns": []any{"arn:aws:sqs:eu-west-1:123456789012:q.fifo"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// The relay's mapping stays within what Lambda accepts for a DynamoDB
// stream (BatchSize ≤ 10,000, a window of whole seconds ≤ 300, a
// ParallelizationFactor of 1–10), and the relay's reservation runs every
// lane of at least one shard at once.
func TestEventStreamMapping(t *testing.T) {
	t.Parallel()
	for _, env := range job.Envs {
		m := resources.For(env).EventStream
		if m.BatchSize < 1 || m.BatchSize > 10000 {
			t.Errorf("%s: BatchSize %d outside 1–10000", env, m.BatchSize)
		}
		if w := m.BatchingWindow; w < 0 || w > 300*time.Second || w%time.Second != 0 {
			t.Errorf("%s: BatchingWindow %s is not whole seconds within 0–300", env, w)
		}
		if f := m.ParallelizationFactor; f < 1 || f > 10 {
			t.Errorf("%s: ParallelizationFactor %d outside 1–10", env, f)
		}
		if rc := resources.FunctionSizes[m.Function].ReservedConcurrency; rc < m.ParallelizationFactor {
			t.Errorf("%s: the relay's reserved concurrency %d is below its mapping's ParallelizationFactor %d", env, rc, m.ParallelizationFactor)
		}
	}
}

// Every function fits a new account's memory quota, so a first deploy is
// not refused.
func TestMemoryFitsANewAccount(t *testing.T) {
	t.Parallel()
	for fn, size := range resources.FunctionSizes {
		if size.MemoryMB < 128 || size.MemoryMB > resources.MemoryMBNewAccountMax {
			t.Errorf("%s: %d MB, want 128 to %d (a new account's quota)", fn, size.MemoryMB, resources.MemoryMBNewAccountMax)
		}
	}
}
