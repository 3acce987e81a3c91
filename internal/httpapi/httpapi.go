// Package httpapi is the HTTP plumbing of the API function: a router over
// API Gateway HTTP API (payload v2) events with per-route access rules,
// strict JSON decoding (content type, size limit, unknown fields), and the
// error contract — every failure is {"error":{"code","message","field"}},
// never a 500 for anything a client sent, never a panic.
package httpapi

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/conveyor/conveyor/internal/auth"
	"github.com/conveyor/conveyor/internal/ids"
)

// MaxBodyDefault is the largest request body accepted (256 KiB).
const MaxBodyDefault = 256 << 10

// Response is an API Gateway v2 response.
type Response = events.APIGatewayV2HTTPResponse

// Access says who may call a route.
type Access int

// Access rules.
const (
	// Public needs no token.
	Public Access = iota
	// AnyUser: any valid token (user, admin, service).
	AnyUser
	// ReadOnly: admin or service.
	ReadOnly
	// AdminOnly: admin.
	AdminOnly
)

// Request is one decoded request.
type Request struct {
	Ctx       context.Context
	Raw       events.APIGatewayV2HTTPRequest
	Params    map[string]string
	Claims    auth.Claims
	RequestID string
	maxBody   int64
}

// Query returns a query parameter.
func (r *Request) Query(name string) string {
	if v, ok := r.Raw.QueryStringParameters[name]; ok {
		return v
	}
	if q, err := url.ParseQuery(r.Raw.RawQueryString); err == nil {
		return q.Get(name)
	}
	return ""
}

// Header returns a request header, case-insensitively.
func (r *Request) Header(name string) string { return header(r.Raw.Headers, name) }

func header(h map[string]string, name string) string {
	if v, ok := h[strings.ToLower(name)]; ok {
		return v
	}
	for k, v := range h {
		if strings.EqualFold(k, name) {
			return v
		}
	}
	return ""
}

// HandlerFunc handles a route.
type HandlerFunc func(r *Request) (Response, error)

// Error is a client-facing error.
type Error struct {
	Status  int
	Code    string
	Message string
	Field   string
}

func (e *Error) Error() string { return e.Message }

// Errorf builds an Error.
func Errorf(status int, code, format string, args ...any) *Error {
	return &Error{Status: status, Code: code, Message: fmt.Sprintf(format, args...)}
}

// BadRequest is a 400 about field.
func BadRequest(field, format string, args ...any) *Error {
	e := Errorf(http.StatusBadRequest, "invalid_request", format, args...)
	e.Field = field
	return e
}

// NotFound is a 404 that reveals nothing.
func NotFound() *Error { return Errorf(http.StatusNotFound, "not_found", "no such resource") }

// Conflict is a 409.
func Conflict(code, msg string) *Error {
	return &Error{Status: http.StatusConflict, Code: code, Message: msg}
}

// Unprocessable is a 422.
func Unprocessable(code, field, msg string) *Error {
	return &Error{Status: http.StatusUnprocessableEntity, Code: code, Message: msg, Field: field}
}

// Forbidden is a 403.
func Forbidden() *Error {
	return Errorf(http.StatusForbidden, "forbidden", "your role may not do this")
}

// Unauthorized is a 401.
func Unauthorized(msg string) *Error {
	return Errorf(http.StatusUnauthorized, "unauthorized", "%s", msg)
}

// JSON renders v with status.
func JSON(status int, v any) Response {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return render(Errorf(http.StatusInternalServerError, "internal", "could not render the response"))
	}
	return Response{StatusCode: status, Headers: map[string]string{"Content-Type": "application/json"}, Body: buf.String()}
}

func render(e *Error) Response {
	body := map[string]any{"code": e.Code, "message": e.Message}
	if e.Field != "" {
		body["field"] = e.Field
	}
	return JSON(e.Status, map[string]any{"error": body})
}

// Decode reads the JSON body into v: Content-Type must be application/json
// (415), the body at most the router's limit (413), one JSON value of the
// right shape with no unknown fields (400, naming the field).
func Decode(r *Request, v any) error { return DecodeWithLimit(r, v, r.maxBody) }

// DecodeWithLimit is Decode with an explicit body limit.
func DecodeWithLimit(r *Request, v any, limit int64) error {
	ct := r.Header("Content-Type")
	mt, _, err := mime.ParseMediaType(ct)
	if ct == "" || err != nil || mt != "application/json" {
		return Errorf(http.StatusUnsupportedMediaType, "unsupported_media_type", "Content-Type must be application/json")
	}
	body := []byte(r.Raw.Body)
	if r.Raw.IsBase64Encoded {
		if body, err = base64.StdEncoding.DecodeString(r.Raw.Body); err != nil {
			return BadRequest("", "the body is not valid base64")
		}
	}
	if int64(len(body)) > limit {
		return tooLarge(limit)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return decodeError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return BadRequest("", "the body must be a single JSON value")
	}
	return nil
}

func tooLarge(limit int64) *Error {
	return Errorf(http.StatusRequestEntityTooLarge, "payload_too_large", "the body must be at most %d bytes", limit)
}

func decodeError(err error) *Error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.Is(err, io.EOF):
		return BadRequest("", "the body is empty")
	case errors.As(err, &syn), errors.Is(err, io.ErrUnexpectedEOF):
		return BadRequest("", "the body is not valid JSON")
	case errors.As(err, &typ):
		field := typ.Field
		if field == "" {
			field = "(body)"
		}
		return BadRequest(field, "%s must be %s", field, describe(typ.Type.Kind().String()))
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		name := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		e := BadRequest(name, "unknown field %q", name)
		e.Code = "unknown_field"
		return e
	}
	var tp *time.ParseError
	if errors.As(err, &tp) {
		return BadRequest("", "a time must be RFC 3339")
	}
	return BadRequest("", "the body does not have the expected shape")
}

func describe(kind string) string {
	switch kind {
	case "slice", "array":
		return "an array"
	case "map", "struct":
		return "an object"
	case "string":
		return "a string"
	case "bool":
		return "a boolean"
	case "ptr":
		return "a value of another type"
	}
	return "a number"
}

// Options configures a Router.
type Options struct {
	Verifier *auth.Verifier
	Logger   *slog.Logger
	// MaxBody defaults to MaxBodyDefault.
	MaxBody int64
}

type route struct {
	method  string
	pattern string
	parts   []string
	access  Access
	h       HandlerFunc
}

// Router dispatches events to routes.
type Router struct {
	opts   Options
	routes []route
}

// NewRouter returns an empty Router.
func NewRouter(opts Options) *Router {
	if opts.MaxBody == 0 {
		opts.MaxBody = MaxBodyDefault
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Router{opts: opts}
}

// Handle adds a route; pattern segments in braces are parameters.
func (rt *Router) Handle(method, pattern string, access Access, h HandlerFunc) {
	rt.routes = append(rt.routes, route{method: method, pattern: pattern, parts: strings.Split(strings.Trim(pattern, "/"), "/"), access: access, h: h})
}

func match(parts []string, path string) (map[string]string, bool) {
	segs := strings.Split(strings.Trim(path, "/"), "/")
	if len(segs) != len(parts) {
		return nil, false
	}
	params := map[string]string{}
	for i, p := range parts {
		if strings.HasPrefix(p, "{") && strings.HasSuffix(p, "}") {
			v, err := url.PathUnescape(segs[i])
			if err != nil || v == "" {
				return nil, false
			}
			params[p[1:len(p)-1]] = v
			continue
		}
		if p != segs[i] {
			return nil, false
		}
	}
	return params, true
}

// Serve is the Lambda handler: it never returns an error, so API Gateway
// always gets the contract's answer.
func (rt *Router) Serve(ctx context.Context, ev events.APIGatewayV2HTTPRequest) (resp Response, _ error) {
	start := time.Now()
	reqID := ev.RequestContext.RequestID
	if reqID == "" {
		reqID = ids.New("req")
	}
	method := ev.RequestContext.HTTP.Method
	path := ev.RequestContext.HTTP.Path
	if path == "" {
		path = ev.RawPath
	}
	req := &Request{Ctx: ctx, Raw: ev, RequestID: reqID, maxBody: rt.opts.MaxBody}
	pattern := ""
	defer func() {
		if p := recover(); p != nil {
			rt.opts.Logger.ErrorContext(ctx, "handler panicked", "request_id", reqID, "route", pattern, "panic", fmt.Sprint(p))
			resp = render(Errorf(http.StatusInternalServerError, "internal", "internal error (request %s)", reqID))
		}
		if resp.Headers == nil {
			resp.Headers = map[string]string{}
		}
		resp.Headers["X-Request-Id"] = reqID
		if _, ok := resp.Headers["Content-Type"]; !ok && resp.StatusCode != http.StatusNoContent {
			resp.Headers["Content-Type"] = "application/json"
		}
		rt.opts.Logger.InfoContext(ctx, "request", "request_id", reqID, "method", method, "route", pattern,
			"status", resp.StatusCode, "duration_ms", time.Since(start).Milliseconds(), "user", req.Claims.Subject)
	}()
	var allowed []string
	for _, r := range rt.routes {
		params, ok := match(r.parts, path)
		if !ok {
			continue
		}
		if r.method != method {
			allowed = append(allowed, r.method)
			continue
		}
		pattern = r.pattern
		req.Params = params
		if e := rt.admit(req, r.access); e != nil {
			return render(e), nil
		}
		if cl := header(ev.Headers, "Content-Length"); cl != "" {
			if n, err := strconv.ParseInt(cl, 10, 64); err == nil && n > rt.opts.MaxBody {
				return render(tooLarge(rt.opts.MaxBody)), nil
			}
		}
		out, err := r.h(req)
		if err != nil {
			var e *Error
			if errors.As(err, &e) {
				return render(e), nil
			}
			rt.opts.Logger.ErrorContext(ctx, "request failed", "request_id", reqID, "route", pattern, "error", err.Error())
			return render(Errorf(http.StatusInternalServerError, "internal", "internal error (request %s)", reqID)), nil
		}
		return out, nil
	}
	if len(allowed) > 0 {
		sort.Strings(allowed)
		resp := render(Errorf(http.StatusMethodNotAllowed, "method_not_allowed", "use %s", strings.Join(allowed, ", ")))
		resp.Headers["Allow"] = strings.Join(allowed, ", ")
		return resp, nil
	}
	return render(NotFound()), nil
}

// admit applies the route's access rule.
func (rt *Router) admit(r *Request, a Access) *Error {
	if a == Public {
		return nil
	}
	if rt.opts.Verifier == nil {
		return Unauthorized("authentication is not configured")
	}
	c, err := rt.opts.Verifier.Verify(r.Header("Authorization"))
	if err != nil {
		return Unauthorized(strings.TrimPrefix(err.Error(), "unauthorized: "))
	}
	r.Claims = c
	switch {
	case a == AdminOnly && c.Role != auth.RoleAdmin:
		return Forbidden()
	case a == ReadOnly && c.Role != auth.RoleAdmin && c.Role != auth.RoleService:
		return Forbidden()
	}
	return nil
}
