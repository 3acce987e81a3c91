// Package apiclient is the one Go client of Conveyor's HTTP API (API.md,
// openapi.yaml): the operator CLI, the benchmark, the chaos harness and the
// tests all call the API through it. Every operation takes a context and
// returns the API's own types (job.Job, admin.Overview, uploads.Signed …);
// an answer outside 2xx is an *APIError with the status, the contract's
// error code, message and field, the Retry-After and the request id.
//
// A Client holds the base URL, the bearer token (a user's or an operator's
// JWT) and the *http.Client; it is safe for concurrent use, and As returns
// a copy that calls with another token. Do is the raw way in, for callers
// that send what the typed methods would not (a malformed body, a header).
package apiclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/conveyor/conveyor/internal/invalid"
	"github.com/conveyor/conveyor/internal/job"
)

// Defaults of a Client.
const (
	// UserAgentDefault is the User-Agent of a Client built without
	// WithUserAgent.
	UserAgentDefault = "conveyor-apiclient"
	// MaxAnswerBytes bounds how much of an answer is read (the largest the
	// API sends is a page of 200 jobs).
	MaxAnswerBytes = 16 << 20
)

// Client calls one environment's API. The zero value is not usable; build
// it with New.
type Client struct {
	base      string
	streams   string
	token     string
	userAgent string
	http      *http.Client
	now       func() time.Time
}

// Option configures a Client.
type Option func(*Client)

// WithToken sets the bearer token sent with every call (a user's JWT, or an
// admin or service JWT for the admin routes). Without it no Authorization
// header is sent.
func WithToken(token string) Option { return func(c *Client) { c.token = token } }

// WithHTTPClient sets the *http.Client (default http.DefaultClient: no
// timeout of its own, so the context bounds each call).
func WithHTTPClient(h *http.Client) Option { return func(c *Client) { c.http = h } }

// WithUserAgent sets the User-Agent header (default UserAgentDefault).
func WithUserAgent(ua string) Option { return func(c *Client) { c.userAgent = ua } }

// WithStreamURL sets the origin of the event streams (in AWS a Lambda
// function URL of its own; default: the API's base URL).
func WithStreamURL(u string) Option {
	return func(c *Client) { c.streams = strings.TrimRight(u, "/") }
}

// New returns a client of the API at baseURL ("https://api.example.com",
// "http://127.0.0.1:8080"; a trailing slash is ignored).
func New(baseURL string, opts ...Option) *Client {
	c := &Client{base: strings.TrimRight(baseURL, "/"), userAgent: UserAgentDefault, http: http.DefaultClient, now: time.Now}
	for _, o := range opts {
		o(c)
	}
	if c.http == nil {
		c.http = http.DefaultClient
	}
	if c.streams == "" {
		c.streams = c.base
	}
	return c
}

// As returns a copy of c that sends token instead (one client per user of
// a test or a benchmark, sharing the connection pool).
func (c *Client) As(token string) *Client {
	cp := *c
	cp.token = token
	return &cp
}

// BaseURL is the API's base URL, without a trailing slash.
func (c *Client) BaseURL() string { return c.base }

// APIError is an answer outside 2xx. When the server spoke the contract's
// error shape ({"error":{"code","message","field"}}) Code, Message and
// Field come from it; otherwise Code is empty and Message is the start of
// the body (or the status text).
type APIError struct {
	// Status is the HTTP status code.
	Status int
	// Code is the contract's snake_case code ("not_found", "invalid_request").
	Code string
	// Message is the server's human text.
	Message string
	// Field is the JSON path (or query parameter) at fault, when the
	// server named one ("params.title", "limit").
	Field string
	// RetryAfter is the answer's Retry-After (seconds or an HTTP date),
	// zero when it had none.
	RetryAfter time.Duration
	// Limit is the limit a 429 names (throttled: the owner's request
	// rate; quota_exceeded: a quota, by Name; docs/limits.md), nil when it
	// names none.
	Limit *Limit
	// RequestID is the answer's X-Request-Id, to quote in a report.
	RequestID string
	// Method and Path are the call that failed.
	Method, Path string
}

// Limit is a limit an answer refuses a request by: a rate is Value per
// Period, Burst at once; a quota is its Name (activeJobs) and Value, with
// no Period.
type Limit struct {
	Name   string `json:"name,omitempty"`
	Value  int    `json:"value"`
	Period string `json:"period,omitempty"`
	Burst  int    `json:"burst,omitempty"`
}

// Error is "404 not_found: no such resource" (or "HTTP 502: <body>" when
// the answer was not in the contract's shape).
func (e *APIError) Error() string {
	if e.Code == "" {
		return fmt.Sprintf("HTTP %d: %s", e.Status, e.Message)
	}
	return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Message)
}

// Unwrap returns the field error the answer names, as the server's services
// spell it (*invalid.FieldError), so invalid.As works on both sides.
func (e *APIError) Unwrap() error {
	if e.Field == "" {
		return nil
	}
	return &invalid.FieldError{Field: e.Field, Message: strings.TrimPrefix(e.Message, e.Field+" ")}
}

// Temporary reports whether the same call may succeed later: 429, 502, 503
// and 504 (RetryAfter, when set, says when).
func (e *APIError) Temporary() bool {
	switch e.Status {
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// StatusOf returns the status of the *APIError in err's tree, or 0.
func StatusOf(err error) int {
	var ae *APIError
	if errors.As(err, &ae) {
		return ae.Status
	}
	return 0
}

// IsNotFound reports whether err is a 404 of the API.
func IsNotFound(err error) bool { return StatusOf(err) == http.StatusNotFound }

// Response is an answer as it came, whatever its status (Do).
type Response struct {
	Status int
	Header http.Header
	Body   []byte

	method, path string
	at           time.Time
}

// Err returns nil for a 2xx answer, else its *APIError.
func (r *Response) Err() error {
	if r.Status >= 200 && r.Status <= 299 {
		return nil
	}
	return apiError(r.method, r.path, r, r.at)
}

// Do sends one request and returns the answer whatever its status; the
// error is only the transport's (or ctx's). body is sent as it is when it
// is nil, a string, a []byte or an io.Reader, and as JSON otherwise (with
// Content-Type application/json, which header may override). header adds
// to or replaces the client's headers; an empty Authorization removes the
// token.
func (c *Client) Do(ctx context.Context, method, path string, body any, header http.Header) (*Response, error) {
	return c.do(ctx, c.base, method, path, body, header)
}

func (c *Client) do(ctx context.Context, origin, method, path string, body any, header http.Header) (*Response, error) {
	req, err := c.request(ctx, origin, method, path, body, header)
	if err != nil {
		return nil, err
	}
	resp, err := c.http.Do(req) // its *url.Error names the method and URL
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, MaxAnswerBytes))
	if err != nil {
		return nil, fmt.Errorf("%s %s: reading the answer: %w", method, path, err)
	}
	return &Response{Status: resp.StatusCode, Header: resp.Header, Body: raw, method: method, path: path, at: c.now()}, nil
}

func (c *Client) request(ctx context.Context, origin, method, path string, body any, header http.Header) (*http.Request, error) {
	var rd io.Reader
	switch v := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(v)
	case []byte:
		rd = bytes.NewReader(v)
	case io.Reader:
		rd = v
	default:
		// As the API encodes: < stays one byte (the request's 256 KiB
		// hold what the contract allows).
		raw, err := job.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("%s %s: encoding the body: %w", method, path, err)
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(ctx, method, origin+path, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json") // header may say otherwise
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", c.userAgent)
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	for k, vs := range header {
		req.Header.Del(k)
		for _, v := range vs {
			if v != "" {
				req.Header.Add(k, v)
			}
		}
	}
	return req, nil
}

// call sends body (nil: none; else JSON) and decodes a 2xx answer into out
// (when not nil); it returns the answer's headers.
func (c *Client) call(ctx context.Context, method, path string, body, out any) (http.Header, error) {
	r, err := c.do(ctx, c.base, method, path, body, nil)
	if err != nil {
		return nil, err
	}
	if err := r.Err(); err != nil {
		return r.Header, err
	}
	if out == nil || len(r.Body) == 0 {
		return r.Header, nil
	}
	return r.Header, decode(method, path, r.Body, out)
}

func apiError(method, path string, r *Response, now time.Time) *APIError {
	e := &APIError{Status: r.Status, Method: method, Path: path, RequestID: r.Header.Get("X-Request-Id"), RetryAfter: retryAfter(r.Header.Get("Retry-After"), now)}
	var body struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
			Field   string `json:"field"`
			Limit   *Limit `json:"limit"`
		} `json:"error"`
	}
	if json.Unmarshal(r.Body, &body) == nil && body.Error.Code != "" {
		e.Code, e.Message, e.Field, e.Limit = body.Error.Code, body.Error.Message, body.Error.Field, body.Error.Limit
		return e
	}
	msg := strings.TrimSpace(string(r.Body))
	if len(msg) > 200 {
		msg = msg[:200] + "…"
	}
	if msg == "" {
		msg = http.StatusText(r.Status)
	}
	e.Message = msg
	return e
}

// retryAfter reads a Retry-After value: delay-seconds or an HTTP date
// (RFC 9110 §10.2.3); 0 when absent, unreadable or past.
func retryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if s, err := strconv.Atoi(v); err == nil {
		if s < 0 {
			return 0
		}
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// Health calls GET /healthz: nil when the API and its table answer.
func (c *Client) Health(ctx context.Context) error {
	_, err := c.call(ctx, http.MethodGet, "/healthz", nil, nil)
	return err
}
