package job

import "time"

// Event types: every transition is persisted, then emitted, as one of these.
const (
	EventEnqueued       = "job.enqueued"
	EventStarted        = "job.started"
	EventProgress       = "job.progress"
	EventPhaseCompleted = "job.phase.completed"
	// EventSucceeded is the success event, named like the status it
	// announces (the contract's job.succeeded).
	EventSucceeded        = "job.succeeded"
	EventFailed           = "job.failed"
	EventRetrying         = "job.retrying"
	EventCancelled        = "job.cancelled"
	EventStale            = "job.stale"
	EventDeleted          = "job.deleted"
	EventWebhookDelivered = "webhook.delivered"
	EventWebhookFailed    = "webhook.failed"
)

// WebhookEvents are the event types that trigger a webhook delivery.
var WebhookEvents = map[string]bool{EventSucceeded: true, EventFailed: true, EventRetrying: true, EventCancelled: true, EventStale: true}

// FinishingEvent reports whether an event of type typ leaves its job
// finished (until a retry): job.succeeded, job.failed, job.cancelled,
// job.stale, job.deleted.
func FinishingEvent(typ string) bool {
	switch typ {
	case EventSucceeded, EventFailed, EventCancelled, EventStale, EventDeleted:
		return true
	}
	return false
}

// Event is one persisted event of a job. Seq increases by one with every
// event of the job; the event carries the job as it was right after it.
type Event struct {
	Seq  int64     `json:"seq"`
	Type string    `json:"type"`
	At   time.Time `json:"at"`
	// Detail is extra information (the phase that completed, a webhook's
	// delivery id and status).
	Detail map[string]string `json:"detail,omitempty"`
}

// Emit queues an event to be persisted with the job's next write.
func (j *Job) Emit(typ string, at time.Time, detail map[string]string) {
	j.Pending = append(j.Pending, Event{Type: typ, At: at.UTC(), Detail: detail})
}

// eventFor names the event of an applied action.
func eventFor(a Action, from Status) string {
	switch a {
	case Release, Retry:
		return EventEnqueued
	case Requeue:
		return EventRetrying
	case Start:
		if from == Running {
			return "" // a takeover of a running job: no new start
		}
		return EventStarted
	case Succeed:
		return EventSucceeded
	case Fail:
		return EventFailed
	case Cancel:
		return EventCancelled
	case Expire:
		return EventStale
	}
	return ""
}
