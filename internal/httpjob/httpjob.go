// Package httpjob is the front half of the "http" kind of job
// (kind.Front): one outbound HTTP request delivered reliably. It says what
// the job's params and result are and checks a submission: the URL https
// and public outside the local environment (netguard's policy), the method,
// the headers, the sizes, the timeout. Sending the request is
// internal/httpcall's (the kind's Work), so a function that only submits
// http jobs links neither the breaker nor the sending transport.
package httpjob

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/textproto"
	"slices"
	"strings"
	"time"

	"github.com/conveyor/conveyor/internal/invalid"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/kind"
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
	// MaxResultBody is the most of the response body kept in the result.
	MaxResultBody = 256 << 10
	// TimeoutDefault is the request's timeout when timeoutMs is absent.
	TimeoutDefault = 10 * time.Second
	// MaxTimeout bounds timeoutMs (the worker function's timeout is longer).
	MaxTimeout = 60 * time.Second
	// MethodDefault is the method when none is given.
	MethodDefault = http.MethodPost
)

// Methods lists the methods a job may use.
var Methods = []string{http.MethodDelete, http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodPatch, http.MethodPost, http.MethodPut}

// forbiddenHeaders are set by the transport or would smuggle requests.
var forbiddenHeaders = []string{"Connection", "Content-Length", "Host", "Keep-Alive", "Proxy-Authorization", "Proxy-Connection", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

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

// Front is the http kind's front half. Its zero value is ready: what it
// checks depends only on the kind.Env it is given.
type Front struct{}

// Name is "http".
func (Front) Name() string { return Type }

// Phases is the one phase, "request".
func (Front) Phases() []string { return []string{PhaseRequest} }

// Normalize upper-cases the method (POST when absent), canonicalises header
// names, fills the default timeout, and sorts and de-duplicates the
// expected statuses.
func (Front) Normalize(s kind.Spec) (kind.Spec, error) {
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
	b, err := json.Marshal(p)
	if err != nil {
		return s, err
	}
	return kind.Spec{Items: s.Items, Params: b}, nil
}

// Validate checks the request (400s): the URL under the environment's
// policy, the method, the headers, the sizes, the timeout, the statuses.
func (Front) Validate(ctx context.Context, env kind.Env, s kind.Spec) error {
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
	if _, err := env.URLPolicy().CheckURL(ctx, p.URL); err != nil {
		return invalid.Field("params.url", err.Error())
	}
	if !slices.Contains(Methods, p.Method) {
		return invalid.Field("params.method", "must be one of "+strings.Join(Methods, ", "))
	}
	size := len(p.Body)
	for k, v := range p.Headers {
		field := "params.headers." + k
		switch {
		case k == "" || strings.ContainsAny(k, " \t\r\n:\x00"):
			return invalid.Field("params.headers", fmt.Sprintf("has an invalid header name %q", k))
		case slices.Contains(forbiddenHeaders, k) || strings.HasPrefix(k, "Proxy-"):
			return invalid.Field(field, "is set by the transport and may not be given")
		case strings.ContainsAny(v, "\r\n\x00"):
			return invalid.Field(field, "must not contain CR, LF or NUL")
		}
		size += len(k) + len(v)
	}
	if size > MaxRequestSize {
		return invalid.Field("params", fmt.Sprintf("headers and body must total at most %d bytes", MaxRequestSize))
	}
	if p.TimeoutMs < 1 || time.Duration(p.TimeoutMs)*time.Millisecond > MaxTimeout {
		return invalid.Field("params.timeoutMs", fmt.Sprintf("must be between 1 and %d", MaxTimeout.Milliseconds()))
	}
	for i, st := range p.ExpectStatus {
		if st < 100 || st > 599 {
			return invalid.Field(fmt.Sprintf("params.expectStatus[%d]", i), "must be an HTTP status (100–599)")
		}
	}
	return nil
}

// Prepare has nothing to look up: an http job has no items.
func (Front) Prepare(context.Context, string, kind.Spec, *job.Job) error { return nil }
