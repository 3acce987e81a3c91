// Package httpjob is the "http" kind of job: one outbound HTTP request
// delivered reliably. The request is checked at submission (https, a public
// target outside the local environment, sizes) and again when the
// connection is made (netguard's dialer, so DNS rebinding cannot reach a
// private address); it goes through the shared circuit breaker of its
// target host; 5xx, 408, 429 and timeouts are retried with the job's
// backoff (at least the response's Retry-After), any other status outside
// expectStatus fails the job at once. The response — status, selected
// headers, body up to 256 KiB, duration — is the job's result.
//
// Delivery is at least once: a worker that dies after the target answered
// but before the answer was stored sends the request again on the next
// attempt. Every request carries Idempotency-Key: <job id> (unless the job
// sets its own) so that the target can drop the repeat.
package httpjob

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/textproto"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/conveyor/conveyor/internal/breaker"
	"github.com/conveyor/conveyor/internal/invalid"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/kind"
	"github.com/conveyor/conveyor/internal/netguard"
	"github.com/conveyor/conveyor/internal/retry"
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
	// UserAgent is sent unless the job sets its own.
	UserAgent = "Conveyor-HTTP/1"
)

// Methods lists the methods a job may use.
var Methods = []string{http.MethodDelete, http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodPatch, http.MethodPost, http.MethodPut}

// forbiddenHeaders are set by the transport or would smuggle requests.
var forbiddenHeaders = []string{"Connection", "Content-Length", "Host", "Keep-Alive", "Proxy-Authorization", "Proxy-Connection", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

// ResultHeaders are the response headers kept in the result.
var ResultHeaders = []string{"Cache-Control", "Content-Length", "Content-Type", "Date", "Etag", "Last-Modified", "Location", "Retry-After", "X-Request-Id"}

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

// Breaker runs a call under the circuit breakers of keys (breaker.Breaker).
type Breaker interface {
	Do(ctx context.Context, fn func(context.Context) error, keys ...string) error
}

// Config configures the kind.
type Config struct {
	// Local allows plain http and private targets (the local environment).
	Local bool
	// Resolver looks up target names, at submission and at dial time
	// (default net.DefaultResolver).
	Resolver netguard.Resolver
	// Breaker guards each target host (nil: no breaker).
	Breaker Breaker
	// Transport overrides the HTTP transport (tests); production uses one
	// whose dialer applies the URL policy.
	Transport http.RoundTripper
}

// Kind is the http kind.
type Kind struct {
	cfg    Config
	guard  netguard.Policy
	client *http.Client
}

// New returns the http kind.
func New(cfg Config) *Kind {
	guard := netguard.Policy{AllowHTTP: cfg.Local, AllowPrivate: cfg.Local, Resolver: cfg.Resolver}
	tr := cfg.Transport
	if tr == nil {
		tr = &http.Transport{DialContext: guard.DialContext, TLSHandshakeTimeout: 10 * time.Second, MaxIdleConnsPerHost: 8,
			ResponseHeaderTimeout: MaxTimeout}
	}
	return &Kind{cfg: cfg, guard: guard, client: &http.Client{
		Transport:     tr,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

// Name is "http".
func (*Kind) Name() string { return Type }

// Phases is the one phase, "request".
func (*Kind) Phases() []string { return []string{PhaseRequest} }

// Normalize upper-cases the method (POST when absent), canonicalises header
// names, fills the default timeout, and sorts and de-duplicates the
// expected statuses.
func (*Kind) Normalize(s kind.Spec) (kind.Spec, error) {
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
func (*Kind) Validate(ctx context.Context, env kind.Env, s kind.Spec) error {
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
func (*Kind) Prepare(context.Context, string, kind.Spec, *job.Job) error { return nil }

// Work sends the request once and records the response as the result.
func (k *Kind) Work(ctx context.Context, a kind.Attempt) error {
	j := a.Job()
	var p Params
	if err := j.Params.Decode(&p); err != nil {
		return kind.Step(PhaseRequest, -1, retry.Permanent(fmt.Errorf("reading the job's params: %w", err)))
	}
	u, err := url.Parse(p.URL)
	if err != nil {
		return kind.Step(PhaseRequest, -1, retry.Permanent(fmt.Errorf("params.url: %w", err)))
	}
	if err := a.Save(ctx, func(j *job.Job) {
		j.StartPhase(PhaseRequest, p.Method+" "+u.Host, a.Now())
	}); err != nil {
		return err
	}
	res, err := k.Send(ctx, j.ID, p)
	var doc job.Doc
	if res != nil {
		doc, _ = job.DocOf(res) // a Result always encodes
	}
	if err != nil {
		if doc != nil {
			// The answer is kept on the job even when it is a failure.
			if serr := a.Save(ctx, func(j *job.Job) { j.Result = doc }); serr != nil {
				return serr
			}
		}
		return kind.Step(PhaseRequest, -1, err)
	}
	a.Logger().InfoContext(ctx, "http job delivered", "status", res.Status, "duration_ms", res.DurationMs)
	return a.Save(ctx, func(j *job.Job) {
		now := a.Now()
		j.CompletePhase(PhaseRequest, strconv.Itoa(res.Status), now)
		j.Result, j.Error = doc, nil
		_ = j.Apply(job.Succeed, now)
	})
}

// StatusError is a response whose status is not expected. It says, for the
// retry policy and the breaker, whether trying again may help: 408, 429
// and 5xx are temporary (after Retry-After), any other status is not.
type StatusError struct {
	Status int
	After  time.Duration
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("the target answered %d %s", e.Status, http.StatusText(e.Status))
}

// StatusCode is the response's status.
func (e *StatusError) StatusCode() int { return e.Status }

// Temporary reports whether a later attempt may succeed.
func (e *StatusError) Temporary() bool {
	return e.Status == http.StatusRequestTimeout || e.Status == http.StatusTooManyRequests || e.Status >= 500
}

// RetryAfter is the response's Retry-After (0 when absent).
func (e *StatusError) RetryAfter() time.Duration { return e.After }

// refusedError is a target the URL policy refuses at connect time: no
// attempt can succeed, and the host's breaker must not count it.
type refusedError struct{ err error }

func (e *refusedError) Error() string             { return e.err.Error() }
func (e *refusedError) Unwrap() error             { return e.err }
func (e *refusedError) Temporary() bool           { return false }
func (e *refusedError) RetryAfter() time.Duration { return 0 }

// Send makes the request of p once (through the host's breaker) and
// returns the response as a Result. A response with an unexpected status
// is returned with a *StatusError. A timeout is a temporary error; a target
// the URL policy refuses is a permanent one.
func (k *Kind) Send(ctx context.Context, jobID string, p Params) (*Result, error) {
	u, err := k.guard.CheckURL(ctx, p.URL)
	if err != nil {
		return nil, retry.Permanent(fmt.Errorf("%w: %v", netguard.ErrForbidden, err))
	}
	var res *Result
	call := func(ctx context.Context) error {
		var err error
		res, err = k.send(ctx, jobID, p)
		return err
	}
	if k.cfg.Breaker != nil {
		err = k.cfg.Breaker.Do(ctx, call, breaker.Key("host", u.Host))
	} else {
		err = call(ctx)
	}
	var refused *refusedError
	if errors.As(err, &refused) {
		return nil, retry.Permanent(err)
	}
	return res, err
}

func (k *Kind) send(ctx context.Context, jobID string, p Params) (*Result, error) {
	timeout := time.Duration(p.TimeoutMs) * time.Millisecond
	if timeout <= 0 {
		timeout = TimeoutDefault
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var body io.Reader
	if p.Body != "" {
		body = strings.NewReader(p.Body)
	}
	req, err := http.NewRequestWithContext(ctx, p.Method, p.URL, body)
	if err != nil {
		return nil, &refusedError{fmt.Errorf("building the request: %w", err)}
	}
	for h, v := range p.Headers {
		req.Header.Set(h, v)
	}
	if req.Header.Get("User-Agent") == "" {
		req.Header.Set("User-Agent", UserAgent)
	}
	if req.Header.Get("Idempotency-Key") == "" {
		req.Header.Set("Idempotency-Key", jobID)
	}
	start := time.Now()
	resp, err := k.client.Do(req)
	if err != nil {
		switch {
		case errors.Is(err, netguard.ErrForbidden):
			return nil, &refusedError{err}
		case errors.Is(ctx.Err(), context.DeadlineExceeded):
			return nil, retry.Temporary(fmt.Errorf("no answer within %s: %w", timeout, context.DeadlineExceeded), 0)
		}
		return nil, fmt.Errorf("sending the request: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, MaxResultBody+1))
	if err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil, retry.Temporary(fmt.Errorf("the body did not arrive within %s: %w", timeout, context.DeadlineExceeded), 0)
		}
		return nil, fmt.Errorf("reading the response: %w", err)
	}
	res := &Result{Status: resp.StatusCode, Headers: map[string]string{}, DurationMs: time.Since(start).Milliseconds()}
	if len(b) > MaxResultBody {
		b, res.Truncated = b[:MaxResultBody], true
	}
	if utf8.Valid(b) {
		res.Body = string(b)
	} else {
		res.Body, res.BodyEncoding = base64.StdEncoding.EncodeToString(b), "base64"
	}
	for _, h := range ResultHeaders {
		if v := resp.Header.Get(h); v != "" {
			res.Headers[strings.ToLower(h)] = v
		}
	}
	if expected(p.ExpectStatus, resp.StatusCode) {
		return res, nil
	}
	return res, &StatusError{Status: resp.StatusCode, After: RetryAfter(resp.Header.Get("Retry-After"), time.Now())}
}

func expected(list []int, status int) bool {
	if len(list) == 0 {
		return status >= 200 && status < 300
	}
	return slices.Contains(list, status)
}

// RetryAfter reads a Retry-After header (seconds or an HTTP date) as a
// delay from now; 0 when absent or unreadable.
func RetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if n, err := strconv.Atoi(v); err == nil {
		return max(time.Duration(n)*time.Second, 0)
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0)
	}
	return 0
}
