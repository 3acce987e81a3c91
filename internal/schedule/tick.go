package schedule

import (
	"encoding/json"
	"strings"
)

// TaskTick is the recovery function's task for a schedule's tick.
const TaskTick = "schedule"

// ScheduledTime is EventBridge Scheduler's context attribute for the
// tick's scheduled time, replaced in the target's input at each firing.
const ScheduledTime = "<aws.scheduler.scheduled-time>"

// TickDetail is the detail of the event a schedule's target receives.
type TickDetail struct {
	Task       string `json:"task"`
	ScheduleID string `json:"scheduleId"`
	Owner      string `json:"owner"`
	// At is the tick's scheduled time (RFC 3339).
	At string `json:"at"`
}

// TickInput is the target input of schedule sc: an EventBridge-shaped
// event whose detail names the tick (see TickDetail).
func TickInput(sc Schedule) string {
	// Unescaped: Scheduler replaces the context attribute only as written.
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(map[string]any{
		"version": "0", "source": "aws.scheduler", "detail-type": "Scheduled Event",
		"detail": TickDetail{Task: TaskTick, ScheduleID: sc.ID, Owner: sc.Owner, At: ScheduledTime},
	})
	return strings.TrimSpace(b.String())
}

// UnavailableError is the backend refusing for capacity: the account's
// schedule quota (1,000,000 per Region by default, adjustable) or its
// request rate. The API answers 503.
type UnavailableError struct{ Err error }

func (e *UnavailableError) Error() string {
	return "the scheduler cannot take this schedule now: " + e.Err.Error()
}
func (e *UnavailableError) Unwrap() error { return e.Err }
