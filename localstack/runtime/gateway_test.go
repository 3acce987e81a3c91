package runtime

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestRouteByPrefix: the admin prefix goes to its function, everything
// else — the bare prefix without its slash and look-alike paths included —
// to the default one, with no redirect.
func TestRouteByPrefix(t *testing.T) {
	t.Parallel()
	named := func(name string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, name) })
	}
	h := RouteByPrefix("/v1/admin/", named("admin"), named("api"))
	for path, want := range map[string]string{
		"/v1/admin/overview":        "admin",
		"/v1/admin/jobs/job_1":      "admin",
		"/v1/admin/":                "admin",
		"/v1/admin":                 "api",
		"/v1/administrators":        "api",
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
}
