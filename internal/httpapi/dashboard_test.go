package httpapi_test

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/conveyor/conveyor/internal/httpapi"
	"github.com/conveyor/conveyor/web"
)

func dashboardRouter(local bool) *httpapi.Router {
	rt := httpapi.NewRouter(httpapi.Options{Verifier: httpapi.NewVerifier([]byte("secret-for-the-dashboard-test-32b"), time.Now), Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))})
	httpapi.RegisterDashboard(rt, web.Files(), httpapi.DashboardOptions{Local: local})
	return rt
}

func get(t *testing.T, rt *httpapi.Router, method, path string) events.APIGatewayV2HTTPResponse {
	t.Helper()
	ev := events.APIGatewayV2HTTPRequest{RawPath: path}
	ev.RequestContext.HTTP.Method, ev.RequestContext.HTTP.Path = method, path
	resp, err := rt.Serve(context.Background(), ev)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// The api function serves the dashboard itself (as in AWS, so locally),
// with a strict CSP and HSTS outside local.
func TestDashboardServedByTheAPIRouter(t *testing.T) {
	t.Parallel()
	for _, local := range []bool{false, true} {
		rt := dashboardRouter(local)
		r := get(t, rt, "GET", "/dashboard/")
		if r.StatusCode != 200 || r.Headers["Content-Type"] != "text/html; charset=utf-8" || !strings.Contains(r.Body, "<html") {
			t.Fatalf("GET /dashboard/: %d %q %.80s", r.StatusCode, r.Headers["Content-Type"], r.Body)
		}
		csp := r.Headers["Content-Security-Policy"]
		for _, want := range []string{"default-src 'self'", "script-src 'self'", "frame-ancestors 'none'", "object-src 'none'"} {
			if !strings.Contains(csp, want) {
				t.Errorf("CSP %q lacks %q", csp, want)
			}
		}
		if strings.Contains(csp, "unsafe-") || strings.Contains(r.Body, "<script>") {
			t.Errorf("inline script allowed or present: CSP %q", csp)
		}
		if r.Headers["X-Content-Type-Options"] != "nosniff" || r.Headers["Referrer-Policy"] != "no-referrer" {
			t.Errorf("headers: %v", r.Headers)
		}
		if hsts := r.Headers["Strict-Transport-Security"]; (hsts == "") != local {
			t.Errorf("local=%v: HSTS %q", local, hsts)
		}
		if r := get(t, rt, "GET", "/dashboard/js/main.js"); r.StatusCode != 200 || !strings.HasPrefix(r.Headers["Content-Type"], "text/javascript") {
			t.Errorf("main.js: %d %q", r.StatusCode, r.Headers["Content-Type"])
		}
		if r := get(t, rt, "HEAD", "/dashboard/app.css"); r.StatusCode != 200 || r.Body != "" {
			t.Errorf("HEAD app.css: %d %q", r.StatusCode, r.Body)
		}
		if r := get(t, rt, "GET", "/dashboard"); r.StatusCode != 301 || r.Headers["Location"] != "/dashboard/" {
			t.Errorf("GET /dashboard: %d %v", r.StatusCode, r.Headers)
		}
		for _, p := range []string{"/dashboard/nope.js", "/dashboard/../go.mod", "/dashboard/%2e%2e/web.go"} {
			if r := get(t, rt, "GET", p); r.StatusCode != 404 || !strings.Contains(r.Body, `"not_found"`) {
				t.Errorf("GET %s: %d %s", p, r.StatusCode, r.Body)
			}
		}
		if r := get(t, rt, "POST", "/dashboard/"); r.StatusCode != 405 {
			t.Errorf("POST /dashboard/: %d", r.StatusCode)
		}
	}
}
