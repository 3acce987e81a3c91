package job

import (
	"encoding/json"
	"fmt"
	"time"
	"unicode/utf8"
)

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

// ProgressEvents are the high-frequency event types: a job emits them per
// phase and per item as it runs. They are always in the table, the job's
// event log and its SSE streams; an environment whose bus carries
// BusLifecycle keeps them off the bus.
var ProgressEvents = map[string]bool{EventProgress: true, EventPhaseCompleted: true}

// BusEvents is which job events an environment puts on its EventBridge bus
// (CONVEYOR_BUS_EVENTS; infra/env/<env>.json "busEvents"). The zero value
// is BusAll.
type BusEvents string

// The choices of BusEvents.
const (
	// BusAll puts every event on the bus.
	BusAll BusEvents = "all"
	// BusLifecycle puts every event but ProgressEvents on the bus: the
	// transitions integrations act on (enqueued, started, retrying,
	// succeeded, failed, cancelled, stale, the webhooks' outcomes), about
	// three events per published job instead of eight.
	BusLifecycle BusEvents = "lifecycle"
)

// BusEventChoices lists the valid BusEvents, for messages and docs.
var BusEventChoices = []BusEvents{BusAll, BusLifecycle}

// ParseBusEvents reads a BusEvents; it refuses anything but BusEventChoices.
func ParseBusEvents(s string) (BusEvents, error) {
	for _, c := range BusEventChoices {
		if s == string(c) {
			return c, nil
		}
	}
	return "", fmt.Errorf("%q: want %q (every event on the bus) or %q (job.progress and job.phase.completed stay in the table, the event log and SSE)", s, BusAll, BusLifecycle)
}

// Carries reports whether an environment set to b puts events of type typ
// on its bus.
func (b BusEvents) Carries(typ string) bool {
	return b != BusLifecycle || !ProgressEvents[typ]
}

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

// EventBody is the public JSON of a job event: what a webhook posts and
// the SSE stream sends, and, with the job's Summary as its Job, what the
// relay puts on the EventBridge bus (NewBusEventBody). Its id is
// "{jobId}:{seq}", its time RFC 3339 in UTC with milliseconds, and Job the
// job's snapshot as it was stored with the event.
type EventBody struct {
	ID     string            `json:"id"`
	Type   string            `json:"type"`
	At     string            `json:"at"`
	JobID  string            `json:"jobId"`
	Seq    int64             `json:"seq"`
	Detail map[string]string `json:"detail,omitempty"`
	Job    json.RawMessage   `json:"job"`
}

// NewEventBody renders the event seq of job jobID, of type typ, at at.
func NewEventBody(jobID string, seq int64, typ string, at time.Time, detail map[string]string, jobJSON string) EventBody {
	return EventBody{ID: fmt.Sprintf("%s:%d", jobID, seq), Type: typ, At: at.UTC().Format("2006-01-02T15:04:05.000Z07:00"),
		JobID: jobID, Seq: seq, Detail: detail, Job: json.RawMessage(jobJSON)}
}

// Summary is a job as the event bus carries it: what names the job and its
// state, never its documents, so that an event's bus entry stays a few
// hundred bytes whatever the job holds (EventBridge takes at most 256 KiB
// an entry). Its fields are the Job's own, under the same names; a
// consumer that needs more reads the job (GET /v1/admin/jobs/{id}).
type Summary struct {
	ID          string        `json:"id"`
	Type        string        `json:"type"`
	Status      Status        `json:"status"`
	Tier        Tier          `json:"tier"`
	Phase       string        `json:"phase"`
	Progress    int           `json:"progress"`
	Attempts    int           `json:"attempts"`
	MaxAttempts int           `json:"maxAttempts"`
	Error       *SummaryError `json:"error"`
	// Items is how many items the job has.
	Items int `json:"items"`
	// Sizes are the bytes of the job's documents as the API returns them.
	Sizes      Sizes      `json:"sizes"`
	CreatedAt  time.Time  `json:"createdAt"`
	UpdatedAt  time.Time  `json:"updatedAt"`
	ScheduleAt *time.Time `json:"scheduleAt"`
	StartedAt  *time.Time `json:"startedAt"`
	FinishedAt *time.Time `json:"finishedAt"`
}

// SummaryError is a job's error as a Summary carries it: its code and
// whether it is retryable, not its message.
type SummaryError struct {
	Code      string `json:"code"`
	Retryable bool   `json:"retryable"`
}

// Sizes are the encoded sizes of a job's documents, in bytes (0: none).
type Sizes struct {
	Params int `json:"params"`
	Result int `json:"result"`
}

// maxSummaryString bounds each of a Summary's strings (a kind names its
// type, phases and error codes; none is near it).
const maxSummaryString = 200

// Summarize returns the summary of j.
func Summarize(j *Job) Summary {
	s := Summary{ID: j.ID, Type: cut(j.Type), Status: j.Status, Tier: j.Tier, Phase: cut(j.Phase), Progress: j.Progress,
		Attempts: j.Attempts, MaxAttempts: j.MaxAttempts, Items: len(j.Items),
		CreatedAt: j.CreatedAt, UpdatedAt: j.UpdatedAt, ScheduleAt: j.ScheduleAt, StartedAt: j.StartedAt, FinishedAt: j.FinishedAt}
	if !j.Params.Empty() {
		s.Sizes.Params = len(j.Params)
	}
	if !j.Result.Empty() {
		s.Sizes.Result = len(j.Result)
	}
	if j.Error != nil {
		s.Error = &SummaryError{Code: cut(j.Error.Code), Retryable: j.Error.Retryable}
	}
	return s
}

// cut bounds s at maxSummaryString bytes, on a character boundary.
func cut(s string) string {
	if len(s) <= maxSummaryString {
		return s
	}
	n := maxSummaryString
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// NewBusEventBody renders the event as the bus carries it: the body of
// NewEventBody with the job's Summary in place of the job (jobJSON, the
// job as stored with the event).
func NewBusEventBody(jobID string, seq int64, typ string, at time.Time, detail map[string]string, jobJSON string) (EventBody, error) {
	var j Job
	if err := json.Unmarshal([]byte(jobJSON), &j); err != nil {
		return EventBody{}, fmt.Errorf("reading the job of event %d of %s: %w", seq, jobID, err)
	}
	sum, err := Marshal(Summarize(&j))
	if err != nil {
		return EventBody{}, err
	}
	return NewEventBody(jobID, seq, typ, at, detail, string(sum)), nil
}
