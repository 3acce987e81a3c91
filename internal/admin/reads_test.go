package admin

import (
	"errors"
	"strings"
	"testing"
)

// TestReadsKeepEveryFailureNamed: the overview's concurrent reads all run,
// fill a shared map under the lock, and report every failure with what was
// being read; none failing is nil.
func TestReadsKeepEveryFailureNamed(t *testing.T) {
	t.Parallel()
	var r reads
	got := map[string]int{}
	boom := errors.New("boom")
	for i, name := range []string{"a", "b", "c", "d"} {
		r.do("reading "+name, func() error {
			r.locked(func() { got[name] = i })
			if name == "b" || name == "d" {
				return boom
			}
			return nil
		})
	}
	err := r.wait()
	if len(got) != 4 {
		t.Errorf("reads that ran: %v, want all four", got)
	}
	if !errors.Is(err, boom) {
		t.Fatalf("wait: %v, want the failures joined", err)
	}
	for _, want := range []string{"reading b: boom", "reading d: boom"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("wait: %q lacks %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "reading a") {
		t.Errorf("wait: %q names a read that succeeded", err)
	}
	var none reads
	none.do("reading e", func() error { return nil })
	if err := none.wait(); err != nil {
		t.Errorf("no failure: %v, want nil", err)
	}
}
