package job

import (
	"fmt"
	"strconv"
	"time"
)

// The records of jobs and their events as the store keeps and reads them,
// which several domain packages (the SSE stream, the relay, webhooks,
// submission) share: declared here, in the vocabulary, so that each of
// them can state the store methods it calls without importing the store
// (internal/aws/store names them by alias). The dynamodbav tags are the
// store's attribute names.

// SortTimeLayout renders times so that lexicographic order is time order:
// the layout of every time the store keeps in a key (the feed's, the
// owner's change index's, an upload's use window).
const SortTimeLayout = "2006-01-02T15:04:05.000000000Z"

// SortTime renders t so that lexicographic order is time order.
func SortTime(t time.Time) string { return t.UTC().Format(SortTimeLayout) }

// EventRecord is one persisted event: written in the same transaction as
// the job change it describes, with the job as it was right after.
type EventRecord struct {
	JobID  string            `dynamodbav:"jobId" json:"jobId"`
	Owner  string            `dynamodbav:"eventOwner" json:"-"`
	Seq    int64             `dynamodbav:"seq" json:"seq"`
	Type   string            `dynamodbav:"type" json:"type"`
	At     time.Time         `dynamodbav:"at" json:"at"`
	Detail map[string]string `dynamodbav:"detail,omitempty" json:"detail,omitempty"`
	// Job is the job's JSON right after the event. The item keeps it
	// compressed (jobGz); items written before that keep it as text.
	Job        string `dynamodbav:"job,omitempty" json:"-"`
	Tier       Tier   `dynamodbav:"tier" json:"-"`
	WebhookURL string `dynamodbav:"webhookUrl,omitempty" json:"-"`
}

// ID is the event's id within its job's stream.
func (e EventRecord) ID() string { return strconv.FormatInt(e.Seq, 10) }

// Body is the event's public JSON (EventBody): what the bus, a webhook
// and the SSE stream carry, none of the record's private fields (owner,
// tier, webhook URL).
func (e EventRecord) Body() EventBody {
	return NewEventBody(e.JobID, e.Seq, e.Type, e.At, e.Detail, e.Job)
}

// BusBody is the event as the bus carries it (NewBusEventBody): Body with
// the job's summary in place of the job.
func (e EventRecord) BusBody() (EventBody, error) {
	return NewBusEventBody(e.JobID, e.Seq, e.Type, e.At, e.Detail, e.Job)
}

// FeedKey is the sort key of an event in the feed index: its time, job and
// sequence, so keys order events by time.
func FeedKey(ev EventRecord) string {
	return SortTime(ev.At) + "#" + ev.JobID + "#" + fmt.Sprintf("%012d", ev.Seq)
}

// FeedEvent is an event read from the feed, with its feed key.
type FeedEvent struct {
	EventRecord
	Key string
}

// Change is what the owner's change index says of a job: that it was
// written at UpdatedAt, and the sequence of its last event then.
type Change struct {
	ID        string
	UpdatedAt time.Time
	EventSeq  int64
}

// ListQuery selects jobs of one owner.
type ListQuery struct {
	Owner string
	// Status filters by status when set.
	Status Status
	// UpdatedSince, when set, returns jobs updated at or after it, oldest
	// first (a SortTime).
	UpdatedSince string
	// Limit is the page size (1–200).
	Limit int
	// Cursor continues a previous page of the same query (same owner,
	// status and UpdatedSince; any Limit); any other is the store's
	// ErrBadCursor.
	Cursor string
}
