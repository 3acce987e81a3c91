// Package httpapi is the HTTP API of the contract (openapi.yaml) over API
// Gateway HTTP API (payload v2) events, in one package: the router with
// per-route access rules, strict JSON decoding (content type, size limit,
// unknown fields, types), the error contract — every failure is
// {"error":{"code","message","field"}}, never a 500 for anything a client
// sent, never a crash — the creating POSTs' Idempotency-Key guard, one
// structured access log line per request, and the routes, one file per
// route group. Each HTTP function (resources.HTTPRoutes) registers only its
// group: the api function RegisterUsers (users.go: health, account
// connection, jobs; webhooks.go) and RegisterDashboard (dashboard.go), the
// admin, uploads and schedules functions RegisterAdmin (admin.go),
// RegisterUploads (uploads.go) and RegisterSchedules (schedules.go). A route
// decodes its request, calls a domain service and renders the answer;
// clientError (errors.go) maps what the services refuse to the contract's
// statuses. No rule of the domain lives here.
//
// The API's bearer tokens are verified and minted here too (token.go,
// oidc.go, jwks.go), for the router and for the stream function and the CLI:
// HS256 JWTs signed with the environment's secret, carrying sub, role, plan
// and exp, and, when an OpenID Connect issuer is configured (OIDCConfig),
// the RS256 and ES256 tokens of that issuer, verified with its published
// key set. Every other algorithm (none included), a bad signature, a missing
// or past exp, a missing subject or an unknown role or plan is refused; so
// is an HS256 token that claims to come from the issuer, and an issuer's
// token whose key is not of its algorithm's type.
package httpapi

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/conveyor/conveyor/internal/ids"
	"github.com/conveyor/conveyor/internal/telemetry"
)

// MaxBodyDefault is the largest request body accepted unless Options say
// otherwise (256 KiB).
const MaxBodyDefault = 256 << 10

// Access says who may call a route. The zero value is not a valid Access, so
// a route cannot become public by omission.
type Access int

// Access rules.
const (
	// Public needs no token; Request.Claims stays zero.
	Public Access = iota + 1
	// AnyUser needs a valid token of any role (user, admin, service) on a
	// route that only reads (GET, HEAD). Handle refuses it on a method
	// that writes: such a route is Writer.
	AnyUser
	// ReadOnly needs an admin or service token, on a route that only reads.
	ReadOnly
	// AdminOnly needs an admin token.
	AdminOnly
	// Writer needs a user or admin token: a route that changes something
	// on the caller's behalf. Service tokens are read-only everywhere
	// (API.md, "Admin"), so they get 403.
	Writer
)

// String names the rule.
func (a Access) String() string {
	switch a {
	case Public:
		return "public"
	case AnyUser:
		return "any-user"
	case ReadOnly:
		return "read-only"
	case AdminOnly:
		return "admin-only"
	case Writer:
		return "writer"
	}
	return "Access(" + strconv.Itoa(int(a)) + ")"
}

// allows reports whether role r may call a route of rule a with method.
// Whatever the rule, a service token never passes a method that writes: the
// contract makes service read-only, and this keeps it so even for a route
// registered with the wrong rule.
func (a Access) allows(r Role, method string) bool {
	if r == RoleService && !safeMethod(method) {
		return false
	}
	switch a {
	case AnyUser:
		return r.Valid()
	case ReadOnly:
		return r == RoleAdmin || r == RoleService
	case AdminOnly:
		return r == RoleAdmin
	case Writer:
		return r == RoleUser || r == RoleAdmin
	}
	return false
}

// safeMethod reports whether method only reads (RFC 9110 safe methods).
func safeMethod(method string) bool {
	return method == http.MethodGet || method == http.MethodHead || method == http.MethodOptions
}

// RouteInfo describes one registered route.
type RouteInfo struct {
	// Method is the HTTP method, upper case.
	Method string
	// Pattern is the path pattern as registered ("/v1/jobs/{id}").
	Pattern string
	// Access is the route's rule.
	Access Access
}

// Routes lists the registered routes in registration order, so that tests
// can check every route's rule against the contract.
func (rt *Router) Routes() []RouteInfo {
	out := make([]RouteInfo, 0, len(rt.routes))
	for _, r := range rt.routes {
		out = append(out, RouteInfo{Method: r.method, Pattern: r.pattern, Access: r.access})
	}
	return out
}

// HandlerFunc answers one request. Returning an *Error (or an error wrapping
// one) renders it; any other error becomes a 500 whose detail is only
// logged.
type HandlerFunc func(r *Request) (Response, error)

// Options configures a Router.
type Options struct {
	// Verifier checks bearer tokens. Required as soon as one route is not
	// Public.
	Verifier *Verifier
	// Logger receives the access log and the details of 500s. Default
	// slog.Default().
	Logger *slog.Logger
	// MaxBody is the largest request body in bytes. Default MaxBodyDefault.
	MaxBody int64
	// Limiter, when set, admits each request of a user token by its
	// owner's rate (docs/limits.md); admin and service tokens pass.
	Limiter Limiter
}

// Limiter admits a caller's request by the caller's rate
// (ratelimit.Limiter): nil, or an error of class *fault.Throttled (429).
// It decides what a failure of its own store means (it serves).
type Limiter interface {
	Admit(ctx context.Context, owner, plan string) error
}

// Router dispatches API Gateway events to routes. Register every route with
// Handle before the first Serve; Serve is then safe for concurrent use.
type Router struct {
	opts   Options
	routes []*route
}

type route struct {
	method  string
	pattern string
	segs    []segment
	access  Access
	h       HandlerFunc
}

// segment is a literal path segment, or a parameter when param is set.
type segment struct {
	lit   string
	param string
	// rest: the last segment, {name...}, matches the rest of the path
	// (zero or more segments, joined by "/").
	rest bool
}

// NewRouter returns a Router with no routes.
func NewRouter(opts Options) *Router {
	if opts.MaxBody <= 0 {
		opts.MaxBody = MaxBodyDefault
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Router{opts: opts}
}

// Handle routes method and pattern to h under access. A pattern is a path
// whose segments in braces are parameters: "/v1/jobs/{id}/cancel". When
// several patterns match a path, the one with a literal where the others
// have a parameter, earliest in the path, wins ("/v1/uploads/sign" over
// "/v1/uploads/{id}"). Handle panics on a malformed pattern, a nil handler,
// an invalid Access, a route registered twice, a protected route on a
// Router without a Verifier, or a method that writes under AnyUser or
// ReadOnly (service tokens may only read): wiring mistakes that must fail at
// start-up.
func (rt *Router) Handle(method, pattern string, access Access, h HandlerFunc) {
	fail := func(format string, args ...any) {
		panic(fmt.Sprintf("httpapi: Handle(%q, %q): %s", method, pattern, fmt.Sprintf(format, args...)))
	}
	switch {
	case method == "" || strings.ToUpper(method) != method || strings.ContainsAny(method, " /"):
		fail("method must be an upper-case token")
	case h == nil:
		fail("nil handler")
	case access < Public || access > Writer:
		fail("invalid access %v", access)
	case (access == AnyUser || access == ReadOnly) && !safeMethod(method):
		fail("a %s route writes: use Writer or AdminOnly", method)
	case access != Public && rt.opts.Verifier == nil:
		fail("a %v route needs Options.Verifier", access)
	case !strings.HasPrefix(pattern, "/"):
		fail("the pattern must start with /")
	}
	var segs []segment
	seen := map[string]bool{}
	parts := splitPath(pattern)
	for i, s := range parts {
		if strings.HasPrefix(s, "{") && strings.HasSuffix(s, "...}") && i == len(parts)-1 {
			name := s[1 : len(s)-4]
			if name == "" || strings.ContainsAny(name, "{}.") || seen[name] {
				fail("bad or repeated parameter %q", s)
			}
			segs = append(segs, segment{param: name, rest: true})
			continue
		}
		if strings.HasPrefix(s, "{") && strings.HasSuffix(s, "}") {
			name := s[1 : len(s)-1]
			if name == "" || strings.ContainsAny(name, "{}") || seen[name] {
				fail("bad or repeated parameter %q", s)
			}
			seen[name] = true
			segs = append(segs, segment{param: name})
			continue
		}
		if s == "" || strings.ContainsAny(s, "{}") {
			fail("bad segment %q", s)
		}
		segs = append(segs, segment{lit: s})
	}
	for _, r := range rt.routes {
		if r.method == method && sameShape(r.segs, segs) {
			fail("conflicts with %q", r.pattern)
		}
	}
	rt.routes = append(rt.routes, &route{method: method, pattern: pattern, segs: segs, access: access, h: h})
}

func splitPath(p string) []string {
	p = strings.Trim(p, "/")
	if p == "" {
		return nil
	}
	return strings.Split(p, "/")
}

func sameShape(a, b []segment) bool {
	return slices.EqualFunc(a, b, func(x, y segment) bool {
		return (x.param != "") == (y.param != "") && x.lit == y.lit && x.rest == y.rest
	})
}

// moreSpecific reports whether a beats b for a path both match: a literal
// beats a parameter, a parameter beats a rest.
func moreSpecific(a, b []segment) bool {
	for i := range min(len(a), len(b)) {
		if a[i].rest != b[i].rest {
			return b[i].rest
		}
		if (a[i].param == "") != (b[i].param == "") {
			return a[i].param == ""
		}
	}
	return len(a) > len(b)
}

// match returns the parameters when segs matches the unescaped path segments.
func match(segs []segment, path []string) (map[string]string, bool) {
	var params map[string]string
	if n := len(segs); n > 0 && segs[n-1].rest {
		if len(path) < n-1 {
			return nil, false
		}
		params = map[string]string{segs[n-1].param: strings.Join(path[n-1:], "/")}
		segs, path = segs[:n-1], path[:n-1]
	}
	if len(segs) != len(path) {
		return nil, false
	}
	for i, s := range segs {
		if s.param == "" {
			if s.lit != path[i] {
				return nil, false
			}
			continue
		}
		if path[i] == "" {
			return nil, false
		}
		if params == nil {
			params = map[string]string{}
		}
		params[s.param] = path[i]
	}
	return params, true
}

// Serve is the Lambda handler of the API function. It always answers with
// the contract's response and a nil error, so that API Gateway never turns
// a failure into its own 500: unknown path → 404, known path with another
// method → 405 with Allow, token problems → 401, role → 403, body over the
// limit → 413, a handler's *Error as it is, and any other error or panic →
// 500 with the detail only in the log. Every response carries
// X-Request-Id and a Content-Type (application/json unless the handler set
// another). HEAD is answered wherever GET is, by the GET route (RFC 9110,
// 9.3.2): the same status and headers, with the Content-Length of the body
// GET would send, and no body.
func (rt *Router) Serve(ctx context.Context, ev events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	start := time.Now()
	reqID := ev.RequestContext.RequestID
	if reqID == "" {
		reqID = ids.New("req")
	}
	method := strings.ToUpper(ev.RequestContext.HTTP.Method)
	// A server span under the caller's traceparent (or a new trace): the
	// job a request submits carries it (docs/operations.md#tracing).
	ctx, span := telemetry.Start(telemetry.Extract(ctx, func(name string) string { return header(ev.Headers, name) }),
		method, trace.SpanKindServer, attribute.String("http.request.method", method), telemetry.AttrRequestID.String(reqID))
	req := &Request{Ctx: ctx, Raw: ev, RequestID: reqID, maxBody: rt.opts.MaxBody}
	pattern, resp := rt.dispatch(req, method)
	finish(&resp, reqID)
	endServerSpan(span, method, pattern, resp.StatusCode)
	if method == http.MethodHead {
		headless(&resp)
	}

	level := slog.LevelInfo
	if resp.StatusCode >= http.StatusInternalServerError {
		level = slog.LevelError
	}
	rt.opts.Logger.LogAttrs(ctx, level, "request",
		slog.String("request_id", reqID),
		slog.String("method", method),
		slog.String("route", pattern),
		slog.Int("status", resp.StatusCode),
		slog.Int64("duration_ms", time.Since(start).Milliseconds()),
		slog.String("user", req.Claims.Subject),
	)
	return resp, nil
}

// endServerSpan names a request's span by its route and ends it, failed
// for a 5xx answer.
func endServerSpan(span trace.Span, method, pattern string, status int) {
	if pattern != "" {
		span.SetName(method + " " + pattern)
		span.SetAttributes(attribute.String("http.route", pattern))
	}
	span.SetAttributes(attribute.Int("http.response.status_code", status))
	if status >= http.StatusInternalServerError {
		span.SetStatus(codes.Error, http.StatusText(status))
	}
	span.End()
}

// dispatch finds the route and runs it; it returns the matched pattern ("" if
// none) and the response, recovering from a panic anywhere below.
func (rt *Router) dispatch(req *Request, method string) (pattern string, resp Response) {
	defer func() {
		if p := recover(); p != nil {
			rt.opts.Logger.ErrorContext(req.Ctx, "handler panicked",
				"request_id", req.RequestID, "route", pattern, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			resp = render(internalError(req.RequestID))
		}
	}()

	path, ok := requestPath(req.Raw)
	if !ok {
		return "", render(NotFound())
	}
	best, params, allowed := rt.resolve(path, method)
	if best == nil && len(allowed) == 0 {
		return "", render(NotFound())
	}
	if best == nil {
		resp := render(Errorf(http.StatusMethodNotAllowed, CodeMethodNotAllowed, "this path accepts %s", strings.Join(allowed, ", ")))
		resp.Headers["Allow"] = strings.Join(allowed, ", ")
		return "", resp
	}
	req.Params, pattern = params, best.pattern

	if e := rt.admit(req, best.access, best.method); e != nil {
		resp := render(e)
		if e.Status == http.StatusUnauthorized {
			resp.Headers["WWW-Authenticate"] = `Bearer realm="conveyor"`
		}
		return pattern, resp
	}
	if e := rt.limit(req); e != nil {
		return pattern, render(e)
	}
	if e := rt.checkSize(req.Raw); e != nil {
		return pattern, render(e)
	}
	return pattern, rt.call(req, best)
}

// resolve finds the route of path and method (the GET route for HEAD,
// unless a HEAD route is registered). The path is resolved first,
// then the method (as OpenAPI matches paths: a literal segment beats a
// parameter). Only the routes of the most specific pattern that matches the
// path answer it, so a 405 lists exactly that path's methods: GET
// /v1/uploads/sign is 405 (POST), not GET /v1/uploads/{id} with the id
// "sign". best is nil when no route answers: allowed are then the path's
// methods (sorted, none when no pattern matches the path).
func (rt *Router) resolve(path []string, method string) (best *route, params map[string]string, allowed []string) {
	var shape []segment
	type candidate struct {
		r      *route
		params map[string]string
	}
	var found []candidate
	for _, r := range rt.routes {
		params, ok := match(r.segs, path)
		if !ok {
			continue
		}
		found = append(found, candidate{r, params})
		if len(found) == 1 || moreSpecific(r.segs, shape) {
			shape = r.segs
		}
	}
	var get *candidate
	for _, c := range found {
		if !sameShape(c.r.segs, shape) {
			continue
		}
		if c.r.method == method {
			return c.r, c.params, nil
		}
		if c.r.method == http.MethodGet {
			get = &c
			allowed = append(allowed, http.MethodHead)
		}
		allowed = append(allowed, c.r.method)
	}
	if method == http.MethodHead && get != nil {
		return get.r, get.params, nil
	}
	slices.Sort(allowed)
	return nil, nil, slices.Compact(allowed)
}

// call runs the route's handler: an *Error it returns is rendered, any
// other error or an answer without a valid status is logged and answered
// 500 (with the request id, never the error's text).
func (rt *Router) call(req *Request, r *route) Response {
	out, err := r.h(req)
	if err != nil {
		var e *Error
		if errors.As(err, &e) && e != nil {
			return render(e)
		}
		rt.opts.Logger.ErrorContext(req.Ctx, "request failed",
			"request_id", req.RequestID, "route", r.pattern, "error", err.Error())
		return render(internalError(req.RequestID))
	}
	if out.StatusCode < 100 || out.StatusCode > 599 {
		rt.opts.Logger.ErrorContext(req.Ctx, "handler returned no valid status",
			"request_id", req.RequestID, "route", r.pattern, "status", out.StatusCode)
		return render(internalError(req.RequestID))
	}
	return out
}

// requestPath returns the unescaped segments of the request path; ok is
// false for a path that cannot be unescaped. The raw path is preferred so
// that an escaped slash stays inside its segment.
func requestPath(ev events.APIGatewayV2HTTPRequest) (segs []string, ok bool) {
	p := ev.RawPath
	if p == "" {
		p = ev.RequestContext.HTTP.Path
	}
	segs = splitPath(p)
	for i, s := range segs {
		u, err := url.PathUnescape(s)
		if err != nil {
			return nil, false
		}
		segs[i] = u
	}
	return segs, true
}

// admit applies the route's access rule and records the caller's claims.
func (rt *Router) admit(r *Request, a Access, method string) *Error {
	if a == Public {
		return nil
	}
	c, err := rt.opts.Verifier.VerifyContext(r.Ctx, r.Header("Authorization"))
	if err != nil {
		if errors.Is(err, ErrKeyUnavailable) {
			// Not the caller's fault: the key (read in the background since
			// cold start) could not be had; a later request reads it again.
			rt.opts.Logger.ErrorContext(r.Ctx, "token key unavailable", "error", err.Error(), "request_id", r.RequestID)
			return KeyUnavailable()
		}
		var ae *TokenError
		if errors.As(err, &ae) {
			return Unauthorized(ae.Reason)
		}
		return Unauthorized("invalid token")
	}
	r.Claims = c
	if !a.allows(c.Role, method) {
		return Forbidden()
	}
	return nil
}

// limit applies the caller's rate to a request of a user token: a 429
// with Retry-After over it. Public routes, admin and service tokens pass
// (docs/limits.md says why).
func (rt *Router) limit(r *Request) *Error {
	if rt.opts.Limiter == nil || r.Claims.Role != RoleUser {
		return nil
	}
	err := rt.opts.Limiter.Admit(r.Ctx, r.Claims.Subject, r.Claims.Plan)
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(clientError(err), &e) {
		return e
	}
	rt.opts.Logger.ErrorContext(r.Ctx, "rate check failed; serving the request", "request_id", r.RequestID, "error", err.Error())
	return nil
}

// checkSize refuses a body over the limit, by its declared and its actual
// length.
func (rt *Router) checkSize(ev events.APIGatewayV2HTTPRequest) *Error {
	if cl := header(ev.Headers, "Content-Length"); cl != "" {
		if n, err := strconv.ParseInt(strings.TrimSpace(cl), 10, 64); err == nil && n > rt.opts.MaxBody {
			return tooLarge(rt.opts.MaxBody)
		}
	}
	if bodySize(ev) > rt.opts.MaxBody {
		return tooLarge(rt.opts.MaxBody)
	}
	return nil
}

// finish adds the headers every response carries, to a copy of the
// handler's header map (which may be shared).
func finish(resp *Response, reqID string) {
	h := make(map[string]string, len(resp.Headers)+2)
	maps.Copy(h, resp.Headers)
	resp.Headers = h
	resp.Headers["X-Request-Id"] = reqID
	if header(resp.Headers, "Content-Type") == "" && len(resp.MultiValueHeaders["Content-Type"]) == 0 {
		resp.Headers["Content-Type"] = ContentTypeJSON
	}
}

// headless turns the answer to a GET into the answer to a HEAD: the same
// status and headers, the body's length in Content-Length, and no body.
func headless(resp *Response) {
	n := len(resp.Body)
	if resp.IsBase64Encoded {
		if b, err := base64.StdEncoding.DecodeString(resp.Body); err == nil {
			n = len(b)
		}
	}
	if header(resp.Headers, "Content-Length") == "" {
		resp.Headers["Content-Length"] = strconv.Itoa(n)
	}
	resp.Body, resp.IsBase64Encoded = "", false
}
