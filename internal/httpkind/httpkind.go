// Package httpkind is the "http" kind of job: one outbound HTTP request
// delivered reliably. Its front (front.go) says what the job's params and
// result are and checks a submission: the URL https and public outside the
// local environment (netguard's policy), the method, the headers, the
// sizes, the timeout.
//
// Header values are secrets (API keys, bearer tokens). Prepare seals them
// into the job (job.Job.Sealed, a KMS envelope bound to the owner, the job
// and the purpose "http-headers") and keeps only the names in the job's
// params, each value replaced by Redacted, so the stored params, every API
// response and every event snapshot show which headers a job sends and
// never what. The run that sends the request opens them.
//
// Its Work sends the job's one request through its owner's circuit of the
// target host (breaker.Targets: never the product's own circuits) and
// records the response as the job's result. The URL is checked again when
// the connection is made (netguard's dialer, so DNS rebinding cannot reach
// a private address); 5xx, 408, 429 and timeouts are retried with the
// job's backoff (at least the response's Retry-After), any other status
// outside expectStatus fails the job at once. The response — status,
// selected headers, body up to 256 KiB, duration — is the job's result.
//
// Delivery is at least once: a worker that dies after the target answered
// but before the answer was stored sends the request again on the next
// attempt. Every request carries Idempotency-Key: <job id> (unless the job
// sets its own) so that the target can drop the repeat.
//
// Limits: a job that has waited MaxSnoozes times without spending an
// attempt (a 429, an open circuit) fails with CodeWaitsExhausted, and one
// that has not succeeded within MaxAge of becoming due (job.DueSince)
// fails with CodeMaxAge. A timeout shorter than TimeoutFloor is the
// caller's choice, not the target's failure: it is retried but does not
// count on the circuit. The job's header values are opened from
// job.Job.Sealed only here, for the request; error texts carry the URL
// without its query string (RedactURL).
package httpkind

import (
	"context"
	"encoding/base64"
	"encoding/json"
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

	"github.com/conveyor/conveyor/internal/envelope"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/netguard"
	"github.com/conveyor/conveyor/internal/retry"
	"github.com/conveyor/conveyor/internal/telemetry"
)

// UserAgent is sent unless the job sets its own.
const UserAgent = "Conveyor-HTTP/1"

// ResultHeaders are the response headers kept in the result.
var ResultHeaders = []string{"Cache-Control", "Content-Length", "Content-Type", "Date", "Etag", "Last-Modified", "Location", "Retry-After", "X-Request-Id"}

// Breaker runs a call under owner's circuit of host (breaker.Targets).
type Breaker interface {
	Do(ctx context.Context, owner, host string, fn func(context.Context) error) error
}

// Opener opens a job's sealed headers (sealer.Sealer).
type Opener interface {
	Open(ctx context.Context, e envelope.Envelope, aad map[string]string) ([]byte, error)
}

// Reason codes of the jobs the limits end (job.Error.Code).
const (
	CodeWaitsExhausted = "waits_exhausted"
	CodeMaxAge         = "max_age_exceeded"
)

// Config configures the kind.
type Config struct {
	// Local allows plain http and private targets (the local environment).
	Local bool
	// Resolver looks up target names, at submission and at dial time
	// (default net.DefaultResolver).
	Resolver netguard.Resolver
	// Breaker guards each (owner, host) (nil: no breaker).
	Breaker Breaker
	// Opener opens the jobs' sealed headers (nil: a job with sealed
	// headers cannot run).
	Opener Opener
	// Sealer seals the headers of the jobs the kind's front prepares (nil:
	// jobs with headers are refused, jobs without are fine).
	Sealer Sealer
	// MaxSnoozes bounds a job's waits without an attempt (default
	// MaxSnoozesDefault).
	MaxSnoozes int
	// MaxAge bounds how long after it became due a job is tried (default
	// MaxAgeDefault).
	MaxAge time.Duration
	// TimeoutFloor: a timeout shorter than it does not count on the
	// circuit (default TimeoutFloorDefault).
	TimeoutFloor time.Duration
	// Transport overrides the HTTP transport (tests); production uses one
	// whose dialer applies the URL policy.
	Transport http.RoundTripper
}

// Kind is the http kind: its front (front.go) and its Work.
type Kind struct {
	cfg    Config
	guard  netguard.Policy
	client *http.Client
}

// New returns the http kind.
func New(cfg Config) *Kind {
	if cfg.MaxSnoozes <= 0 {
		cfg.MaxSnoozes = MaxSnoozesDefault
	}
	if cfg.MaxAge <= 0 {
		cfg.MaxAge = MaxAgeDefault
	}
	if cfg.TimeoutFloor <= 0 {
		cfg.TimeoutFloor = TimeoutFloorDefault
	}
	guard := netguard.Policy{AllowHTTP: cfg.Local, AllowPrivate: cfg.Local, Resolver: cfg.Resolver}
	tr := cfg.Transport
	if tr == nil {
		tr = &http.Transport{DialContext: guard.DialContext, TLSHandshakeTimeout: 10 * time.Second, MaxIdleConnsPerHost: 8,
			ResponseHeaderTimeout: MaxTimeout}
	}
	return &Kind{cfg: cfg, guard: guard, client: &http.Client{
		// The request is a client span, its traceparent sent to the target.
		Transport:     telemetry.Transport(tr, func(r *http.Request) string { return r.Method + " " + r.URL.Host }),
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

// Work sends the request once and records the response as the result.
func (k *Kind) Work(ctx context.Context, a job.Run) error {
	j := a.Job()
	var p Params
	if err := j.Params.Decode(&p); err != nil {
		return job.Step(PhaseRequest, -1, retry.Permanent(fmt.Errorf("reading the job's params: %w", err)))
	}
	u, err := url.Parse(p.URL)
	if err != nil {
		return job.Step(PhaseRequest, -1, retry.Permanent(Redact(fmt.Errorf("params.url: %w", err), p.URL)))
	}
	if err := k.tooOld(j, a.Now(), a.Now()); err != nil {
		return job.Step(PhaseRequest, -1, err)
	}
	if p.Headers, err = k.headers(ctx, j, p.Headers); err != nil {
		return job.Step(PhaseRequest, -1, err)
	}
	if err := a.Save(ctx, func(j *job.Job) {
		j.StartPhase(PhaseRequest, p.Method+" "+u.Host, a.Now())
	}); err != nil {
		return err
	}
	// The run loop's check that this attempt still holds the job, for as
	// long as the request may take, and that the invocation has that time.
	if err := a.Hold(ctx, time.Duration(p.TimeoutMs)*time.Millisecond); err != nil {
		clear(p.Headers)
		return err
	}
	res, err := k.Send(ctx, j.Owner, j.ID, p)
	clear(p.Headers)
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
		if gaveUp := k.giveUp(j, err, a.Now()); gaveUp != nil {
			err = gaveUp
		}
		return job.Step(PhaseRequest, -1, err)
	}
	a.Logger().InfoContext(ctx, "http job delivered", "status", res.Status, "duration_ms", res.DurationMs)
	return a.Save(ctx, func(j *job.Job) {
		now := a.Now()
		j.CompletePhase(PhaseRequest, strconv.Itoa(res.Status), now)
		j.Result, j.Error = doc, nil
		_ = j.Apply(job.Succeed, now)
	})
}

// headers returns the job's request headers: the sealed values opened
// (names from the params, values from job.Job.Sealed), or the params' own
// for a job without sealed headers.
func (k *Kind) headers(ctx context.Context, j job.Job, named map[string]string) (map[string]string, error) {
	if j.Sealed == nil {
		for h, v := range named {
			if v == Redacted {
				return nil, retry.Permanent(fmt.Errorf("header %s is redacted and the job holds no sealed value for it", h))
			}
		}
		return named, nil
	}
	if k.cfg.Opener == nil {
		return nil, errors.New("the job's headers are sealed and this worker cannot open them")
	}
	plain, err := k.cfg.Opener.Open(ctx, *j.Sealed, SealContext(j.Owner, j.ID))
	if errors.Is(err, envelope.ErrOpen) {
		return nil, retry.Permanent(errors.New("the job's sealed headers do not open"))
	}
	if err != nil {
		return nil, fmt.Errorf("opening the job's headers: %w", err)
	}
	defer clear(plain)
	var h map[string]string
	if err := json.Unmarshal(plain, &h); err != nil {
		return nil, retry.Permanent(errors.New("the job's sealed headers are not a header map"))
	}
	return h, nil
}

// GaveUpError ends a job that reached one of the kind's limits: its Code
// is CodeWaitsExhausted or CodeMaxAge. It is permanent.
type GaveUpError struct {
	Code string
	Err  error
}

func (e *GaveUpError) Error() string { return e.Err.Error() }

// Unwrap returns the reason.
func (e *GaveUpError) Unwrap() error { return e.Err }

// JobErrorCode is the code the job's error carries.
func (e *GaveUpError) JobErrorCode() string { return e.Code }

func gaveUp(code string, err error) error { return retry.Permanent(&GaveUpError{Code: code, Err: err}) }

// tooOld says, as a GaveUpError, whether trying j again at until would be
// past MaxAge after j became due (now is the time of the question).
func (k *Kind) tooOld(j job.Job, until, now time.Time) error {
	due := j.DueSince()
	if due.IsZero() || !until.After(due.Add(k.cfg.MaxAge)) {
		return nil
	}
	if !until.After(now) {
		return gaveUp(CodeMaxAge, fmt.Errorf("gave up: the job became due %s ago, more than the %s an http job may take",
			now.Sub(due).Round(time.Second), k.cfg.MaxAge))
	}
	return gaveUp(CodeMaxAge, fmt.Errorf("gave up: the next try (%s) would be more than %s after the job became due",
		until.UTC().Format(time.RFC3339), k.cfg.MaxAge))
}

// giveUp turns err, when it would make j wait without spending an
// attempt (a 429, an open circuit), into a GaveUpError if that wait is
// one too many or would end past MaxAge; else it returns nil.
func (k *Kind) giveUp(j job.Job, err error, now time.Time) error {
	var until time.Time
	var snooze *retry.SnoozeError
	switch {
	case errors.As(err, &snooze) && retry.Classify(err) == retry.ClassSnooze:
		until = snooze.Until()
	case retry.RateLimited(err):
		var ra interface{ RetryAfter() time.Duration }
		until = now
		if errors.As(err, &ra) {
			until = now.Add(ra.RetryAfter())
		}
	default:
		return nil
	}
	if j.Snoozes >= k.cfg.MaxSnoozes {
		return gaveUp(CodeWaitsExhausted, fmt.Errorf("gave up after %d waits without an attempt (429 or circuit open), the most an http job may wait: %w",
			j.Snoozes, err))
	}
	return k.tooOld(j, until, now)
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

// refusedError is a target the URL policy refuses at connect time, or a
// request that cannot be built: no attempt can succeed, and the circuit
// must not count it (the caller caused it).
type refusedError struct{ err error }

func (e *refusedError) Error() string             { return e.err.Error() }
func (e *refusedError) Unwrap() error             { return e.err }
func (e *refusedError) Temporary() bool           { return false }
func (e *refusedError) RetryAfter() time.Duration { return 0 }
func (e *refusedError) CallerCaused() bool        { return true }

// callerCaused marks a failure the job's own settings caused (a timeout
// below TimeoutFloor): retried as its cause says, not counted on the
// circuit (breaker.CallerCaused).
type callerCaused struct{ err error }

func (e *callerCaused) Error() string      { return e.err.Error() }
func (e *callerCaused) Unwrap() error      { return e.err }
func (e *callerCaused) CallerCaused() bool { return true }

// Send makes the request of p once (through owner's circuit of the host)
// and returns the response as a Result. p.Headers are sent as they are
// (Work opens the sealed values first). A response with an unexpected
// status is returned with a *StatusError. A timeout is a temporary error;
// a target the URL policy refuses is a permanent one. No error's text
// carries the URL's query string.
func (k *Kind) Send(ctx context.Context, owner, jobID string, p Params) (*Result, error) {
	res, err := k.sendGuarded(ctx, owner, jobID, p)
	return res, Redact(err, p.URL)
}

func (k *Kind) sendGuarded(ctx context.Context, owner, jobID string, p Params) (*Result, error) {
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
		err = k.cfg.Breaker.Do(ctx, owner, u.Host, call)
	} else {
		err = call(ctx)
	}
	var refused *refusedError
	if errors.As(err, &refused) {
		return nil, retry.Permanent(err)
	}
	return res, err
}

// RedactURL returns raw without its query string, fragment and user
// information (a removed query shows as "?[redacted]"), for error texts
// and logs.
func RedactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		if i := strings.IndexAny(raw, "?#"); i >= 0 {
			return raw[:i] + "?[redacted]"
		}
		return raw
	}
	q := u.RawQuery != "" || u.ForceQuery
	u.RawQuery, u.ForceQuery, u.Fragment, u.RawFragment, u.User = "", false, "", "", nil
	s := u.String()
	if q {
		s += "?[redacted]"
	}
	return s
}

// Redact returns err with raw's query string (and fragment, user
// information) gone from its text: a *url.Error in its chain names
// RedactURL(raw), and any other occurrence is replaced. The chain (for
// errors.Is/As and the retry policy) is kept. Redact(nil, …) is nil.
func Redact(err error, raw string) error {
	if err == nil {
		return nil
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		ue.URL = RedactURL(ue.URL)
	}
	msg := err.Error()
	clean := msg
	if raw != "" {
		clean = strings.ReplaceAll(clean, raw, RedactURL(raw))
	}
	if u, perr := url.Parse(raw); perr == nil {
		for _, secret := range []string{"?" + u.RawQuery, "#" + u.Fragment, u.User.String() + "@"} {
			if len(secret) > 1 {
				clean = strings.ReplaceAll(clean, secret, "?[redacted]")
			}
		}
		// What is left of the query elsewhere, unless too short to tell.
		if q := u.RawQuery; len(q) >= 8 {
			clean = strings.ReplaceAll(clean, q, "[redacted]")
		}
	}
	if clean == msg {
		return err
	}
	return &redactedError{msg: clean, err: err}
}

// redactedError is an error whose text had a secret removed.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

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
		return nil, &refusedError{fmt.Errorf("building the request to %s: %w", RedactURL(p.URL), Redact(err, p.URL))}
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
			return nil, k.timedOut(timeout, retry.Temporary(fmt.Errorf("no answer within %s: %w", timeout, context.DeadlineExceeded), 0))
		}
		return nil, fmt.Errorf("sending the request: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, MaxResultBody+1))
	if err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil, k.timedOut(timeout, retry.Temporary(fmt.Errorf("the body did not arrive within %s: %w", timeout, context.DeadlineExceeded), 0))
		}
		return nil, fmt.Errorf("reading the response: %w", err)
	}
	res := &Result{Status: resp.StatusCode, Headers: map[string]string{}, DurationMs: time.Since(start).Milliseconds()}
	keepBody(res, b)
	for _, h := range ResultHeaders {
		if v := resp.Header.Get(h); v != "" {
			res.Headers[strings.ToLower(h)], _ = cutEncoded(v, MaxResultHeader)
		}
	}
	if expected(p.ExpectStatus, resp.StatusCode) {
		return res, nil
	}
	return res, &StatusError{Status: resp.StatusCode, After: RetryAfter(resp.Header.Get("Retry-After"), time.Now())}
}

// timedOut marks the timeout err of a request whose timeout was below the
// floor as the caller's own.
func (k *Kind) timedOut(timeout time.Duration, err error) error {
	if timeout < k.cfg.TimeoutFloor {
		return &callerCaused{err}
	}
	return err
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

// keepBody sets res's body from b, the response's first bytes (at most
// MaxResultBody+1 of them): as text when it is UTF-8, else base64, and in
// either case at most MaxResultBody bytes as the job's JSON encodes it
// (job.Marshal: a control character takes six bytes, a quote two), so the
// result stays within job.MaxDocBytes whatever the target answers.
// Truncated says the body was cut.
func keepBody(res *Result, b []byte) {
	if len(b) > MaxResultBody {
		b, res.Truncated = b[:MaxResultBody], true
		// A character cut in two at the end would make text look binary.
		for i := 0; i < utf8.UTFMax && !utf8.Valid(b) && len(b) > 0; i++ {
			b = b[:len(b)-1]
		}
	}
	if !utf8.Valid(b) {
		if n := MaxResultBody / 4 * 3; len(b) > n {
			b, res.Truncated = b[:n], true
		}
		res.Body, res.BodyEncoding = base64.StdEncoding.EncodeToString(b), "base64"
		return
	}
	var cut bool
	res.Body, cut = cutEncoded(string(b), MaxResultBody)
	res.Truncated = res.Truncated || cut
}

// cutEncoded returns the longest prefix of s, a UTF-8 text, that
// job.Marshal encodes in at most n bytes (quotes aside), and whether it
// is shorter than s.
func cutEncoded(s string, n int) (string, bool) {
	i, size := 0, 0
	for i < len(s) {
		r, w := utf8.DecodeRuneInString(s[i:])
		if size+escapedLen(r, w) > n {
			return s[:i], true
		}
		size += escapedLen(r, w)
		i += w
	}
	return s, false
}

// escapedLen is how many bytes job.Marshal writes for r (w bytes of UTF-8)
// inside a JSON string.
func escapedLen(r rune, w int) int {
	switch {
	case r == '"' || r == '\\' || r == '\b' || r == '\f' || r == '\n' || r == '\r' || r == '\t':
		return 2
	case r < 0x20 || r == '\u2028' || r == '\u2029':
		return 6
	}
	return w
}
