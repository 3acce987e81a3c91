package lambdaruntime

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/conveyor/conveyor/internal/ids"
	"github.com/conveyor/conveyor/internal/resources"
)

// CORS is a function URL's or an HTTP API's CORS configuration; Lambda
// and API Gateway answer preflights from it without invoking the function
// and add its headers to answers.
type CORS struct {
	// AllowOrigins may call ("*": any).
	AllowOrigins []string
	// AllowMethods and AllowHeaders answer preflights.
	AllowMethods []string
	AllowHeaders []string
	// ExposeHeaders are the response headers a page's script may read.
	ExposeHeaders []string
	// MaxAge is how long a browser may cache a preflight's answer.
	MaxAge time.Duration
}

// CORSOf is the configuration of the definition's c for origins.
func CORSOf(c resources.CORS, origins []string) *CORS {
	return &CORS{AllowOrigins: slices.Clone(origins), AllowMethods: slices.Clone(c.AllowMethods),
		AllowHeaders: slices.Clone(c.AllowHeaders), ExposeHeaders: slices.Clone(c.ExposeHeaders), MaxAge: c.MaxAge}
}

// isPreflight reports whether r is a browser's CORS preflight.
func isPreflight(r *http.Request) bool {
	return r.Method == http.MethodOptions && r.Header.Get("Origin") != "" && r.Header.Get("Access-Control-Request-Method") != ""
}

// allowed reports whether origin may call.
func (c *CORS) allowed(origin string) bool {
	return slices.Contains(c.AllowOrigins, "*") || slices.Contains(c.AllowOrigins, origin)
}

// allowOrigin is the Access-Control-Allow-Origin answered to origin.
func (c *CORS) allowOrigin(origin string) string {
	if slices.Contains(c.AllowOrigins, "*") {
		return "*"
	}
	return origin
}

// preflightHeaders sets the answer to an allowed origin's preflight.
func (c *CORS) preflightHeaders(h http.Header, origin string) {
	h.Set("Access-Control-Allow-Origin", c.allowOrigin(origin))
	h.Set("Access-Control-Allow-Methods", strings.Join(c.AllowMethods, ","))
	if len(c.AllowHeaders) > 0 {
		h.Set("Access-Control-Allow-Headers", strings.Join(c.AllowHeaders, ","))
	}
	if c.MaxAge > 0 {
		h.Set("Access-Control-Max-Age", strconv.Itoa(int(c.MaxAge.Seconds())))
	}
	h.Add("Vary", "Origin")
}

// responseHeaders sets, on an answer to an allowed origin, the origin and
// the headers its script may read.
func (c *CORS) responseHeaders(h http.Header, origin string) {
	h.Set("Access-Control-Allow-Origin", c.allowOrigin(origin))
	if len(c.ExposeHeaders) > 0 {
		h.Set("Access-Control-Expose-Headers", strings.Join(c.ExposeHeaders, ","))
	}
	h.Add("Vary", "Origin")
}

// WithCORS serves next behind an HTTP API's CORS configuration c, as API
// Gateway does for an API with one: it answers every preflight itself
// (204; the CORS headers only for an allowed origin), never invoking a
// function, and sets the allowed origin and the exposed headers on every
// other answer to an allowed origin, replacing any the function set (API
// Gateway ignores an integration's CORS headers then). A nil c: next
// alone (an API without CORS passes OPTIONS to its routes).
func WithCORS(c *CORS, next http.Handler) http.Handler {
	if c == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		origin := r.Header.Get("Origin")
		if isPreflight(r) {
			if c.allowed(origin) {
				c.preflightHeaders(w.Header(), origin)
			}
			w.WriteHeader(http.StatusNoContent)
			return
		}
		if origin != "" && c.allowed(origin) {
			next.ServeHTTP(&corsWriter{ResponseWriter: w, set: func(h http.Header) { c.responseHeaders(h, origin) }}, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// corsWriter sets the CORS headers just before the answer's header goes
// out, over whatever the function set.
type corsWriter struct {
	http.ResponseWriter
	set   func(http.Header)
	wrote bool
}

func (w *corsWriter) WriteHeader(status int) {
	if !w.wrote {
		w.wrote = true
		for k := range w.Header() {
			if strings.HasPrefix(strings.ToLower(k), "access-control-") {
				w.Header().Del(k)
			}
		}
		w.set(w.Header())
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *corsWriter) Write(b []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection.
func (w *corsWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// FunctionURL serves a function the way its Lambda function URL does in
// RESPONSE_STREAM mode: each request becomes an
// events.LambdaFunctionURLRequest (payload 2.0) for Function, whose status
// and headers are sent as soon as the function gives them and whose body
// is flushed to the client as it streams. A function that fails before
// answering gets a 502, one that fails mid-stream gets its connection cut.
//
// As in AWS, a client that goes away does not stop the invocation: the
// function runs on, its writes taken and dropped, until it ends its
// response or its timeout ends it, and it holds one of the function's
// executions all that time. Beyond Concurrency invocations at once (the
// function's reserved concurrency) a request is throttled at once with
// Lambda's 429, the function not invoked.
type FunctionURL struct {
	// Function is the function behind the URL.
	Function StreamInvoker
	// CORS, if set, is the URL's CORS configuration.
	CORS *CORS
	// Timeout, when positive, is the function's timeout: each invocation's
	// context ends after it, as Lambda's does (0: no limit).
	Timeout time.Duration
	// Concurrency, when positive, is the function's reserved concurrency:
	// the most invocations that run at once.
	Concurrency int
	// Logger defaults to slog.Default().
	Logger *slog.Logger

	once    sync.Once
	running chan struct{} // one token per running invocation
	base    context.Context
	stop    context.CancelFunc
}

func (u *FunctionURL) init() {
	u.once.Do(func() {
		if u.Concurrency > 0 {
			u.running = make(chan struct{}, u.Concurrency)
		}
		u.base, u.stop = context.WithCancel(context.Background())
	})
}

// Close ends every running invocation (the local stack going down).
func (u *FunctionURL) Close() {
	u.init()
	u.stop()
}

// ThrottledBody is what a function URL answers, with 429, to a request
// beyond its function's concurrency.
const ThrottledBody = `{"Message":"Rate Exceeded."}`

// ServeHTTP implements http.Handler.
func (u *FunctionURL) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	u.init()
	log := u.Logger
	if log == nil {
		log = slog.Default()
	}
	origin := r.Header.Get("Origin")
	if u.CORS != nil && isPreflight(r) {
		u.preflight(w, r, origin)
		return
	}
	if u.running != nil {
		select {
		case u.running <- struct{}{}:
			defer func() { <-u.running }()
		default:
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("x-amzn-ErrorType", "TooManyRequestsException")
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = io.WriteString(w, ThrottledBody)
			return
		}
	}
	ev, err := urlEvent(r)
	if err != nil {
		WriteError(w, ids.New("req"), eventError(err))
		return
	}
	reqID := ev.RequestContext.RequestID
	payload, err := json.Marshal(ev)
	if err != nil {
		WriteError(w, reqID, functionFailed(reqID))
		return
	}
	// The invocation's context is not the request's: the client leaving
	// does not end it.
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	defer cancel()
	defer context.AfterFunc(u.base, cancel)()
	if u.Timeout > 0 {
		ctx, cancel = context.WithTimeout(ctx, u.Timeout)
		defer cancel()
	}
	resp, err := u.Function.InvokeStream(ctx, payload)
	if err != nil {
		if r.Context().Err() == nil && u.base.Err() == nil {
			log.ErrorContext(r.Context(), "function URL invocation failed", "error", err, "request_id", reqID)
		}
		e := functionFailed(reqID)
		e.Status = http.StatusBadGateway // a function URL's answer when the function fails
		WriteError(w, reqID, e)
		return
	}
	defer resp.Body.Close()

	h := w.Header()
	for k, v := range resp.Headers {
		h.Set(k, v)
	}
	for _, c := range resp.Cookies {
		h.Add("Set-Cookie", c)
	}
	if u.CORS != nil && origin != "" && u.CORS.allowed(origin) {
		u.CORS.responseHeaders(h, origin)
	}
	w.WriteHeader(resp.StatusCode)
	rc := http.NewResponseController(w)
	_ = rc.Flush()
	buf := make([]byte, 32<<10)
	gone := false // the client went away: what the function writes is dropped
	for {
		n, err := resp.Body.Read(buf)
		gone = gone || r.Context().Err() != nil
		if n > 0 && !gone {
			if _, werr := w.Write(buf[:n]); werr != nil {
				gone = true
			} else {
				_ = rc.Flush()
			}
		}
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			if r.Context().Err() == nil && !gone {
				log.WarnContext(r.Context(), "the function's stream ended with an error; cutting the connection", "error", err, "request_id", ev.RequestContext.RequestID)
				panic(http.ErrAbortHandler)
			}
			return
		}
	}
}

func (u *FunctionURL) preflight(w http.ResponseWriter, _ *http.Request, origin string) {
	if u.CORS.allowed(origin) {
		u.CORS.preflightHeaders(w.Header(), origin)
	}
	w.WriteHeader(http.StatusOK)
}

// urlEvent builds the function URL event of r (payload 2.0, which differs
// from API Gateway's only in its route key and API id).
func urlEvent(r *http.Request) (events.LambdaFunctionURLRequest, error) {
	gw, err := Event(r)
	if err != nil {
		return events.LambdaFunctionURLRequest{}, err
	}
	rc := gw.RequestContext
	domainPrefix, _, _ := strings.Cut(rc.DomainName, ".")
	return events.LambdaFunctionURLRequest{
		Version: "2.0", RawPath: gw.RawPath, RawQueryString: gw.RawQueryString, Cookies: gw.Cookies,
		Headers: gw.Headers, QueryStringParameters: gw.QueryStringParameters,
		Body: gw.Body, IsBase64Encoded: gw.IsBase64Encoded,
		RequestContext: events.LambdaFunctionURLRequestContext{
			AccountID: AccountID, RequestID: ids.New("req"), APIID: "local", DomainName: rc.DomainName,
			DomainPrefix: domainPrefix, Time: rc.Time, TimeEpoch: rc.TimeEpoch,
			HTTP: events.LambdaFunctionURLRequestContextHTTPDescription{
				Method: rc.HTTP.Method, Path: rc.HTTP.Path, Protocol: rc.HTTP.Protocol, SourceIP: rc.HTTP.SourceIP, UserAgent: rc.HTTP.UserAgent,
			},
		},
	}, nil
}
