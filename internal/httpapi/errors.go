package httpapi

import (
	"cmp"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"time"

	"github.com/conveyor/conveyor/internal/admin"
	"github.com/conveyor/conveyor/internal/aws/store"
	"github.com/conveyor/conveyor/internal/fault"
	"github.com/conveyor/conveyor/internal/invalid"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/schedule"
	"github.com/conveyor/conveyor/internal/uploads"
)

// Error codes the plumbing itself answers with. Handlers choose their own
// codes for domain failures (snake_case, stable once published).
const (
	// CodeInvalidRequest: a value is present and well-typed but not
	// acceptable (BadRequest's code).
	CodeInvalidRequest = "invalid_request"
	// CodeInvalidJSON: the body is empty, not JSON, or more than one value.
	CodeInvalidJSON = "invalid_json"
	// CodeInvalidEncoding: the body is not UTF-8, or escapes half a
	// surrogate pair: text that would be stored other than it was sent.
	CodeInvalidEncoding = "invalid_encoding"
	// CodeInvalidType: a JSON value has the wrong type for its field.
	CodeInvalidType = "invalid_type"
	// CodeUnknownField: the body has a member the endpoint does not know.
	CodeUnknownField = "unknown_field"
	// CodeUnauthorized: no token, or one that does not verify.
	CodeUnauthorized = "unauthorized"
	// CodeForbidden: the token's role may not use the route.
	CodeForbidden = "forbidden"
	// CodeNotFound: no such route, or no such resource for this caller.
	CodeNotFound = "not_found"
	// CodeMethodNotAllowed: the path exists, the method does not.
	CodeMethodNotAllowed = "method_not_allowed"
	// CodePayloadTooLarge: the body is over the router's limit.
	CodePayloadTooLarge = "payload_too_large"
	// CodeUnsupportedMediaType: a JSON endpoint got another Content-Type.
	CodeUnsupportedMediaType = "unsupported_media_type"
	// CodeInternal: the server failed; the details are only in the log.
	CodeInternal = "internal"
	// CodeInvalidCursor: a list's cursor is not one that list handed out
	// (another filter's, another user's, altered or garbled).
	CodeInvalidCursor = "invalid_cursor"
)

// Error is a failure the client is meant to see. A handler returns it (or
// an error wrapping it) and the router renders it as
// {"error":{"code","message","field"}} with Status; it never carries
// internal detail.
type Error struct {
	// Status is the HTTP status code, 4xx (or 5xx for deliberate answers).
	Status int
	// Code is a stable snake_case identifier clients may branch on.
	Code string
	// Message is human text for the client.
	Message string
	// Field is the JSON path of the offending value ("params.title",
	// "items.0.uploadId"), or empty.
	Field string
	// Limit is the limit a 429 is about (its code, value and period), or
	// nil.
	Limit *ErrorLimit
	// RetryAfter, when positive, is sent as the Retry-After header, in
	// seconds.
	RetryAfter int
}

// ErrorLimit is the limit an answer refuses a request by: Value units per
// Period (Go duration syntax), Burst at once; a quota's is its Name
// (activeJobs) and Value, with no period.
type ErrorLimit struct {
	Name   string `json:"name,omitempty"`
	Value  int    `json:"value"`
	Period string `json:"period,omitempty"`
	Burst  int    `json:"burst,omitempty"`
}

// Error returns the message.
func (e *Error) Error() string { return e.Message }

// Errorf returns an Error with status, code and a formatted message.
func Errorf(status int, code, format string, args ...any) *Error {
	return &Error{Status: status, Code: code, Message: fmt.Sprintf(format, args...)}
}

// BadRequest is a 400 invalid_request about field (may be empty).
func BadRequest(field, format string, args ...any) *Error {
	e := Errorf(http.StatusBadRequest, CodeInvalidRequest, format, args...)
	e.Field = field
	return e
}

// InvalidCursor is an invalid_cursor about the query parameter cursor, for
// every paged list: 400 when it is not a cursor's shape (base64url), 422
// when it has the shape but does not continue this list (well-formed but
// unusable: another query's, another user's, altered).
func InvalidCursor(status int, format string, args ...any) *Error {
	e := Errorf(status, CodeInvalidCursor, format, args...)
	e.Field = "cursor"
	return e
}

// cursorShape is what every cursor looks like (openapi.yaml's Cursor).
var cursorShape = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// maxCursor is the longest cursor (openapi.yaml's Cursor).
const maxCursor = 4096

// checkCursorShape is the 400 for a cursor no list hands out: the list
// handlers check it before asking their service.
func checkCursorShape(c string) error {
	if c != "" && (len(c) > maxCursor || !cursorShape.MatchString(c)) {
		return InvalidCursor(http.StatusBadRequest, "the cursor is not one a list hands out (base64url, at most 4096 characters); use the nextCursor of the same query, or start without one")
	}
	return nil
}

// NotFound is a 404 that reveals nothing, not even whether the resource
// exists for someone else.
func NotFound() *Error {
	return &Error{Status: http.StatusNotFound, Code: CodeNotFound, Message: "no such resource"}
}

// Conflict is a 409: the resource is not in a state that allows this.
func Conflict(code, msg string) *Error {
	return &Error{Status: http.StatusConflict, Code: code, Message: msg}
}

// Unprocessable is a 422: the request is well-formed but cannot be acted on.
func Unprocessable(code, field, msg string) *Error {
	return &Error{Status: http.StatusUnprocessableEntity, Code: code, Message: msg, Field: field}
}

// Forbidden is a 403: the caller is known but its role may not do this.
func Forbidden() *Error {
	return &Error{Status: http.StatusForbidden, Code: CodeForbidden, Message: "your role may not do this"}
}

// TooManyRequests is the 429 of a caller over a rate: th's code, message
// and limit, with Retry-After in whole seconds (at least 1).
func TooManyRequests(th *fault.Throttled) *Error {
	secs := max(int((th.RetryAfter+time.Second-1)/time.Second), 1)
	return &Error{Status: http.StatusTooManyRequests, Code: th.Code, Message: th.Msg, RetryAfter: secs,
		Limit: &ErrorLimit{Name: th.Name, Value: th.Limit, Period: periodOf(th.Period), Burst: th.Burst}}
}

// periodOf is a limit's period in the answer: "" for a quota (a count,
// not a rate).
func periodOf(d time.Duration) string {
	if d <= 0 {
		return ""
	}
	return d.String()
}

// Unauthorized is a 401 with msg saying what is wrong with the credentials.
func Unauthorized(msg string) *Error {
	return &Error{Status: http.StatusUnauthorized, Code: CodeUnauthorized, Message: msg}
}

// CodeAuthUnavailable: the tokens' key could not be read; try again.
const CodeAuthUnavailable = "auth_unavailable"

// KeyUnavailable is the 503 for a request whose token could not be judged
// because the verification key could not be read: the caller may retry.
func KeyUnavailable() *Error {
	return Errorf(http.StatusServiceUnavailable, CodeAuthUnavailable, "tokens cannot be verified right now; try again shortly")
}

func internalError(requestID string) *Error {
	return Errorf(http.StatusInternalServerError, CodeInternal, "internal error; quote request id %s when reporting it", requestID)
}

func tooLarge(limit int64) *Error {
	return Errorf(http.StatusRequestEntityTooLarge, CodePayloadTooLarge, "the body must be at most %d bytes", limit)
}

// clientError renders what the services refuse in the contract's terms, in
// one place for every route group: input to correct (*invalid.FieldError,
// from any service, a schedule's job template included) → 400 naming the
// field; a cursor another list handed out → 422 invalid_cursor; input that
// is well-formed but unusable (a job's or a template's, an upload not in S3
// yet) or a user at a limit (webhooks, schedules) → 422; a transition the
// state does not allow, or an operator's bulk call that conflicts → 409; an
// unknown or another user's resource, breaker or tier → 404; Scheduler out
// of capacity → 503; a caller over a rate (*fault.Throttled) → 429 with
// Retry-After and the limit. Any other error passes through and becomes a 500
// whose detail is only logged.
func clientError(err error) error {
	var (
		unusable    *invalid.UnusableError
		limit       *fault.Limit
		throttled   *fault.Throttled
		notFound    *fault.NotFound
		transition  *job.TransitionError
		conflict    *admin.ConflictError
		unavailable *schedule.UnavailableError
	)
	if fe, ok := invalid.As(err); ok {
		return BadRequest(fe.Field, "%s", fe.Error())
	}
	switch {
	case errors.As(err, &unusable):
		return Unprocessable(unusable.Code, unusable.Field, unusable.Message)
	case errors.As(err, &limit):
		return Unprocessable(limit.Code, "", limit.Error())
	case errors.As(err, &throttled):
		return TooManyRequests(throttled)
	case errors.Is(err, uploads.ErrNotUploaded):
		return Unprocessable("upload_missing", "", "the object has not been uploaded yet")
	case errors.As(err, &transition):
		return Conflict("invalid_transition", transition.Error())
	case errors.As(err, &conflict):
		return Conflict(conflict.Code, conflict.Message)
	case errors.As(err, &notFound) && (notFound.Code != "" || notFound.Detail != ""):
		return Errorf(http.StatusNotFound, cmp.Or(notFound.Code, CodeNotFound), "%s", cmp.Or(notFound.Detail, notFound.Msg))
	case errors.Is(err, fault.ErrNotFound):
		return NotFound()
	case errors.Is(err, store.ErrBadCursor):
		return InvalidCursor(http.StatusUnprocessableEntity, "the cursor does not continue this list (%v); use the nextCursor of the same query, or start without one", err)
	case errors.As(err, &unavailable):
		return Errorf(http.StatusServiceUnavailable, "scheduler_unavailable", "the scheduler cannot take this schedule now (its quota or rate limit); try again later")
	}
	return err
}

type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Field   string `json:"field,omitempty"`
	// Limit is the limit of a 429 (openapi.yaml's Error.error.limit).
	Limit *ErrorLimit `json:"limit,omitempty"`
}

// render turns e into its response.
func render(e *Error) Response {
	resp := JSON(e.Status, errorBody{Error: errorDetail{Code: e.Code, Message: e.Message, Field: e.Field, Limit: e.Limit}})
	if e.RetryAfter > 0 {
		if resp.Headers == nil {
			resp.Headers = map[string]string{}
		}
		resp.Headers["Retry-After"] = strconv.Itoa(e.RetryAfter)
	}
	return resp
}
