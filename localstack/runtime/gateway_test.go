package runtime

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/conveyor/conveyor/internal/resources"
)

// TestRouteByPath: each path goes to the function the route table names —
// the admin, uploads and schedules groups to theirs, everything else
// (look-alike paths included) to the api — with no redirect.
func TestRouteByPath(t *testing.T) {
	t.Parallel()
	named := func(name string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, name) })
	}
	fns := map[string]http.Handler{}
	for _, fn := range []string{resources.FuncAPI, resources.FuncAdmin, resources.FuncUploads, resources.FuncSchedules} {
		fns[fn] = named(fn)
	}
	h := RouteByPath(resources.FunctionForPath, fns)
	for path, want := range map[string]string{
		"/v1/admin/overview":        "admin",
		"/v1/admin/jobs/job_1":      "admin",
		"/v1/admin/":                "admin",
		"/v1/admin":                 "api",
		"/v1/administrators":        "api",
		"/v1/uploads/sign":          "uploads",
		"/v1/uploads/upl_1?x=1":     "uploads",
		"/v1/uploads":               "api",
		"/v1/schedules":             "schedules",
		"/v1/schedules?limit=1":     "schedules",
		"/v1/schedules/sch_1/pause": "schedules",
		"/v1/schedulesx":            "api",
		"/v1/jobs":                  "api",
		"/dashboard/":               "api",
		"/v2/admin/overview":        "api",
		"/v1/jobs/job_1/admin/echo": "api",
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		if rec.Code != http.StatusOK || rec.Body.String() != want {
			t.Errorf("%s: %d %q, want 200 %q", path, rec.Code, rec.Body.String(), want)
		}
	}
	// A function without a handler: the gateway's own 500, never another
	// function's answer.
	delete(fns, resources.FuncUploads)
	rec := httptest.NewRecorder()
	RouteByPath(resources.FunctionForPath, fns).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/uploads/sign", nil))
	if rec.Code != http.StatusInternalServerError {
		t.Errorf("no uploads handler: %d %s, want 500", rec.Code, rec.Body)
	}
}
