package lambdaruntime

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
)

// The Lambda Runtime API, as a provided runtime (aws-lambda-go's
// lambda.Start) speaks it:
// https://docs.aws.amazon.com/lambda/latest/dg/runtimes-api.html and, for
// streamed responses, runtimes-custom.html#runtimes-custom-response-streaming.
const (
	runtimeAPIPrefix = "/2018-06-01/runtime/"

	headerRequestID          = "Lambda-Runtime-Aws-Request-Id"
	headerDeadlineMS         = "Lambda-Runtime-Deadline-Ms"
	headerInvokedFunctionARN = "Lambda-Runtime-Invoked-Function-Arn"
	headerTraceID            = "Lambda-Runtime-Trace-Id"
	headerErrorType          = "Lambda-Runtime-Function-Error-Type"
	headerResponseMode       = "Lambda-Runtime-Function-Response-Mode"
	// Trailers a streaming runtime sends when the function fails after
	// the response began (aws-lambda-go sets them on a body read error).
	trailerErrorType = "Lambda-Runtime-Function-Error-Type"
	trailerErrorBody = "Lambda-Runtime-Function-Error-Body"

	// contentTypeHTTPIntegration marks a function URL response: a JSON
	// prelude {statusCode, headers, cookies}, eight NUL bytes, the body.
	contentTypeHTTPIntegration = "application/vnd.awslambda.http-integration-response"
	// maxPrelude bounds the prelude of a function URL response.
	maxPrelude = 1 << 20
)

// preludeSeparator ends the prelude of a function URL response.
var preludeSeparator = []byte{0, 0, 0, 0, 0, 0, 0, 0}

// api is the Runtime API endpoint of one instance.
func (in *instance) api() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+runtimeAPIPrefix+"invocation/next", in.handleNext)
	mux.HandleFunc("POST "+runtimeAPIPrefix+"invocation/{id}/response", in.handleResponse)
	mux.HandleFunc("POST "+runtimeAPIPrefix+"invocation/{id}/error", in.handleError)
	mux.HandleFunc("POST "+runtimeAPIPrefix+"init/error", in.handleInitError)
	return mux
}

// handleNext blocks until an invocation is handed to this instance.
func (in *instance) handleNext(w http.ResponseWriter, r *http.Request) {
	in.markReady()
	var inv *invocation
	select {
	case inv = <-in.next:
	case <-r.Context().Done():
		return
	}
	inv.deadline = time.Now().Add(in.fn.cfg.Timeout)
	close(inv.accepted)
	in.mu.Lock()
	in.current = inv
	in.mu.Unlock()
	h := w.Header()
	h.Set(headerRequestID, inv.id)
	h.Set(headerDeadlineMS, strconv.FormatInt(inv.deadline.UnixMilli(), 10))
	h.Set(headerInvokedFunctionARN, in.fn.arn)
	h.Set(headerTraceID, traceID())
	h.Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(inv.payload)
}

// claim returns the invocation in flight if id names it, and forgets it
// (a second answer for the same invocation is refused).
func (in *instance) claim(w http.ResponseWriter, id string) *invocation {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.current == nil || in.current.id != id {
		writeAPIError(w, http.StatusBadRequest, "InvalidRequestID", "no invocation "+id+" is in flight on this instance")
		return nil
	}
	inv := in.current
	in.current = nil
	in.markAnswered()
	return inv
}

// handleResponse takes the function's answer: buffered, or streamed
// (chunked, maybe with error trailers).
func (in *instance) handleResponse(w http.ResponseWriter, r *http.Request) {
	inv := in.claim(w, r.PathValue("id"))
	if inv == nil {
		return
	}
	mediaType, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	httpIntegration := mediaType == contentTypeHTTPIntegration
	streamed := httpIntegration || strings.EqualFold(r.Header.Get(headerResponseMode), "streaming")
	if inv.stream && streamed {
		in.streamResponse(w, r, inv, httpIntegration)
		return
	}
	limit := int64(MaxResponseSize)
	if streamed {
		limit = 1 << 40 // a streamed answer read whole has no limit
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	switch {
	case err != nil:
		inv.fail(in.fnError("Runtime.ResponseError", "reading the response: "+err.Error()))
		return
	case int64(len(body)) > limit:
		inv.fail(in.fnError("Function.ResponseSizeTooLarge", fmt.Sprintf("Response payload size exceeded maximum allowed payload size (%d bytes).", MaxResponseSize)))
		writeAPIError(w, http.StatusRequestEntityTooLarge, "RequestEntityTooLarge", "the response is too large")
		return
	}
	if ferr := trailerError(in, r.Trailer); ferr != nil {
		inv.fail(ferr)
		w.WriteHeader(http.StatusAccepted)
		return
	}
	out := outcome{payload: body}
	if inv.stream {
		if httpIntegration {
			// A stream invocation got its answer in one piece.
			out.stream, err = parseIntegration(bytes.NewReader(body))
		} else {
			out.stream, err = parseBufferedURLResponse(body)
		}
		if err != nil {
			inv.fail(in.fnError("Runtime.InvalidResponse", err.Error()))
			w.WriteHeader(http.StatusAccepted)
			return
		}
	} else if httpIntegration {
		if i := bytes.Index(body, preludeSeparator); i >= 0 {
			out.payload = body[i+len(preludeSeparator):]
		}
	}
	inv.succeed(out)
	inv.finish()
	w.WriteHeader(http.StatusAccepted)
}

// streamResponse passes a streamed function URL response on as it comes:
// the prelude becomes the head of the StreamResponse, the rest its body.
func (in *instance) streamResponse(w http.ResponseWriter, r *http.Request, inv *invocation, httpIntegration bool) {
	br := bufio.NewReaderSize(r.Body, 32<<10)
	head := &StreamResponse{StatusCode: http.StatusOK}
	if httpIntegration {
		h, err := readPrelude(br)
		if err != nil {
			inv.fail(in.fnError("Runtime.InvalidResponse", err.Error()))
			w.WriteHeader(http.StatusAccepted)
			return
		}
		head = h
	}
	pr, pw := io.Pipe()
	head.Body = pr
	inv.mu.Lock()
	inv.abort = func(err error) { pw.CloseWithError(err) }
	inv.mu.Unlock()
	inv.succeed(outcome{stream: head})

	buf := make([]byte, 32<<10)
	for {
		n, rerr := br.Read(buf)
		if n > 0 {
			if _, werr := pw.Write(buf[:n]); werr != nil {
				// The client went away (it closed the body): drop the
				// connection the function writes on, so it learns.
				in.dropConnection(w)
				inv.fail(in.fnError("Runtime.ClientDisconnected", "the client closed the stream"))
				return
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			pw.CloseWithError(fmt.Errorf("the function's response broke: %w", rerr))
			inv.finish()
			return
		}
	}
	if ferr := trailerError(in, r.Trailer); ferr != nil {
		pw.CloseWithError(ferr)
	} else {
		_ = pw.Close()
	}
	inv.finish()
	w.WriteHeader(http.StatusAccepted)
}

// dropConnection closes the runtime's response connection without an
// answer, as Lambda does when a streaming client leaves: the function
// learns it at its next write, when aws-lambda-go's post of the response
// fails; aws-lambda-go then closes the response body (the function's
// chance to clean up: the stream function frees its slot there) and exits.
// An instance that has not exited within dropGrace is killed.
func (in *instance) dropConnection(w http.ResponseWriter) {
	in.dropped.Store(true)
	conn, _, err := http.NewResponseController(w).Hijack()
	if err == nil {
		_ = conn.Close()
	}
	go func() {
		select {
		case <-in.exited:
		case <-time.After(dropGrace):
			in.kill()
		}
	}()
}

// dropGrace is how long an instance whose streaming client left may take
// to notice and exit before it is killed.
const dropGrace = 30 * time.Second

// handleError takes an invocation's error: the JSON of
// {errorMessage, errorType, stackTrace}.
func (in *instance) handleError(w http.ResponseWriter, r *http.Request) {
	inv := in.claim(w, r.PathValue("id"))
	if inv == nil {
		return
	}
	inv.fail(in.readError(r))
	w.WriteHeader(http.StatusAccepted)
}

// handleInitError takes the runtime's report that it cannot start; the
// instance is then done for.
func (in *instance) handleInitError(w http.ResponseWriter, r *http.Request) {
	ferr := in.readError(r)
	if ferr.Type == "" {
		ferr.Type = ErrorTypeInit
	}
	in.mu.Lock()
	in.posted = ferr
	in.mu.Unlock()
	in.fn.log.Warn("function init failed", "instance", in.id, "error_type", ferr.Type, "error", ferr.Message)
	w.WriteHeader(http.StatusAccepted)
	go in.kill()
}

func (in *instance) readError(r *http.Request) *FunctionError {
	ferr := in.fnError(r.Header.Get(headerErrorType), "")
	body, _ := io.ReadAll(io.LimitReader(r.Body, MaxResponseSize))
	var e struct {
		Message    string          `json:"errorMessage"`
		Type       string          `json:"errorType"`
		StackTrace json.RawMessage `json:"stackTrace"`
	}
	if json.Unmarshal(body, &e) == nil {
		ferr.Message, ferr.StackTrace = e.Message, e.StackTrace
		if e.Type != "" {
			ferr.Type = e.Type
		}
	} else {
		ferr.Message = string(body)
	}
	if ferr.Type == "" {
		ferr.Type = "Unhandled"
	}
	return ferr
}

func (in *instance) fnError(typ, msg string) *FunctionError {
	return &FunctionError{Function: in.fn.cfg.Name, Type: typ, Message: msg}
}

// trailerError is the error a streaming runtime reported in the trailers
// of its response, if any.
func trailerError(in *instance, tr http.Header) *FunctionError {
	typ := tr.Get(trailerErrorType)
	if typ == "" {
		return nil
	}
	ferr := in.fnError(typ, "")
	if raw, err := base64.StdEncoding.DecodeString(tr.Get(trailerErrorBody)); err == nil {
		var e struct {
			Message string `json:"errorMessage"`
		}
		if json.Unmarshal(raw, &e) == nil {
			ferr.Message = e.Message
		}
	}
	return ferr
}

// readPrelude reads a function URL response's prelude, up to and including
// its eight NUL bytes.
func readPrelude(br *bufio.Reader) (*StreamResponse, error) {
	var prelude []byte
	for !bytes.HasSuffix(prelude, preludeSeparator) {
		b, err := br.ReadByte()
		if err != nil {
			return nil, fmt.Errorf("the response ended inside its prelude: %w", err)
		}
		prelude = append(prelude, b)
		if len(prelude) > maxPrelude {
			return nil, errors.New("the response's prelude is too long")
		}
	}
	var p struct {
		StatusCode int               `json:"statusCode"`
		Headers    map[string]string `json:"headers"`
		Cookies    []string          `json:"cookies"`
	}
	if err := json.Unmarshal(prelude[:len(prelude)-len(preludeSeparator)], &p); err != nil {
		return nil, fmt.Errorf("the response's prelude is not JSON: %w", err)
	}
	if p.StatusCode == 0 {
		p.StatusCode = http.StatusOK
	}
	return &StreamResponse{StatusCode: p.StatusCode, Headers: p.Headers, Cookies: p.Cookies}, nil
}

// parseIntegration reads a whole function URL response.
func parseIntegration(r io.Reader) (*StreamResponse, error) {
	br := bufio.NewReader(r)
	head, err := readPrelude(br)
	if err != nil {
		return nil, err
	}
	head.Body = io.NopCloser(br)
	return head, nil
}

// parseBufferedURLResponse reads a function URL answer in BUFFERED mode:
// events.LambdaFunctionURLResponse, or any other JSON, which Lambda sends
// as the body of a 200.
func parseBufferedURLResponse(payload []byte) (*StreamResponse, error) {
	var resp events.LambdaFunctionURLResponse
	if err := json.Unmarshal(payload, &resp); err != nil || resp.StatusCode == 0 {
		return &StreamResponse{StatusCode: http.StatusOK, Headers: map[string]string{"Content-Type": "application/json"},
			Body: io.NopCloser(bytes.NewReader(payload))}, nil
	}
	body := []byte(resp.Body)
	if resp.IsBase64Encoded {
		b, err := base64.StdEncoding.DecodeString(resp.Body)
		if err != nil {
			return nil, fmt.Errorf("the response body is not base64: %w", err)
		}
		body = b
	}
	return &StreamResponse{StatusCode: resp.StatusCode, Headers: resp.Headers, Cookies: resp.Cookies, Body: io.NopCloser(bytes.NewReader(body))}, nil
}

// writeAPIError answers the runtime with the Runtime API's error shape.
func writeAPIError(w http.ResponseWriter, status int, typ, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	b, _ := json.Marshal(map[string]string{"errorType": typ, "errorMessage": msg})
	_, _ = w.Write(b)
}

// traceID is an X-Ray trace header for one invocation (not sampled).
func traceID() string {
	return fmt.Sprintf("Root=1-%08x-%s;Parent=%s;Sampled=0", time.Now().Unix(), randomHex(12), randomHex(8))
}
