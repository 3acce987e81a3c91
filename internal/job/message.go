package job

import "time"

// Kinds of work a queue message carries (Message.Kind).
const (
	// MessageJob is a job of any kind on a tier queue (the job's type is on
	// the job; the value is the one from when publish was the only kind,
	// kept so that messages in flight across a deploy still read).
	MessageJob = "publish"
	// MessageWebhook is a webhook delivery of a job's event (Message.DeliveryID).
	MessageWebhook = "webhook"
	// MessageOperation is the system tier's message that works the next
	// chunk of an operator's bulk operation (Message.Operation).
	MessageOperation = "operation"
)

// Message is the body of every queue message (internal/aws/queue sends it on
// the tier FIFO queues). It carries ids only, never media or secrets.
type Message struct {
	Kind  string `json:"kind"`
	JobID string `json:"jobId"`
	// Owner is the job's owner (a user id): with it the worker reads the
	// job and the owner's connected account in one request. Optional:
	// messages without it (sent before it existed) still work.
	Owner string `json:"owner,omitempty"`
	// Uploads are the uploads the job's items name (its media references):
	// the worker reads them with the job and the account, in the same
	// request, to describe items that submission left undescribed.
	// Optional: without it the worker reads them apart when it needs them.
	Uploads []string `json:"uploads,omitempty"`
	// Send is the job's enqueue counter at the time of sending.
	Send int `json:"send"`
	// Operation names the bulk operation a MessageOperation message works
	// ("op_…"); Send is then the operation's chunk sequence.
	Operation string `json:"operation,omitempty"`
	// DeliveryID names a webhook delivery (system tier).
	DeliveryID string `json:"deliveryId,omitempty"`
	// Seq is the job event a webhook delivers.
	Seq int64 `json:"seq,omitempty"`
	// Endpoint names the owner's webhook endpoint ("whe_…") a delivery
	// goes to; empty for the job's own webhookUrl.
	Endpoint string `json:"endpoint,omitempty"`
	// Redelivery is set on a delivery its owner asked to be made again
	// (POST /v1/webhooks/{id}/redeliver), and on an operation's message
	// recovery sends again when its worker went quiet: when, in Unix ms,
	// so that the copy is not taken for the first message's duplicate.
	Redelivery int64 `json:"redelivery,omitempty"`
	// Attempts counts a delivery's attempts made before this copy of its
	// message (a copy moved out of its owner's slot to wait starts its
	// receive count again).
	Attempts int `json:"attempts,omitempty"`
	// RetryAt is when a delivery moved out of its owner's slot to wait
	// may go back to it (Readmitted) for its next attempt.
	RetryAt time.Time `json:"retryAt,omitzero"`
	// Own is set on a message moved out of its owner's slot into the
	// job's own group, to wait there (Moved).
	Own bool `json:"own,omitempty"`
	// Slot is the owner's slot a moved message was moved out of, and goes
	// back to when its wait is over (Readmitted).
	Slot string `json:"slot,omitempty"`
	// Move counts the moves of this send (each copy needs its own
	// deduplication id).
	Move int `json:"move,omitempty"`
	// Traceparent is the W3C trace context the message's work continues
	// (the job's trace; a send with none takes its context's). Optional.
	Traceparent string `json:"traceparent,omitempty"`
	// Plan is the owner's plan, which picks the owner's number of slots.
	// It is not sent: the group carries its effect.
	Plan string `json:"-"`
}

// Moved is m moved into its job's own group, to wait there without holding
// back its owner's slot: a copy with its own deduplication id.
func (m Message) Moved() Message {
	m.Own = true
	m.Move++
	return m
}

// Readmitted is a moved message back in the owner's slot it was moved out
// of (Slot), its wait over: a copy with its own deduplication id. A job
// runs only from its owner's slots, so what waited alone is counted in the
// owner's concurrency again before it runs.
func (m Message) Readmitted() Message {
	m.Own = false
	m.Move++
	return m
}

// Waits reports whether m waits in a group of its own after it was moved
// out of its owner's slot (Moved), and can go back to it (Readmitted): a
// job's message, or a webhook delivery's.
func (m Message) Waits() bool { return m.Own && m.Slot != "" }
