package httpapi_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/google/go-cmp/cmp"

	"github.com/conveyor/conveyor/internal/httpapi"
	"github.com/conveyor/conveyor/internal/resources"
	"github.com/conveyor/conveyor/web"
)

// splitRouters are the HTTP API's functions' routers, each with its group
// only, as the functions register them.
func splitRouters() map[string]*httpapi.Router {
	rts := map[string]*httpapi.Router{}
	for _, fn := range []string{resources.FuncAPI, resources.FuncAdmin, resources.FuncUploads, resources.FuncSchedules} {
		rts[fn] = newRouter()
	}
	httpapi.RegisterUsers(rts[resources.FuncAPI], httpapi.UserServices{})
	httpapi.RegisterDashboard(rts[resources.FuncAPI], web.Files(), httpapi.DashboardOptions{})
	httpapi.RegisterAdmin(rts[resources.FuncAdmin], nil)
	httpapi.RegisterUploads(rts[resources.FuncUploads], nil)
	httpapi.RegisterSchedules(rts[resources.FuncSchedules], nil, httpapi.Idempotency{})
	return rts
}

// TestEachFunctionHoldsItsRouteGroup: every route is registered by the
// function the route table sends its path to, and by no other, so no
// route of the contract is unreachable behind API Gateway.
func TestEachFunctionHoldsItsRouteGroup(t *testing.T) {
	t.Parallel()
	for fn, rt := range splitRouters() {
		for _, r := range rt.Routes() {
			path := braces.ReplaceAllString(r.Pattern, "x_1")
			if got := resources.FunctionForPath(path); got != fn {
				t.Errorf("%s %s is registered by %s, but the route table sends %s to %s", r.Method, r.Pattern, fn, path, got)
			}
		}
	}
}

// TestSplitRoutersAnswerAsOne: a request the gateway routes by the table
// gets exactly the answer (status, headers, body) the single router of
// every route gave before the groups were split — the unknown paths and
// methods under each group's prefix (404, 405 with Allow), a missing token
// (401) and a service token on a write (403) included.
func TestSplitRoutersAnswerAsOne(t *testing.T) {
	t.Parallel()
	one := newRouter()
	registerAll(one)
	httpapi.RegisterDashboard(one, web.Files(), httpapi.DashboardOptions{})
	split := splitRouters()
	service, err := httpapi.Mint([]byte("route-test-secret-route-test-secret"), httpapi.Claims{Subject: "mon", Role: httpapi.RoleService, ExpiresAt: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	paths := []string{
		"/v1/uploads", "/v1/uploads/", "/v1/uploads/sign", "/v1/uploads/sign/x", "/v1/uploads/upl_1",
		"/v1/uploads/upl_1/confirm", "/v1/uploads/upl_1/confirm/x", "/v1/uploads/upl_1/nope", "/v1/uploads/%zz",
		"/v1/uploadsx", "/v1/schedules", "/v1/schedules/", "/v1/schedules/sch_1", "/v1/schedules/sch_1/pause",
		"/v1/schedules/sch_1/resume", "/v1/schedules/sch_1/nope", "/v1/schedules/sch_1/pause/x", "/v1/schedulesx",
		"/v1/admin", "/v1/admin/", "/v1/admin/nope", "/v1", "/v1/nope", "/v1/jobs/job_1/nope",
	}
	methods := []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodOptions}
	for _, path := range paths {
		for _, method := range methods {
			for _, tok := range []string{"", service} {
				ev := events.APIGatewayV2HTTPRequest{RawPath: path, Headers: map[string]string{},
					RequestContext: events.APIGatewayV2HTTPRequestContext{RequestID: "req-split",
						HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: method, Path: path}}}
				if tok != "" {
					ev.Headers["authorization"] = "Bearer " + tok
				}
				want, err := one.Serve(context.Background(), ev)
				if err != nil {
					t.Fatal(err)
				}
				if tok != "" && want.StatusCode != http.StatusNotFound && want.StatusCode != http.StatusMethodNotAllowed && want.StatusCode != http.StatusForbidden {
					continue // a read that passes: the routes' own tests (the stack's) answer it
				}
				got, err := split[resources.FunctionForPath(path)].Serve(context.Background(), ev)
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("%s %s (token %v): (-one router +split):\n%s", method, path, tok != "", diff)
				}
				if method == http.MethodHead {
					// HEAD is GET without the body.
					if want.StatusCode >= 500 || want.Body != "" {
						t.Errorf("%s %s: %d %q, want a 4xx without a body", method, path, want.StatusCode, want.Body)
					}
					continue
				}
				if want.StatusCode >= 500 || !strings.Contains(want.Body, `"error"`) && want.StatusCode >= 400 {
					t.Errorf("%s %s: %d %s, want a 4xx JSON error", method, path, want.StatusCode, want.Body)
				}
			}
		}
	}
}
