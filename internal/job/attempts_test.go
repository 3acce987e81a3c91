package job

import (
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestAttemptsFromTheEventLog(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 2, 15, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	ptr := func(s int) *time.Time { v := at(s); return &v }
	ms := func(n int64) *int64 { return &n }
	snap := func(attempts int, errCode string) string {
		if errCode == "" {
			return `{"attempts":` + strconv.Itoa(attempts) + `,"error":null}`
		}
		return `{"attempts":` + strconv.Itoa(attempts) + `,"error":{"code":"` + errCode + `","message":"` + errCode + ` happened","retryable":true}}`
	}
	e503 := &Error{Code: "upstream_503", Message: "upstream_503 happened", Retryable: true}
	eStuck := &Error{Code: "stuck", Message: "stuck happened", Retryable: true}
	for name, tc := range map[string]struct {
		events []LoggedEvent
		want   []Attempt
	}{
		"never ran": {[]LoggedEvent{{EventEnqueued, at(0), snap(0, "")}}, []Attempt{}},
		"retried then succeeded": {
			[]LoggedEvent{
				{EventEnqueued, at(0), snap(0, "")},
				{EventStarted, at(1), snap(1, "")},
				{EventProgress, at(2), snap(1, "")},
				{EventRetrying, at(3), snap(1, "upstream_503")},
				{EventStarted, at(10), snap(2, "upstream_503")},
				{EventSucceeded, at(12), snap(2, "")},
			},
			[]Attempt{
				{Number: 1, StartedAt: at(1), EndedAt: ptr(3), DurationMs: ms(2000), Outcome: AttemptRetrying, Error: e503},
				{Number: 2, StartedAt: at(10), EndedAt: ptr(12), DurationMs: ms(2000), Outcome: AttemptSucceeded},
			},
		},
		"a worker died, recovery ran it again, it failed; still running after a retry": {
			[]LoggedEvent{
				{EventStarted, at(1), snap(1, "")},
				{EventStarted, at(30), snap(2, "")},
				{EventFailed, at(31), snap(2, "stuck")},
				{EventEnqueued, at(40), snap(2, "")},
				{EventStarted, at(41), snap(3, "")},
			},
			[]Attempt{
				{Number: 1, StartedAt: at(1), Outcome: AttemptInterrupted},
				{Number: 2, StartedAt: at(30), EndedAt: ptr(31), DurationMs: ms(1000), Outcome: AttemptFailed, Error: eStuck},
				{Number: 3, StartedAt: at(41), Outcome: AttemptRunning},
			},
		},
		"cancelled while running; a cancel of a queued job is no attempt": {
			[]LoggedEvent{
				{EventStarted, at(1), snap(1, "")},
				{EventCancelled, at(2), snap(1, "")},
				{EventCancelled, at(3), snap(1, "")},
			},
			[]Attempt{{Number: 1, StartedAt: at(1), EndedAt: ptr(2), DurationMs: ms(1000), Outcome: AttemptCancelled}},
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if diff := cmp.Diff(tc.want, Attempts(tc.events)); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}
		})
	}
}
