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
// is flushed to the client as it streams. A client that goes away closes
// the stream; a function that fails before answering gets a 502, one that
// fails mid-stream gets its connection cut.
type FunctionURL struct {
	// Function is the function behind the URL.
	Function StreamInvoker
	// CORS, if set, is the URL's CORS configuration.
	CORS *CORS
	// Timeout, when positive, is the function's timeout: each invocation's
	// context ends after it, as Lambda's does (0: no limit).
	Timeout time.Duration
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// ServeHTTP implements http.Handler.
func (u *FunctionURL) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	log := u.Logger
	if log == nil {
		log = slog.Default()
	}
	origin := r.Header.Get("Origin")
	if u.CORS != nil && r.Method == http.MethodOptions && origin != "" && r.Header.Get("Access-Control-Request-Method") != "" {
		u.preflight(w, r, origin)
		return
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
	ctx := r.Context()
	if u.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, u.Timeout)
		defer cancel()
	}
	resp, err := u.Function.InvokeStream(ctx, payload)
	if err != nil {
		if r.Context().Err() == nil {
			log.ErrorContext(r.Context(), "function URL invocation failed", "error", err, "request_id", reqID)
		}
		e := functionFailed(reqID)
		e.Status = http.StatusBadGateway // a function URL's answer when the function fails
		WriteError(w, reqID, e)
		return
	}
	defer resp.Body.Close()
	// The client leaving ends the stream at once, even while the function
	// has nothing to write.
	stop := context.AfterFunc(r.Context(), func() { _ = resp.Body.Close() })
	defer stop()

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
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return
			}
			_ = rc.Flush()
		}
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			if r.Context().Err() == nil {
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
