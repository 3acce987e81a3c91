package lambdaruntime

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
)

// Invoker invokes a function synchronously with a JSON event and returns
// its JSON answer, as Lambda's RequestResponse invocation does. The event
// sources of the local runtime (gateway, pollers, S3 bridge, ticker) call
// functions only through it, so they work the same whether the function
// runs in process (InProcess) or as its own bootstrap binary (Function).
type Invoker interface {
	Invoke(ctx context.Context, payload []byte) ([]byte, error)
}

// StreamInvoker invokes a function whose answer streams, as a function URL
// in RESPONSE_STREAM mode does: the status and headers come first, the
// body follows while the function writes it.
type StreamInvoker interface {
	InvokeStream(ctx context.Context, payload []byte) (*StreamResponse, error)
}

// StreamResponse is a streamed function URL response. Body must be closed;
// closing it early tells the function its client went away. A read error
// other than io.EOF means the function failed or timed out mid-stream.
type StreamResponse struct {
	StatusCode int
	Headers    map[string]string
	Cookies    []string
	Body       io.ReadCloser
}

// FunctionError is a failed invocation as Lambda reports it: the error the
// function returned or panicked with (its errorType and errorMessage), or a
// failure of the runtime itself — Runtime.ExitError (the process exited),
// Sandbox.Timedout (killed at the deadline), Runtime.InitError.
type FunctionError struct {
	// Function is the function's name.
	Function string
	// Type is errorType: the Go error's type name, or the runtime's code.
	Type string `json:"errorType"`
	// Message is errorMessage.
	Message string `json:"errorMessage"`
	// StackTrace is what the runtime sent, if anything.
	StackTrace json.RawMessage `json:"stackTrace,omitempty"`
}

func (e *FunctionError) Error() string {
	return fmt.Sprintf("function %s failed: %s: %s", e.Function, e.Type, e.Message)
}

// Runtime error types, as Lambda names them.
const (
	ErrorTypeExit    = "Runtime.ExitError"
	ErrorTypeInit    = "Runtime.InitError"
	ErrorTypeTimeout = "Sandbox.Timedout"
	ErrorTypePanic   = "Runtime.Panic"
)

// InProcess wraps a Go handler — any signature lambda.Start accepts — as an
// Invoker that runs it in this process: the fast path for unit tests. A
// panic becomes a FunctionError, as a crashed invocation would.
func InProcess(name string, handler any) Invoker {
	return inProcess{name: name, handler: handler}
}

type inProcess struct {
	name    string
	handler any
}

func (p inProcess) Invoke(ctx context.Context, payload []byte) (out []byte, err error) {
	ctx = WithFunction(ctx, p.name)
	defer func() {
		if r := recover(); r != nil {
			out, err = nil, &FunctionError{Function: p.name, Type: ErrorTypePanic, Message: fmt.Sprint(r)}
		}
	}()
	// aws-lambda-go answers with the bytes of a buffer from the handler's
	// pool, put back (and reset) before Invoke returns: a concurrent
	// invocation of the same handler may overwrite them before any copy
	// (the gateway's decoder panicked "data changing underfoot" under the
	// bench's concurrent reads; -race saw the copy race). A real Lambda
	// instance runs one invocation at a time; here each invocation gets a
	// handler, and so a pool, of its own.
	out, err = lambda.NewHandler(p.handler).Invoke(ctx, payload)
	if err != nil {
		return nil, &FunctionError{Function: p.name, Type: errorType(err), Message: err.Error()}
	}
	return out, nil
}

type functionKey struct{}

// WithFunction returns ctx naming the function an in-process invocation
// runs: what Lambda's separate processes give each function for free (its
// own stdout), the local runtime gives in-process handlers through their
// context, so their log lines can go to their function's output.
func WithFunction(ctx context.Context, name string) context.Context {
	return context.WithValue(ctx, functionKey{}, name)
}

// FunctionOf is the function WithFunction named in ctx, "" if none.
func FunctionOf(ctx context.Context) string {
	name, _ := ctx.Value(functionKey{}).(string)
	return name
}

func errorType(err error) string {
	t := fmt.Sprintf("%T", err)
	t = strings.TrimPrefix(t, "*")
	if i := strings.LastIndex(t, "."); i >= 0 {
		t = t[i+1:]
	}
	return t
}

// StreamHandler is the signature of a function URL handler in
// RESPONSE_STREAM mode.
type StreamHandler func(context.Context, events.LambdaFunctionURLRequest) (*events.LambdaFunctionURLStreamingResponse, error)

// InProcessStream wraps a streaming function URL handler as a
// StreamInvoker that runs it in this process; the handler's context is the
// caller's, so a client that goes away ends it.
func InProcessStream(name string, h StreamHandler) StreamInvoker {
	return inProcessStream{name: name, h: h}
}

type inProcessStream struct {
	name string
	h    StreamHandler
}

func (p inProcessStream) InvokeStream(ctx context.Context, payload []byte) (*StreamResponse, error) {
	var req events.LambdaFunctionURLRequest
	if err := json.Unmarshal(payload, &req); err != nil {
		return nil, &FunctionError{Function: p.name, Type: "Runtime.UnmarshalError", Message: err.Error()}
	}
	resp, err := p.h(WithFunction(ctx, p.name), req)
	if err != nil {
		return nil, &FunctionError{Function: p.name, Type: errorType(err), Message: err.Error()}
	}
	if resp.StatusCode == 0 {
		resp.StatusCode = 200
	}
	body := resp.Body
	if body == nil {
		body = strings.NewReader("")
	}
	return &StreamResponse{StatusCode: resp.StatusCode, Headers: resp.Headers, Cookies: resp.Cookies, Body: readCloser{body}}, nil
}

// readCloser closes its reader when it can.
type readCloser struct{ io.Reader }

func (r readCloser) Close() error {
	if c, ok := r.Reader.(io.Closer); ok {
		return c.Close()
	}
	return nil
}

// invokeJSON marshals ev, invokes fn and unmarshals its answer into out
// (nil: the answer is ignored).
func invokeJSON(ctx context.Context, fn Invoker, ev, out any) error {
	payload, err := json.Marshal(ev)
	if err != nil {
		return fmt.Errorf("encoding the event: %w", err)
	}
	answer, err := fn.Invoke(ctx, payload)
	if err != nil {
		return err
	}
	if out == nil || len(answer) == 0 || string(answer) == "null" {
		return nil
	}
	if err := json.Unmarshal(answer, out); err != nil {
		return fmt.Errorf("decoding the function's answer: %w", err)
	}
	return nil
}
