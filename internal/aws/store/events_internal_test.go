package store

import (
	"runtime"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/conveyor/conveyor/internal/job"
)

// TestEventItemsReuseTheirCompressor: rendering an event item compresses
// the job with a pooled gzip writer. A fresh writer holds about 800 KB of
// state, which was most of the processor time and the allocations of
// staling a job (docs/performance.md, "The sweeps"); a reused one allocates
// a few KB an item (with -race, about 240 KB: the race detector's pool drops
// a quarter of what is put back). Allocated bytes are a count, not a timing:
// the tests running beside this one cannot make 400 items reach half of
// 400 fresh writers (160 MB).
func TestEventItemsReuseTheirCompressor(t *testing.T) {
	t.Parallel()
	s := &Store{}
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	j := job.Job{ID: "job_0123456789abcdefghijklmnop", Owner: "u-1", Status: job.Succeeded, Tier: job.Medium, CreatedAt: at, UpdatedAt: at}
	j.Emit("job.stale", at, nil)
	if _, err := s.eventItems(&j); err != nil { // warm the pool
		t.Fatal(err)
	}
	const n = 400
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range n {
		items, err := s.eventItems(&j)
		if err != nil || len(items) != 1 {
			t.Fatalf("eventItems = %d items, %v", len(items), err)
		}
	}
	runtime.ReadMemStats(&after)
	const limit = 400 << 10 // bytes per item; a fresh writer is about 800 KB
	if per := (after.TotalAlloc - before.TotalAlloc) / n; per > limit {
		t.Errorf("an event item allocates %d KB; want at most %d KB (a compressor of its own each time?)", per>>10, limit>>10)
	}
	ev, err := decodeEvent(mustItems(t, s, &j)[0])
	if err != nil || ev.Type != "job.stale" || ev.Job == "" {
		t.Errorf("decoded %+v, %v; want the job.stale event with its job", ev, err)
	}
}

func mustItems(t *testing.T, s *Store, j *job.Job) []map[string]types.AttributeValue {
	t.Helper()
	items, err := s.eventItems(j)
	if err != nil {
		t.Fatal(err)
	}
	return items
}
