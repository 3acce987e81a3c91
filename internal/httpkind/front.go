package httpkind

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/textproto"
	"slices"
	"strings"
	"time"

	"github.com/conveyor/conveyor/internal/envelope"
	"github.com/conveyor/conveyor/internal/invalid"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/netguard"
)

// Type is the kind's name.
const Type = "http"

// PhaseRequest is the kind's one phase.
const PhaseRequest = "request"

// Limits and defaults.
const (
	// MaxRequestSize bounds the request's headers (names and values) and
	// body together.
	MaxRequestSize = 64 << 10
	// MaxResultBody is the most of the response body kept in the result,
	// in bytes of the job's JSON: a body of characters JSON escapes (a
	// control character takes six bytes) is cut shorter, a binary one is
	// cut at 192 KiB, whose base64 takes 256 KiB.
	MaxResultBody = 256 << 10
	// MaxResultHeader is the most of a kept response header's value.
	MaxResultHeader = 1 << 10
	// MaxURLLength bounds the request's URL (RFC 9110 asks for at least
	// 8000 octets to be supported): with the headers and body's 64 KiB it
	// keeps the job's document within job.MaxDocBytes.
	MaxURLLength = 8 << 10
	// TimeoutDefault is the request's timeout when timeoutMs is absent.
	TimeoutDefault = 10 * time.Second
	// MinTimeout is the shortest timeoutMs accepted: below it a request
	// measures the network more than the target.
	MinTimeout = 400 * time.Millisecond
	// MaxSnoozesDefault is how many times a job may wait without spending
	// an attempt (a 429, an open circuit) before it fails
	// (CONVEYOR_HTTP_MAX_SNOOZES).
	MaxSnoozesDefault = 30
	// MaxAgeDefault is how long after it became due a job may still be
	// tried (CONVEYOR_HTTP_MAX_AGE).
	MaxAgeDefault = 24 * time.Hour
	// TimeoutFloorDefault is the shortest timeout whose expiry counts
	// against the target's circuit (CONVEYOR_HTTP_TIMEOUT_FLOOR).
	TimeoutFloorDefault = 2 * time.Second
	// MaxTimeout bounds timeoutMs (the worker function's timeout is longer).
	MaxTimeout = 60 * time.Second
	// MethodDefault is the method when none is given.
	MethodDefault = http.MethodPost
)

// Methods lists the methods a job may use.
var Methods = []string{http.MethodDelete, http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodPatch, http.MethodPost, http.MethodPut}

// forbiddenHeaders are set by the transport or would smuggle requests.
var forbiddenHeaders = []string{"Connection", "Content-Length", "Host", "Keep-Alive", "Proxy-Authorization", "Proxy-Connection", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

// Redacted stands for a header's value wherever the job is shown: the
// stored params, API responses, events.
const Redacted = "[redacted]"

// Purpose is the sealed headers' purpose in their encryption context.
const Purpose = envelope.PurposeHTTPHeaders

// SealContext is the encryption context of a job's sealed headers: its
// owner, the job and Purpose. An envelope copied to another job or
// another user's job does not open.
func SealContext(owner, jobID string) map[string]string {
	return map[string]string{"user": owner, "job": jobID, "purpose": Purpose}
}

// Sealer seals a job's header values at submission (sealer.Sealer).
type Sealer interface {
	Seal(ctx context.Context, plaintext []byte, aad map[string]string) (envelope.Envelope, error)
}

// ErrNoSealer is Prepare's answer to headers it has no way to seal: the
// job is not created rather than stored with its secrets in the clear.
var ErrNoSealer = errors.New("httpkind: headers given but no sealer configured")

// Params are an http job's params.
type Params struct {
	Method  string            `json:"method"`
	URL     string            `json:"url"`
	Headers map[string]string `json:"headers,omitempty"`
	Body    string            `json:"body,omitempty"`
	// TimeoutMs bounds the whole request, response body included.
	TimeoutMs int `json:"timeoutMs"`
	// ExpectStatus lists the statuses that count as success (empty: any 2xx).
	ExpectStatus []int `json:"expectStatus,omitempty"`
}

// Result is an http job's result.
type Result struct {
	Status  int               `json:"status"`
	Headers map[string]string `json:"headers"`
	Body    string            `json:"body"`
	// BodyEncoding is "base64" when the body was not UTF-8 text.
	BodyEncoding string `json:"bodyEncoding,omitempty"`
	// Truncated: the body was longer than MaxResultBody and was cut.
	Truncated  bool  `json:"truncated,omitempty"`
	DurationMs int64 `json:"durationMs"`
}

// Name is "http".
func (*Kind) Name() string { return Type }

// Phases is the one phase, "request".
func (*Kind) Phases() []string { return []string{PhaseRequest} }

// Normalize upper-cases the method (POST when absent), canonicalises header
// names, fills the default timeout, and sorts and de-duplicates the
// expected statuses.
func (*Kind) Normalize(s job.Spec) (job.Spec, error) {
	var p Params
	if len(s.Params) == 0 || string(s.Params) == "null" {
		return s, invalid.Field("params", "is required")
	}
	d := json.NewDecoder(bytes.NewReader(s.Params))
	d.DisallowUnknownFields()
	if err := d.Decode(&p); err != nil {
		return s, invalid.Field("params", "is not a valid http request: "+err.Error())
	}
	p.Method = strings.ToUpper(strings.TrimSpace(p.Method))
	if p.Method == "" {
		p.Method = MethodDefault
	}
	p.URL = strings.TrimSpace(p.URL)
	if len(p.Headers) > 0 {
		h := make(map[string]string, len(p.Headers))
		for k, v := range p.Headers {
			h[textproto.CanonicalMIMEHeaderKey(strings.TrimSpace(k))] = v
		}
		p.Headers = h
	}
	if p.TimeoutMs == 0 {
		p.TimeoutMs = int(TimeoutDefault / time.Millisecond)
	}
	slices.Sort(p.ExpectStatus)
	p.ExpectStatus = slices.Compact(p.ExpectStatus)
	b, err := job.Marshal(p)
	if err != nil {
		return s, err
	}
	return job.Spec{Items: s.Items, Params: b}, nil
}

// Validate checks the request (400s): the URL under the environment's
// policy, the method, the headers, the sizes, the timeout, the statuses.
func (*Kind) Validate(ctx context.Context, env job.ValidationEnv, s job.Spec) error {
	if len(s.Items) > 0 {
		return invalid.Field("items", "must be empty for an http job")
	}
	var p Params
	if err := json.Unmarshal(s.Params, &p); err != nil {
		return invalid.Field("params", "must be an object")
	}
	if p.URL == "" {
		return invalid.Field("params.url", "is required")
	}
	if len(p.URL) > MaxURLLength {
		return invalid.Field("params.url", fmt.Sprintf("must be at most %d bytes", MaxURLLength))
	}
	if _, err := netguard.For(env.Local, env.Resolver).CheckURL(ctx, p.URL); err != nil {
		return invalid.Field("params.url", err.Error())
	}
	if !slices.Contains(Methods, p.Method) {
		return invalid.Field("params.method", "must be one of "+strings.Join(Methods, ", "))
	}
	size := len(p.Body)
	for k, v := range p.Headers {
		field := "params.headers." + k
		switch {
		case !validName(k):
			return invalid.Field("params.headers", fmt.Sprintf("has an invalid header name %q", k))
		case slices.Contains(forbiddenHeaders, k) || strings.HasPrefix(k, "Proxy-"):
			return invalid.Field(field, "is set by the transport and may not be given")
		case !validValue(v):
			// The value is a secret: the message names the header only.
			return invalid.Field(field, "must not contain control characters (CR, LF, NUL, …)")
		}
		size += len(k) + len(v)
	}
	if size > MaxRequestSize {
		return invalid.Field("params", fmt.Sprintf("headers and body must total at most %d bytes", MaxRequestSize))
	}
	if t := time.Duration(p.TimeoutMs) * time.Millisecond; t < MinTimeout || t > MaxTimeout {
		return invalid.Field("params.timeoutMs", fmt.Sprintf("must be between %d and %d", MinTimeout.Milliseconds(), MaxTimeout.Milliseconds()))
	}
	for i, st := range p.ExpectStatus {
		if st < 100 || st > 599 {
			return invalid.Field(fmt.Sprintf("params.expectStatus[%d]", i), "must be an HTTP status (100–599)")
		}
	}
	return nil
}

// Prepare seals the header values into j.Sealed (under SealContext) and
// leaves their names in j.Params, each value Redacted. A job without
// headers has nothing to seal.
func (f *Kind) Prepare(ctx context.Context, owner string, s job.Spec, j *job.Job) error {
	var p Params
	if err := json.Unmarshal(s.Params, &p); err != nil {
		return fmt.Errorf("httpkind: reading validated params: %w", err)
	}
	if len(p.Headers) == 0 {
		return nil
	}
	if f.cfg.Sealer == nil {
		return ErrNoSealer
	}
	plain, err := json.Marshal(p.Headers)
	if err != nil {
		return err
	}
	env, err := f.cfg.Sealer.Seal(ctx, plain, SealContext(owner, j.ID))
	clear(plain)
	if err != nil {
		return fmt.Errorf("sealing the headers of job %s: %w", j.ID, err)
	}
	p.Headers = RedactHeaders(p.Headers)
	doc, err := job.DocOf(p)
	if err != nil {
		return err
	}
	j.Params, j.Sealed = doc, &env
	return nil
}

// SplitSecrets returns the spec with its header values Redacted and the
// values themselves (nil when it has no headers), for a template kept
// beyond one job (job.SecretsFront): a recurring schedule seals them
// apart. The rest of the params stays as given.
func (f *Kind) SplitSecrets(s job.Spec) (job.Spec, []byte, error) {
	var secrets []byte
	out, err := withHeaders(s, func(h map[string]string) error {
		var err error
		secrets, err = json.Marshal(h)
		for k := range h {
			h[k] = Redacted
		}
		return err
	})
	if err != nil {
		clear(secrets)
		return s, nil, err
	}
	return out, secrets, nil
}

// JoinSecrets puts the header values SplitSecrets took back into the
// spec: each header the spec names gets its value.
func (f *Kind) JoinSecrets(s job.Spec, secrets []byte) (job.Spec, error) {
	var values map[string]string
	if err := json.Unmarshal(secrets, &values); err != nil {
		return s, errors.New("httpkind: the sealed header values do not read")
	}
	return withHeaders(s, func(h map[string]string) error {
		for k := range h {
			v, ok := values[k]
			if !ok {
				return fmt.Errorf("httpkind: no sealed value for header %q", k)
			}
			h[k] = v
		}
		return nil
	})
}

// withHeaders returns s with its params' headers changed by change, every
// other field of the params as it was; params without headers are s as it
// is, change not called.
func withHeaders(s job.Spec, change func(map[string]string) error) (job.Spec, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(s.Params, &fields); err != nil {
		return s, fmt.Errorf("httpkind: reading params: %w", err)
	}
	var h map[string]string
	if raw, ok := fields["headers"]; ok {
		if err := json.Unmarshal(raw, &h); err != nil {
			return s, fmt.Errorf("httpkind: reading params.headers: %w", err)
		}
	}
	if len(h) == 0 {
		return s, nil
	}
	if err := change(h); err != nil {
		return s, err
	}
	raw, err := job.Marshal(h)
	if err != nil {
		return s, err
	}
	fields["headers"] = raw
	doc, err := job.DocOf(fields)
	if err != nil {
		return s, err
	}
	s.Params = json.RawMessage(doc)
	return s, nil
}

// RedactHeaders returns h with every value replaced by Redacted.
func RedactHeaders(h map[string]string) map[string]string {
	if h == nil {
		return nil
	}
	out := make(map[string]string, len(h))
	for k := range h {
		out[k] = Redacted
	}
	return out
}

// validName: a non-empty RFC 9110 token.
func validName(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// validValue: visible characters, spaces, tabs and obs-text (RFC 9110
// field-value), nothing the transport would refuse.
func validValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; (c < 0x20 && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}
