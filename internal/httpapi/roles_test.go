package httpapi_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/conveyor/conveyor/internal/httpapi"
	"github.com/conveyor/conveyor/internal/resources"
	"github.com/conveyor/conveyor/localstack/awstest"
	"github.com/conveyor/conveyor/localstack/stack"
)

// who may call a route, per the contract (API.md): "user" and "admin" and
// "service" each either pass the role check or get 403.
type who struct{ user, admin, service bool }

var (
	everyone  = who{user: true, admin: true, service: true}
	writers   = who{user: true, admin: true}
	operators = who{admin: true, service: true}
	admins    = who{admin: true}
)

// contractRoutes is every authenticated route of the API function and who
// may call it: service tokens read everywhere and write nowhere; user
// tokens never reach an admin route.
var contractRoutes = map[string]who{
	"POST /v1/uploads/sign":                           writers,
	"POST /v1/uploads/{id}/confirm":                   writers,
	"GET /v1/uploads/{id}":                            everyone,
	"PUT /v1/account/connection":                      writers,
	"GET /v1/account/connection":                      everyone,
	"POST /v1/jobs":                                   writers,
	"GET /v1/jobs":                                    everyone,
	"GET /v1/jobs/{id}":                               everyone,
	"GET /v1/jobs/{id}/attempts":                      everyone,
	"POST /v1/jobs/{id}/cancel":                       writers,
	"POST /v1/jobs/{id}/retry":                        writers,
	"POST /v1/schedules":                              writers,
	"GET /v1/schedules":                               everyone,
	"GET /v1/schedules/{id}":                          everyone,
	"POST /v1/schedules/{id}/pause":                   writers,
	"POST /v1/schedules/{id}/resume":                  writers,
	"DELETE /v1/schedules/{id}":                       writers,
	"GET /v1/admin/overview":                          operators,
	"POST /v1/admin/jobs/restart":                     admins,
	"POST /v1/admin/jobs/stop":                        admins,
	"POST /v1/admin/jobs/{id}/items/{itemId}/restart": admins,
	"GET /v1/admin/dlq/{tier}":                        operators,
	"POST /v1/admin/dlq/{tier}/redrive":               admins,
	"POST /v1/admin/tiers/{tier}/pause":               admins,
	"POST /v1/admin/tiers/{tier}/resume":              admins,
	"GET /v1/admin/breakers":                          operators,
	"POST /v1/admin/breakers/{key}/reset":             admins,
	"GET /v1/admin/stats":                             operators,
	"GET /v1/webhooks/secret":                         everyone,
	"POST /v1/webhooks/secret/rotate":                 writers,
	"POST /v1/webhooks":                               writers,
	"GET /v1/webhooks":                                everyone,
	"PATCH /v1/webhooks/{id}":                         writers,
	"DELETE /v1/webhooks/{id}":                        writers,
	"POST /v1/webhooks/{id}/redeliver":                writers,
	"GET /v1/admin/jobs":                              operators,
	"GET /v1/admin/jobs/{id}":                         operators,
	"GET /v1/admin/orphans":                           operators,
	"GET /v1/admin/operations/{id}":                   operators,
}

// bodies are requests a permitted caller could send, so that a pass of the
// role check shows as something other than 403.
var bodies = map[string]any{
	"POST /v1/uploads/sign":            map[string]any{"filename": "cat.png", "contentType": "image/png", "size": 10},
	"PUT /v1/account/connection":       map[string]any{"provider": "deviantart", "refreshToken": "rt-roles"},
	"POST /v1/jobs":                    map[string]any{"type": "publish", "items": []any{map[string]any{"uploadId": "upl_aaaaaaaaaaaaaaaaaaaaaaaaaa"}}, "params": map[string]any{"title": "t"}},
	"POST /v1/webhooks":                map[string]any{"url": "https://hooks.example.com/in", "events": []string{"job.failed"}},
	"PATCH /v1/webhooks/{id}":          map[string]any{"enabled": true},
	"POST /v1/webhooks/{id}/redeliver": map[string]any{"since": "2026-01-01T00:00:00Z"},
	"POST /v1/schedules":               map[string]any{"name": "n", "rate": "5m", "job": map[string]any{"type": "http", "params": map[string]any{"url": "http://127.0.0.1:9/x"}}},
	"POST /v1/admin/jobs/restart":      map[string]any{"jobIds": []string{"job_aaaaaaaaaaaaaaaaaaaaaaaaaa"}},
	"POST /v1/admin/jobs/stop":         map[string]any{"jobIds": []string{"job_aaaaaaaaaaaaaaaaaaaaaaaaaa"}},
}

var params = map[string]string{
	"{id}": "job_aaaaaaaaaaaaaaaaaaaaaaaaaa", "{itemId}": "itm_aaaaaaaaaaaaaaaaaaaaaaaaaa", "{tier}": "low", "{key}": "host:example.com",
}

// TestRolesOnEveryRoute walks the HTTP API functions' routers, route by route:
// every route is in the contract's table with the rule it states, service
// tokens get 403 on every route that writes and pass on every read, and
// user tokens get 403 on every admin route.
func TestRolesOnEveryRoute(t *testing.T) {
	t.Parallel()
	b := awstest.Setup(t, nil, stack.Options{})
	tokens := map[string]string{
		"user":    b.Token("u-roles", "user", "pro"),
		"admin":   b.Token("op-roles", "admin", ""),
		"service": b.Token("mon-roles", "service", ""),
	}

	// The HTTP API's functions' routes: API Gateway (and the local gateway)
	// sends each path to the function of the route table
	// (resources.FunctionForPath), so each router holds exactly its group.
	var registered []string
	a := b.Stack.App
	for fn, rt := range map[string]*httpapi.Router{resources.FuncAPI: a.Router, resources.FuncAdmin: a.AdminRouter,
		resources.FuncUploads: a.UploadsRouter, resources.FuncSchedules: a.SchedulesRouter} {
		for _, r := range rt.Routes() {
			if r.Access == httpapi.Public {
				continue
			}
			registered = append(registered, r.Method+" "+r.Pattern)
			isAdmin := strings.HasPrefix(r.Pattern, resources.AdminPathPrefix)
			if got := resources.FunctionForPath(r.Pattern); got != fn {
				t.Errorf("%s %s is a route of the %s function; the route table sends it to %s", r.Method, r.Pattern, fn, got)
			}
			if isAdmin && r.Access != httpapi.ReadOnly && r.Access != httpapi.AdminOnly {
				t.Errorf("%s %s: admin route with access %v", r.Method, r.Pattern, r.Access)
			}
		}
	}
	want := make([]string, 0, len(contractRoutes))
	for k := range contractRoutes {
		want = append(want, k)
	}
	slices.Sort(want)
	slices.Sort(registered)
	if diff := cmp.Diff(want, registered); diff != "" {
		t.Fatalf("registered routes differ from the contract's table (-want +got):\n%s", diff)
	}

	for _, route := range registered {
		t.Run(route, func(t *testing.T) {
			t.Parallel()
			method, pattern, _ := strings.Cut(route, " ")
			path := pattern
			for p, v := range params {
				path = strings.ReplaceAll(path, p, v)
			}
			allowed := contractRoutes[route]
			if method != http.MethodGet && allowed.service {
				t.Fatalf("the table lets service write")
			}
			for role, ok := range map[string]bool{"user": allowed.user, "admin": allowed.admin, "service": allowed.service} {
				r := b.Call(method, path, tokens[role], bodies[route])
				switch {
				case !ok && (r.Status != http.StatusForbidden || r.ErrorCode() != "forbidden"):
					t.Errorf("%s: %d %s, want 403 forbidden", role, r.Status, r.Raw)
				case ok && (r.Status == http.StatusForbidden || r.Status == http.StatusUnauthorized || r.Status >= 500):
					t.Errorf("%s: %d %s, want the route to answer", role, r.Status, r.Raw)
				}
			}
			if r := b.Call(method, path, "", bodies[route]); r.Status != http.StatusUnauthorized {
				t.Errorf("no token: %d %s, want 401", r.Status, r.Raw)
			}
		})
	}
}
