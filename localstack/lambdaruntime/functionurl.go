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
)

// CORS is a function URL's CORS configuration; Lambda answers preflights
// from it without invoking the function and adds its headers to answers.
type CORS struct {
	// AllowOrigins may call ("*": any).
	AllowOrigins []string
	// AllowMethods and AllowHeaders answer preflights.
	AllowMethods []string
	AllowHeaders []string
	// MaxAge is how long a browser may cache a preflight's answer.
	MaxAge time.Duration
}

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
	if u.CORS != nil && r.Method == http.MethodOptions && origin != "" && r.Header.Get("Access-Control-Request-Method") != "" {
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
	if u.CORS != nil && origin != "" && u.allowed(origin) {
		h.Set("Access-Control-Allow-Origin", u.allowOrigin(origin))
		h.Add("Vary", "Origin")
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

func (u *FunctionURL) preflight(w http.ResponseWriter, r *http.Request, origin string) {
	h := w.Header()
	if u.allowed(origin) {
		h.Set("Access-Control-Allow-Origin", u.allowOrigin(origin))
		h.Set("Access-Control-Allow-Methods", strings.Join(u.CORS.AllowMethods, ","))
		if len(u.CORS.AllowHeaders) > 0 {
			h.Set("Access-Control-Allow-Headers", strings.Join(u.CORS.AllowHeaders, ","))
		}
		if u.CORS.MaxAge > 0 {
			h.Set("Access-Control-Max-Age", strconv.Itoa(int(u.CORS.MaxAge.Seconds())))
		}
		h.Add("Vary", "Origin")
	}
	w.WriteHeader(http.StatusOK)
}

func (u *FunctionURL) allowed(origin string) bool {
	return slices.Contains(u.CORS.AllowOrigins, "*") || slices.Contains(u.CORS.AllowOrigins, origin)
}

func (u *FunctionURL) allowOrigin(origin string) string {
	if slices.Contains(u.CORS.AllowOrigins, "*") {
		return "*"
	}
	return origin
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
