package awstest

import (
	"strings"
	"testing"
)

// TestLogTailLeavesOutAnsweredGets: a failed test's log tail keeps what
// the stack did, not the test's own polls of a job (the API's access lines
// of GETs answered 200), which it only counts.
func TestLogTailLeavesOutAnsweredGets(t *testing.T) {
	tail := &logTail{}
	poll := `{"level":"INFO","msg":"request","method":"GET","route":"/v1/jobs/{id}","status":200,"duration_ms":4}` + "\n"
	refused := `{"level":"INFO","msg":"request","method":"GET","route":"/v1/jobs/{id}","status":404,"duration_ms":4}` + "\n"
	work := `{"level":"INFO","msg":"job waits: circuit open","job_id":"job_1"}` + "\n"
	for range 3 * tailLines {
		_, _ = tail.Write([]byte(poll))
	}
	_, _ = tail.Write([]byte(work))
	_, _ = tail.Write([]byte(refused))
	for range 3 * tailLines {
		_, _ = tail.Write([]byte(poll))
	}
	if got := tail.String(); got != work+refused {
		t.Errorf("tail %q, want the job's line and the refused GET only", got)
	}
	if n := tail.polls.Load(); n != 6*tailLines {
		t.Errorf("%d answered GETs counted, want %d", n, 6*tailLines)
	}
	if strings.Contains(tail.String(), `"status":200`) {
		t.Error("an answered GET is in the tail")
	}
}
