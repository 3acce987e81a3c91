package httpapi_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"gopkg.in/yaml.v3"

	"github.com/conveyor/conveyor/internal/handler"
	"github.com/conveyor/conveyor/internal/httpapi"
	"github.com/conveyor/conveyor/internal/stream"
)

// specPath is the project's OpenAPI file.
var specPath = filepath.Join("..", "..", "openapi.yaml")

// Markers the spec puts on operations.
const (
	// statusPlanned: in the contract, not served by this version.
	statusPlanned = "planned"
	// functionStream: served by the stream function, not the api router.
	functionStream = "stream"
)

// specOp is one operation of the spec, as far as the route test cares.
type specOp struct {
	method, path string
	status       string // x-conveyor-status
	function     string // x-conveyor-function
	public       bool   // security: []
	hasBody      bool
	responses    []string
	pathParams   []string
	queryParams  []string
	operationID  string
	// errorSchemas maps each documented 4xx/5xx status to the schema its
	// JSON body is documented with ("Error", or "" when it is another).
	errorSchemas map[string]string
}

func (o specOp) key() string { return o.method + " " + o.path }

func (o specOp) documents(code string) bool { return slices.Contains(o.responses, code) }

var httpMethods = []string{"get", "put", "post", "delete", "patch", "head", "options", "trace"}

// loadSpec reads the operations of openapi.yaml. A key whose value is null
// is refused: that is how an unquoted comma in a flow mapping turns text
// into a key, which validators accept where extensions are allowed.
func loadSpec(t *testing.T) []specOp {
	t.Helper()
	raw, err := os.ReadFile(specPath)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("%s: %v", specPath, err)
	}
	var walk func(n any, at string)
	walk = func(n any, at string) {
		switch v := n.(type) {
		case map[string]any:
			for k, c := range v {
				if c == nil {
					t.Errorf("%s: %s/%s is null (an unquoted comma or colon in a flow mapping?)", specPath, at, k)
				}
				walk(c, at+"/"+k)
			}
		case []any:
			for _, c := range v {
				walk(c, at+"[]")
			}
		}
	}
	walk(doc, "")

	params := doc["components"].(map[string]any)["parameters"].(map[string]any)
	resolve := func(p any) map[string]any {
		m := p.(map[string]any)
		if ref, ok := m["$ref"].(string); ok {
			return params[strings.TrimPrefix(ref, "#/components/parameters/")].(map[string]any)
		}
		return m
	}
	paramsIn := func(list any, in string) []string {
		var out []string
		l, _ := list.([]any)
		for _, p := range l {
			if m := resolve(p); m["in"] == in {
				out = append(out, m["name"].(string))
			}
		}
		return out
	}
	pathParams := func(list any) []string { return paramsIn(list, "path") }
	responses := doc["components"].(map[string]any)["responses"].(map[string]any)
	// errorSchema names the schema of a response's JSON body: "Error" when
	// it is the error contract (alone, or with API Gateway's throttling
	// body for a 429).
	errorSchema := func(resp any) string {
		m := resp.(map[string]any)
		if ref, ok := m["$ref"].(string); ok {
			m = responses[strings.TrimPrefix(ref, "#/components/responses/")].(map[string]any)
		}
		content, _ := m["content"].(map[string]any)
		media, _ := content["application/json"].(map[string]any)
		schema, _ := media["schema"].(map[string]any)
		if schema["$ref"] == "#/components/schemas/Error" {
			return "Error"
		}
		if alts, ok := schema["oneOf"].([]any); ok {
			for _, a := range alts {
				if a.(map[string]any)["$ref"] == "#/components/schemas/Error" {
					return "Error"
				}
			}
		}
		return ""
	}
	var ops []specOp
	for path, item := range doc["paths"].(map[string]any) {
		pi := item.(map[string]any)
		common := pathParams(pi["parameters"])
		for _, m := range httpMethods {
			raw, ok := pi[m]
			if !ok {
				continue
			}
			op := raw.(map[string]any)
			o := specOp{method: strings.ToUpper(m), path: path, pathParams: append(slices.Clone(common), pathParams(op["parameters"])...)}
			o.status, _ = op["x-conveyor-status"].(string)
			o.function, _ = op["x-conveyor-function"].(string)
			if sec, ok := op["security"].([]any); ok && len(sec) == 0 {
				o.public = true
			}
			_, o.hasBody = op["requestBody"]
			o.operationID, _ = op["operationId"].(string)
			o.queryParams = append(paramsIn(pi["parameters"], "query"), paramsIn(op["parameters"], "query")...)
			o.errorSchemas = map[string]string{}
			for code, resp := range op["responses"].(map[string]any) {
				o.responses = append(o.responses, code)
				if code >= "400" {
					o.errorSchemas[code] = errorSchema(resp)
				}
			}
			slices.Sort(o.responses)
			slices.Sort(o.pathParams)
			ops = append(ops, o)
		}
	}
	slices.SortFunc(ops, func(a, b specOp) int { return strings.Compare(a.key(), b.key()) })
	return ops
}

// newRouter is a router as the HTTP functions make theirs, with a test key.
func newRouter() *httpapi.Router {
	return httpapi.NewRouter(httpapi.Options{
		Verifier: httpapi.NewVerifier([]byte("route-test-secret-route-test-secret"), time.Now),
		Logger:   slog.New(slog.DiscardHandler),
	})
}

// registerAll registers every route group of the HTTP API on rt, as one
// function served them all before resources.HTTPRoutes split them.
func registerAll(rt *httpapi.Router) {
	httpapi.RegisterUsers(rt, httpapi.UserServices{})
	httpapi.RegisterAdmin(rt, nil)
	httpapi.RegisterUploads(rt, nil)
	httpapi.RegisterSchedules(rt, nil, httpapi.Idempotency{})
}

// servedRoutes registers the HTTP API functions' routes on a router, as
// the api, admin, uploads and schedules functions do, and lists them.
func servedRoutes() []httpapi.RouteInfo {
	rt := newRouter()
	registerAll(rt)
	return rt.Routes()
}

var braces = regexp.MustCompile(`\{([^}]+)\}`)

// TestOpenAPIMatchesTheRouter: every route the api function serves is in
// openapi.yaml with the status codes its access rule and body imply, and
// every operation of the spec is served — by the router, or by the stream
// function for the two event streams — except those marked
// x-conveyor-status: planned, which are skipped by name (and must not be
// served: a served route drops the marker).
func TestOpenAPIMatchesTheRouter(t *testing.T) {
	t.Parallel()
	ops := loadSpec(t)
	inSpec := map[string]specOp{}
	for _, o := range ops {
		inSpec[o.key()] = o
	}
	routes := servedRoutes()
	routed := map[string]httpapi.RouteInfo{}
	for _, r := range routes {
		key := r.Method + " " + r.Pattern
		routed[key] = r
		if _, ok := inSpec[key]; !ok {
			t.Errorf("%s is routed but not in openapi.yaml", key)
		}
	}
	stream := handler.StreamHandler(openFake, func(context.Context, string) (httpapi.Claims, error) {
		return httpapi.Claims{Subject: "u1", Role: httpapi.RoleAdmin}, nil
	}, slog.New(slog.DiscardHandler))

	var planned []string
	for _, o := range ops {
		t.Run(strings.ReplaceAll(o.key(), "/", "_"), func(t *testing.T) {
			t.Parallel()
			r, isRouted := routed[o.key()]
			switch {
			case o.status == statusPlanned:
				if isRouted {
					t.Fatalf("%s is served: drop its x-conveyor-status: planned", o.key())
				}
				t.Skipf("x-conveyor-status: planned — %s is in the contract, not served yet", o.key())
			case o.status != "":
				t.Fatalf("unknown x-conveyor-status %q", o.status)
			case o.function == functionStream:
				if isRouted {
					t.Fatalf("%s is on the api router, yet marked x-conveyor-function: stream", o.key())
				}
				checkStreamServes(t, stream, o)
			case o.function != "":
				t.Fatalf("unknown x-conveyor-function %q", o.function)
			case !isRouted:
				t.Fatalf("%s is in openapi.yaml but no route serves it (mark it x-conveyor-status: planned if it is not built yet)", o.key())
			default:
				checkDocumented(t, o, r)
			}
		})
		if o.status == statusPlanned {
			planned = append(planned, o.key())
		}
	}
	t.Logf("skipped, x-conveyor-status: planned (%d):\n  %s", len(planned), strings.Join(planned, "\n  "))
	if len(routes) == 0 {
		t.Fatal("no routes registered")
	}
}

// serviceStatuses are the statuses an operation's services answer beyond
// what its route implies (the router's 401/403/404/413/415/429/500 and the
// body's and query's 400): clientError's mapping of the domain's errors,
// and the successes other than the first documented one. Keep it in step
// with the handlers: the test fails on a status documented but not listed
// here, and on one listed here but not documented.
var serviceStatuses = map[string][]string{
	"healthz":           {"503"},               // a dependency does not answer
	"getConnection":     {"404"},               // no connected account
	"listJobs":          {"422"},               // invalid_cursor (another query's)
	"adminSearchJobs":   {"422"},               // invalid_cursor (another search's), empty_window
	"confirmUpload":     {"422"},               // upload_missing
	"submitJob":         {"200", "409", "422"}, // the same active job; idempotency_key_in_flight; upload or account unusable, idempotency_key_reused
	"cancelJob":         {"409"},               // invalid_transition
	"retryJob":          {"409"},               // invalid_transition
	"createSchedule":    {"409", "422", "503"}, // idempotency_key_in_flight; schedule_limit, idempotency_key_reused; scheduler_unavailable
	"adminRestartItem":  {"409"},               // item_published, invalid_transition
	"createWebhook":     {"409", "422"},        // idempotency_key_in_flight; webhook_limit, idempotency_key_reused
	"redeliverWebhook":  {"422"},               // endpoint_disabled, delivery_retrying, invalid_cursor
	"adminResetBreaker": {"400", "404"},        // a key over MaxBreakerKey; a key no breaker has
}

// checkDocumented holds a routed operation's documentation against what the
// router itself answers for it.
func checkDocumented(t *testing.T, o specOp, r httpapi.RouteInfo) {
	t.Helper()
	var want []string
	if o.public != (r.Access == httpapi.Public) {
		t.Errorf("security: [] in the spec is %t, the route's access is %v", o.public, r.Access)
	}
	if r.Access != httpapi.Public {
		want = append(want, "401", "429") // any token problem; throttling in AWS
	}
	writes := o.method != http.MethodGet
	if r.Access == httpapi.ReadOnly || r.Access == httpapi.AdminOnly || r.Access == httpapi.Writer || (r.Access == httpapi.AnyUser && writes) {
		want = append(want, "403") // a user on admin routes; a service token on writes
	}
	if writes && r.Access != httpapi.Public {
		want = append(want, "413") // the router checks every body's size
	}
	if o.hasBody {
		want = append(want, "400", "415")
	}
	if len(o.pathParams) > 0 && !slices.Contains(o.pathParams, "key") {
		want = append(want, "404") // an unknown id or tier
	}
	if len(o.queryParams) > 0 {
		want = append(want, "400") // a query parameter given empty or malformed
	}
	if r.Access != httpapi.Public {
		want = append(want, "500") // a dependency failed (the detail only in the log)
	}
	want = append(want, serviceStatuses[o.operationID]...)
	for _, code := range want {
		if !o.documents(code) {
			t.Errorf("%s can answer %s, which openapi.yaml does not document (documents %v)", o.key(), code, o.responses)
		}
	}
	// And back: every error status documented is one the route can answer.
	for _, code := range o.responses {
		if code >= "400" && !slices.Contains(want, code) {
			t.Errorf("%s documents %s, which neither the router nor serviceStatuses says it answers", o.key(), code)
		}
		if code >= "400" && o.errorSchemas[code] != "Error" && !(o.public && code == "503") {
			t.Errorf("%s: the %s answer is not documented with the Error schema", o.key(), code)
		}
	}
	var params []string
	for _, m := range braces.FindAllStringSubmatch(o.path, -1) {
		params = append(params, m[1])
	}
	slices.Sort(params)
	if !slices.Equal(params, o.pathParams) {
		t.Errorf("path parameters: the path has %v, the operation declares %v", params, o.pathParams)
	}
	has2xx := false
	for _, code := range o.responses {
		has2xx = has2xx || strings.HasPrefix(code, "2")
	}
	if !has2xx {
		t.Errorf("no success response documented")
	}
}

// checkStreamServes asks the stream function's handler for the operation's
// path and expects the stream (200), not a 404.
func checkStreamServes(t *testing.T, stream func(context.Context, events.LambdaFunctionURLRequest) (*events.LambdaFunctionURLStreamingResponse, error), o specOp) {
	t.Helper()
	path := braces.ReplaceAllString(o.path, "job_aaaaaaaaaaaaaaaaaaaaaaaaaa")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	resp, err := stream(ctx, events.LambdaFunctionURLRequest{RawPath: path, Headers: map[string]string{"authorization": "Bearer x"},
		RequestContext: events.LambdaFunctionURLRequestContext{HTTP: events.LambdaFunctionURLRequestContextHTTPDescription{Method: o.method, Path: path}}})
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the stream function answers %s with %d", path, resp.StatusCode)
	}
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		t.Fatal(err)
	}
	codes := []string{"200", "401", "429"} // 429: beyond the caller's open streams
	if strings.HasPrefix(o.path, "/v1/admin/") {
		codes = append(codes, "403")
	}
	if strings.Contains(o.path, "{id}") {
		codes = append(codes, "404")
	}
	for _, code := range codes {
		if !o.documents(code) {
			t.Errorf("%s can answer %s, which openapi.yaml does not document", o.key(), code)
		}
	}
}

// fakeSession knows every job and has nothing to stream.
type fakeSession struct{}

func openFake(context.Context, stream.Request) (handler.StreamSession, error) {
	return fakeSession{}, nil
}

func (fakeSession) Run(context.Context, io.Writer, func()) error { return nil }
func (fakeSession) Close()                                       {}

// TestAllowMatchesTheSpec: for every path the api function serves, a method
// the spec does not have is 405 with Allow listing exactly the spec's
// methods for that path, and HEAD wherever GET is (a literal path such as
// /v1/uploads/sign is not answered by the methods of /v1/uploads/{id}); a
// HEAD where GET is is answered as GET is (here 401, without a token, or
// 200 for /healthz), never 405.
func TestAllowMatchesTheSpec(t *testing.T) {
	t.Parallel()
	methods := map[string][]string{}
	for _, o := range loadSpec(t) {
		if o.function == functionStream || o.status == statusPlanned {
			continue
		}
		methods[o.path] = append(methods[o.path], o.method)
	}
	rt := newRouter()
	registerAll(rt)
	for path, want := range methods {
		hasGet := slices.Contains(want, http.MethodGet)
		if hasGet && !slices.Contains(want, http.MethodHead) {
			want = append(want, http.MethodHead)
		}
		slices.Sort(want)
		concrete := braces.ReplaceAllStringFunc(path, func(p string) string {
			switch p {
			case "{tier}":
				return "low"
			case "{itemId}":
				return "itm_aaaaaaaaaaaaaaaaaaaaaaaaaa"
			}
			return "job_aaaaaaaaaaaaaaaaaaaaaaaaaa"
		})
		for _, m := range []string{http.MethodOptions, http.MethodPatch, http.MethodTrace} {
			if slices.Contains(want, m) { // a method of the path (PATCH /v1/webhooks/{id})
				continue
			}
			resp, err := rt.Serve(context.Background(), events.APIGatewayV2HTTPRequest{RawPath: concrete,
				RequestContext: events.APIGatewayV2HTTPRequestContext{HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: m, Path: concrete}}})
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != http.StatusMethodNotAllowed || resp.Headers["Allow"] != strings.Join(want, ", ") {
				t.Errorf("%s %s: %d Allow %q, want 405 Allow %q", m, concrete, resp.StatusCode, resp.Headers["Allow"], strings.Join(want, ", "))
			}
		}
		if hasGet {
			resp, err := rt.Serve(context.Background(), events.APIGatewayV2HTTPRequest{RawPath: concrete,
				RequestContext: events.APIGatewayV2HTTPRequestContext{HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: http.MethodHead, Path: concrete}}})
			if err != nil {
				t.Fatal(err)
			}
			want := http.StatusUnauthorized
			if path == "/healthz" {
				want = http.StatusOK
			}
			if resp.StatusCode != want || resp.Body != "" {
				t.Errorf("HEAD %s: %d %q, want %d and no body", concrete, resp.StatusCode, resp.Body, want)
			}
		}
	}
}

// TestTimeZonesLoad: every name of the spec's TimeZone enum is one a
// schedule accepts (time.LoadLocation, with the tz database the schedules
// function embeds), so a schema-valid timezone is never refused.
func TestTimeZonesLoad(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile(specPath)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Components struct {
			Schemas struct {
				TimeZone struct {
					Enum []string `yaml:"enum"`
				} `yaml:"TimeZone"`
			} `yaml:"schemas"`
		} `yaml:"components"`
	}
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	zones := doc.Components.Schemas.TimeZone.Enum
	if len(zones) < 400 {
		t.Fatalf("the TimeZone enum has %d names; want the tz database's", len(zones))
	}
	for _, z := range zones {
		if _, err := time.LoadLocation(z); err != nil || strings.EqualFold(z, "local") {
			t.Errorf("%s: %v", z, err)
		}
	}
}
