// Package runtime stands in, on localhost, for the parts of AWS that run
// Conveyor's functions and that the emulator does not provide: Lambda
// itself (a Runtime API that runs each function's own bootstrap binary, see
// Function), API Gateway (an HTTP gateway building payload v2 events),
// function URLs with response streaming (FunctionURL), Lambda's SQS event
// source mappings (pollers with batchItemFailures), EventBridge schedules (a
// ticker), and S3 → Lambda notifications (a bridge queue). Event sources
// invoke functions through Invoker, so a function may equally run in
// process (InProcess), calling the very handlers that Lambda calls.
package lambdaruntime

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"

	"github.com/conveyor/conveyor/internal/httpapi"
	"github.com/conveyor/conveyor/internal/ids"
)

// MaxGatewayBody is what API Gateway accepts as a request body (10 MB);
// the handler applies the API's own, smaller limit.
const MaxGatewayBody = 10 << 20

// ErrBodyTooLarge is Event's error for a body over MaxGatewayBody.
var ErrBodyTooLarge = errors.New("the body is over the gateway's limit")

// GatewayError is an answer the gateway gives itself, without the
// function's: a body it will not carry, a function that failed.
type GatewayError struct {
	Status  int
	Code    string
	Message string
}

// WriteError answers e in the API's error contract,
// {"error":{"code","message"}}, with X-Request-Id, as every answer of the
// API is. (API Gateway's own answers in AWS are {"message":"…"} with the
// id in apigw-requestid; openapi.yaml says which they are. Locally they
// take the contract's shape, so that a client meets one shape.)
func WriteError(w http.ResponseWriter, requestID string, e GatewayError) {
	body, _ := json.Marshal(map[string]any{"error": map[string]string{"code": e.Code, "message": e.Message}})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Request-Id", requestID)
	w.WriteHeader(e.Status)
	_, _ = w.Write(append(body, '\n'))
}

// eventError is the answer to a request Event could not turn into an
// event: its body is over the limit (API Gateway's 413) or could not be
// read (the client went away mid-body: a 400 it will likely never see).
func eventError(err error) GatewayError {
	if errors.Is(err, ErrBodyTooLarge) {
		// The API's own limit is what a client is told: a body this large
		// is over it too, and the gateway's larger one is no promise.
		return GatewayError{Status: http.StatusRequestEntityTooLarge, Code: httpapi.CodePayloadTooLarge,
			Message: fmt.Sprintf("the body must be at most %d bytes", httpapi.MaxBodyDefault)}
	}
	return GatewayError{Status: http.StatusBadRequest, Code: httpapi.CodeInvalidRequest, Message: "the body could not be read"}
}

// functionFailed is the answer when the function did not answer (API
// Gateway's 500 in AWS, a function URL's 502).
func functionFailed(requestID string) GatewayError {
	return GatewayError{Status: http.StatusInternalServerError, Code: httpapi.CodeInternal,
		Message: "internal error; quote request id " + requestID + " when reporting it"}
}

// Gateway turns HTTP requests into API Gateway HTTP API (payload v2) events
// for fn, and fn's responses back into HTTP, as API Gateway does.
func Gateway(fn Invoker, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ev, err := Event(r)
		if err != nil {
			WriteError(w, ids.New("req"), eventError(err))
			return
		}
		var resp events.APIGatewayV2HTTPResponse
		if err := invokeJSON(r.Context(), fn, ev, &resp); err != nil {
			// API Gateway answers 500 when the function itself fails.
			reqID := ev.RequestContext.RequestID
			log.ErrorContext(r.Context(), "API function failed", "error", err, "request_id", reqID)
			WriteError(w, reqID, functionFailed(reqID))
			return
		}
		Write(w, resp)
	})
}

// RouteByPath sends every request to the handler of the function that
// pick names for its path (resources.FunctionForPath: the HTTP API's route
// table), as API Gateway sends each route to its integration. Unlike
// http.ServeMux it never redirects: a path is answered by the function it
// names. A name without a handler is a wiring mistake: 500, as API
// Gateway answers for an integration that fails.
func RouteByPath(pick func(path string) string, fns map[string]http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h, ok := fns[pick(r.URL.Path)]
		if !ok {
			reqID := ids.New("req")
			WriteError(w, reqID, functionFailed(reqID))
			return
		}
		h.ServeHTTP(w, r)
	})
}

// Event builds the payload v2 event of r.
func Event(r *http.Request) (events.APIGatewayV2HTTPRequest, error) {
	now := time.Now().UTC()
	body, err := io.ReadAll(io.LimitReader(r.Body, MaxGatewayBody+1))
	if err != nil {
		return events.APIGatewayV2HTTPRequest{}, err
	}
	if len(body) > MaxGatewayBody {
		return events.APIGatewayV2HTTPRequest{}, ErrBodyTooLarge
	}
	headers := map[string]string{}
	for name, vals := range r.Header {
		if strings.EqualFold(name, "Cookie") {
			continue
		}
		headers[strings.ToLower(name)] = strings.Join(vals, ",")
	}
	if r.ContentLength >= 0 && len(body) > 0 {
		headers["content-length"] = strconv.Itoa(len(body))
	}
	var cookies []string
	for _, c := range r.Cookies() {
		cookies = append(cookies, c.String())
	}
	query := map[string]string{}
	for k, vals := range r.URL.Query() {
		query[k] = strings.Join(vals, ",")
	}
	sourceIP, _, _ := net.SplitHostPort(r.RemoteAddr)
	ev := events.APIGatewayV2HTTPRequest{
		Version:               "2.0",
		RouteKey:              "$default",
		RawPath:               r.URL.EscapedPath(),
		RawQueryString:        r.URL.RawQuery,
		Cookies:               cookies,
		Headers:               headers,
		QueryStringParameters: query,
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			RouteKey:   "$default",
			AccountID:  "123456789012",
			Stage:      "$default",
			RequestID:  ids.New("req"),
			APIID:      "local",
			DomainName: r.Host,
			Time:       now.Format("02/Jan/2006:15:04:05 -0700"),
			TimeEpoch:  now.UnixMilli(),
			HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{
				Method: r.Method, Path: r.URL.Path, Protocol: r.Proto, SourceIP: sourceIP, UserAgent: r.UserAgent(),
			},
		},
	}
	if len(body) > 0 {
		if utf8.Valid(body) {
			ev.Body = string(body)
		} else {
			ev.Body, ev.IsBase64Encoded = base64.StdEncoding.EncodeToString(body), true
		}
	}
	return ev, nil
}

// Write renders a payload v2 response.
func Write(w http.ResponseWriter, resp events.APIGatewayV2HTTPResponse) {
	for k, v := range resp.Headers {
		w.Header().Set(k, v)
	}
	for k, vs := range resp.MultiValueHeaders {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	for _, c := range resp.Cookies {
		w.Header().Add("Set-Cookie", c)
	}
	body := []byte(resp.Body)
	if resp.IsBase64Encoded {
		if b, err := base64.StdEncoding.DecodeString(resp.Body); err == nil {
			body = b
		}
	}
	status := resp.StatusCode
	if status == 0 {
		status = http.StatusOK
	}
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
