package job

import (
	"bytes"
	"encoding/json"
)

// Doc is a JSON object whose shape belongs to the job's kind: the params a
// kind normalised at submission, the result it produced. The core stores and
// returns it without reading it. In JSON it is the object itself (null when
// empty); the store keeps it as a map attribute (internal/aws/store, docs.go).
type Doc json.RawMessage

// Decode reads the document into v (a kind's params or result struct). An
// empty document decodes as {}.
func (d Doc) Decode(v any) error {
	if d.Empty() {
		return json.Unmarshal([]byte("{}"), v)
	}
	return json.Unmarshal(d, v)
}

// Empty reports whether the document holds nothing (absent or null).
func (d Doc) Empty() bool {
	t := bytes.TrimSpace(d)
	return len(t) == 0 || bytes.Equal(t, []byte("null"))
}

// MarshalJSON writes the document, or null when it is empty.
func (d Doc) MarshalJSON() ([]byte, error) {
	if d.Empty() {
		return []byte("null"), nil
	}
	return []byte(d), nil
}

// UnmarshalJSON keeps a copy of the raw JSON.
func (d *Doc) UnmarshalJSON(b []byte) error {
	*d = append((*d)[:0], b...)
	return nil
}
