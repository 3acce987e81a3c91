// Package httpcall is the work half of the "http" kind of job (its
// front, the params and their checks, is internal/httpjob): it sends the
// job's one request through the shared circuit breaker of its target host
// and records the response as the job's result. The URL is checked again
// when the connection is made (netguard's dialer, so DNS rebinding cannot
// reach a private address); 5xx, 408, 429 and timeouts are retried with the
// job's backoff (at least the response's Retry-After), any other status
// outside expectStatus fails the job at once. The response — status,
// selected headers, body up to 256 KiB, duration — is the job's result.
//
// Delivery is at least once: a worker that dies after the target answered
// but before the answer was stored sends the request again on the next
// attempt. Every request carries Idempotency-Key: <job id> (unless the job
// sets its own) so that the target can drop the repeat.
package httpcall

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/conveyor/conveyor/internal/breaker"
	"github.com/conveyor/conveyor/internal/httpjob"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/kind"
	"github.com/conveyor/conveyor/internal/netguard"
	"github.com/conveyor/conveyor/internal/retry"
)

// UserAgent is sent unless the job sets its own.
const UserAgent = "Conveyor-HTTP/1"

// ResultHeaders are the response headers kept in the result.
var ResultHeaders = []string{"Cache-Control", "Content-Length", "Content-Type", "Date", "Etag", "Last-Modified", "Location", "Retry-After", "X-Request-Id"}

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

// Kind is the http kind: its front (httpjob.Front) and its Work.
type Kind struct {
	httpjob.Front
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
			ResponseHeaderTimeout: httpjob.MaxTimeout}
	}
	return &Kind{cfg: cfg, guard: guard, client: &http.Client{
		Transport:     tr,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

// Work sends the request once and records the response as the result.
func (k *Kind) Work(ctx context.Context, a kind.Attempt) error {
	j := a.Job()
	var p httpjob.Params
	if err := j.Params.Decode(&p); err != nil {
		return kind.Step(httpjob.PhaseRequest, -1, retry.Permanent(fmt.Errorf("reading the job's params: %w", err)))
	}
	u, err := url.Parse(p.URL)
	if err != nil {
		return kind.Step(httpjob.PhaseRequest, -1, retry.Permanent(fmt.Errorf("params.url: %w", err)))
	}
	if err := a.Save(ctx, func(j *job.Job) {
		j.StartPhase(httpjob.PhaseRequest, p.Method+" "+u.Host, a.Now())
	}); err != nil {
		return err
	}
	// The run loop's check that this attempt still holds the job, for as
	// long as the request may take, and that the invocation has that time.
	if err := a.Hold(ctx, time.Duration(p.TimeoutMs)*time.Millisecond); err != nil {
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
		return kind.Step(httpjob.PhaseRequest, -1, err)
	}
	a.Logger().InfoContext(ctx, "http job delivered", "status", res.Status, "duration_ms", res.DurationMs)
	return a.Save(ctx, func(j *job.Job) {
		now := a.Now()
		j.CompletePhase(httpjob.PhaseRequest, strconv.Itoa(res.Status), now)
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
func (k *Kind) Send(ctx context.Context, jobID string, p httpjob.Params) (*httpjob.Result, error) {
	u, err := k.guard.CheckURL(ctx, p.URL)
	if err != nil {
		return nil, retry.Permanent(fmt.Errorf("%w: %v", netguard.ErrForbidden, err))
	}
	var res *httpjob.Result
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

func (k *Kind) send(ctx context.Context, jobID string, p httpjob.Params) (*httpjob.Result, error) {
	timeout := time.Duration(p.TimeoutMs) * time.Millisecond
	if timeout <= 0 {
		timeout = httpjob.TimeoutDefault
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
	b, err := io.ReadAll(io.LimitReader(resp.Body, httpjob.MaxResultBody+1))
	if err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil, retry.Temporary(fmt.Errorf("the body did not arrive within %s: %w", timeout, context.DeadlineExceeded), 0)
		}
		return nil, fmt.Errorf("reading the response: %w", err)
	}
	res := &httpjob.Result{Status: resp.StatusCode, Headers: map[string]string{}, DurationMs: time.Since(start).Milliseconds()}
	if len(b) > httpjob.MaxResultBody {
		b, res.Truncated = b[:httpjob.MaxResultBody], true
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
