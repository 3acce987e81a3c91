// Package jobevent is the public shape of a job event: the JSON body the
// relay puts on the EventBridge bus, the webhooks post and the SSE stream
// sends. It is apart from the relay so that the functions that only render
// events (api and system through webhook, stream) do not link the
// EventBridge client the relay puts them with.
package jobevent

import (
	"encoding/json"
	"fmt"

	"github.com/conveyor/conveyor/internal/store"
)

// Body is the JSON of an event on the bus, in a webhook and on the stream.
type Body struct {
	ID     string            `json:"id"`
	Type   string            `json:"type"`
	At     string            `json:"at"`
	JobID  string            `json:"jobId"`
	Seq    int64             `json:"seq"`
	Detail map[string]string `json:"detail,omitempty"`
	Job    json.RawMessage   `json:"job"`
}

// BodyOf renders an event record: its id is "{jobId}:{seq}", its time
// RFC 3339 in UTC with milliseconds.
func BodyOf(ev store.EventRecord) Body {
	return Body{ID: fmt.Sprintf("%s:%d", ev.JobID, ev.Seq), Type: ev.Type, At: ev.At.UTC().Format("2006-01-02T15:04:05.000Z07:00"),
		JobID: ev.JobID, Seq: ev.Seq, Detail: ev.Detail, Job: json.RawMessage(ev.Job)}
}
