package job

import (
	"encoding/json"
	"time"
)

// Outcomes of an attempt.
const (
	// AttemptRunning: the attempt has not ended (yet).
	AttemptRunning = "running"
	// AttemptRetrying: it ended in a temporary error; the job runs again.
	AttemptRetrying  = "retrying"
	AttemptSucceeded = "succeeded"
	AttemptFailed    = "failed"
	AttemptCancelled = "cancelled"
	// AttemptInterrupted: another run started without this one's end being
	// recorded (its worker died; recovery sent the job again).
	AttemptInterrupted = "interrupted"
)

// Attempt is one run of a job, read from its event log: from a job.started
// to the job.retrying, job.succeeded, job.failed or job.cancelled that
// ended it.
type Attempt struct {
	// Number is the job's attempt count when it started (1 for the first
	// run; a run that spent no attempt, after a wait, keeps the number).
	Number    int        `json:"number"`
	StartedAt time.Time  `json:"startedAt"`
	EndedAt   *time.Time `json:"endedAt"`
	// DurationMs is EndedAt − StartedAt; null while running.
	DurationMs *int64 `json:"durationMs"`
	// Outcome is running, retrying, succeeded, failed, cancelled or
	// interrupted.
	Outcome string `json:"outcome"`
	// Error is the job's error as the attempt left it (null on success).
	Error *Error `json:"error"`
}

// LoggedEvent is an event of the log with the job as it was right after it
// (its JSON, as the log keeps it).
type LoggedEvent struct {
	Type string
	At   time.Time
	Job  string
}

// Attempts reads every attempt from a job's events, oldest first.
func Attempts(events []LoggedEvent) []Attempt {
	out := []Attempt{}
	open := -1
	end := func(at time.Time, outcome string, e *Error) {
		if open < 0 {
			return
		}
		a := &out[open]
		t := at.UTC()
		d := t.Sub(a.StartedAt).Milliseconds()
		a.EndedAt, a.DurationMs, a.Outcome, a.Error = &t, &d, outcome, e
		open = -1
	}
	for _, ev := range events {
		var snap struct {
			Attempts int    `json:"attempts"`
			Error    *Error `json:"error"`
		}
		_ = json.Unmarshal([]byte(ev.Job), &snap)
		switch ev.Type {
		case EventStarted:
			if open >= 0 {
				out[open].Outcome = AttemptInterrupted
				open = -1
			}
			out = append(out, Attempt{Number: snap.Attempts, StartedAt: ev.At.UTC(), Outcome: AttemptRunning})
			open = len(out) - 1
		case EventRetrying:
			end(ev.At, AttemptRetrying, snap.Error)
		case EventSucceeded:
			end(ev.At, AttemptSucceeded, nil)
		case EventFailed:
			end(ev.At, AttemptFailed, snap.Error)
		case EventCancelled:
			end(ev.At, AttemptCancelled, snap.Error)
		}
	}
	return out
}
