package job

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// MaxDocBytes bounds each of a job's documents (its params, its result)
// as Marshal encodes them: the largest the contract makes is an http
// job's result, its body of at most 256 KiB as encoded plus the few
// response headers it keeps, each cut at 1 KiB. A submission whose params
// encode to more is refused (400); a kind cuts its result to fit.
const MaxDocBytes = 272 << 10

// ErrDocTooLarge is DocOf's answer to a value that encodes to more than
// MaxDocBytes.
var ErrDocTooLarge = errors.New("job document too large")

// Marshal encodes v as every document, job and event of the product is
// encoded: encoding/json without HTML escaping (<, > and & stay one byte,
// not the six of \u003c) and without a trailing newline. JSON escaping
// still applies: a control character takes six bytes, a quote two.
func Marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// DocOf encodes v (a kind's params or result struct) as a Doc: Marshal's
// JSON, at most MaxDocBytes of it (else ErrDocTooLarge).
func DocOf(v any) (Doc, error) {
	b, err := Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encoding a job document: %w", err)
	}
	if len(b) > MaxDocBytes {
		return nil, fmt.Errorf("%w: %d bytes encoded, at most %d", ErrDocTooLarge, len(b), MaxDocBytes)
	}
	return Doc(b), nil
}
