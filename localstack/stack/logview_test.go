package stack

import (
	"strings"
	"sync"
	"testing"
	"time"
)

// TestLogViewRendersLinesForAPerson: JSON lines become "time level
// [function] message key=value"; other lines pass through with the
// function's name; lines split across writes, or written by two functions
// at once, come out whole.
func TestLogViewRendersLinesForAPerson(t *testing.T) {
	t.Parallel()
	var out strings.Builder
	v := NewLogView(&out, false)
	pub, api := v.For("publisher"), v.For("api")
	at := time.Date(2026, 11, 26, 10, 0, 1, 250e6, time.UTC)
	line := `{"time":"` + at.Format(time.RFC3339Nano) + `","level":"INFO","msg":"job started","job_id":"job_1","attempt":2,"resumed":false,"note":"a b"}` + "\n"
	_, _ = pub.Write([]byte(line[:30]))
	_, _ = api.Write([]byte("plain text from a runtime\n"))
	_, _ = pub.Write([]byte(line[30:]))
	_, _ = api.Write([]byte(`{"level":"WARN","msg":"slow","took":"2s"}` + "\n"))
	want := strings.Join([]string{
		"[api] plain text from a runtime",
		at.Local().Format("15:04:05.000") + ` INFO  [publisher] job started attempt=2 job_id=job_1 note="a b" resumed=false`,
		"WARN  [api] slow took=2s",
		"",
	}, "\n")
	if got := out.String(); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}

	// Many writers at once: every line whole.
	out.Reset()
	var wg sync.WaitGroup
	for i := range 8 {
		w := v.For("f")
		wg.Go(func() {
			for range 50 {
				_, _ = w.Write([]byte(`{"level":"INFO","msg":"m` + strings.Repeat("x", i) + `"}` + "\n"))
			}
		})
	}
	wg.Wait()
	for _, l := range strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n") {
		if !strings.HasPrefix(l, "INFO  [f] mx") && l != "INFO  [f] m" {
			t.Fatalf("a torn line: %q", l)
		}
	}
}
