package stack_test

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/conveyor/conveyor/internal/resources"
	"github.com/conveyor/conveyor/localstack/awstest"
	"github.com/conveyor/conveyor/localstack/stack"
)

// list splits a comma-separated header value, lowercased.
func list(v string) []string {
	var out []string
	for _, p := range strings.Split(v, ",") {
		if p = strings.ToLower(strings.TrimSpace(p)); p != "" {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

func lower(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = strings.ToLower(n)
	}
	slices.Sort(out)
	return out
}

// TestBrowserPreflightWithIdempotencyKey: a frontend on another origin
// sends a creating POST with Idempotency-Key. The local gateway answers its
// preflight itself, as API Gateway does for an API with CORS, with exactly
// the HTTP API's CORS (resources.APICORS, which the CDK stacks deploy), and
// the actual answers let the page read the contract's response headers.
func TestBrowserPreflightWithIdempotencyKey(t *testing.T) {
	t.Parallel()
	b := awstest.Setup(t, nil, stack.Options{})
	url := b.Stack.APIURL
	const origin = "https://app.conveyor.dev"

	req, _ := http.NewRequest(http.MethodOptions, url+"/v1/jobs", nil)
	req.Header.Set("Origin", origin)
	req.Header.Set("Access-Control-Request-Method", "POST")
	req.Header.Set("Access-Control-Request-Headers", "authorization,content-type,idempotency-key")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	h := resp.Header
	if resp.StatusCode != http.StatusNoContent {
		t.Errorf("preflight: %d, want 204 (answered by the gateway, not the function)", resp.StatusCode)
	}
	if got := h.Get("Access-Control-Allow-Origin"); got != "*" && got != origin {
		t.Errorf("preflight Access-Control-Allow-Origin %q, want %s or * (the local origins are *)", got, origin)
	}
	allowed := list(h.Get("Access-Control-Allow-Headers"))
	for _, want := range []string{"authorization", "content-type", "idempotency-key"} {
		if !slices.Contains(allowed, want) {
			t.Errorf("preflight Access-Control-Allow-Headers %q lacks %s: the browser refuses the POST", h.Get("Access-Control-Allow-Headers"), want)
		}
	}
	if !slices.Equal(allowed, lower(resources.APICORS.AllowHeaders)) {
		t.Errorf("preflight allows headers %v, want exactly resources.APICORS's %v", allowed, resources.APICORS.AllowHeaders)
	}
	if methods := list(h.Get("Access-Control-Allow-Methods")); !slices.Contains(methods, "post") || !slices.Equal(methods, lower(resources.APICORS.AllowMethods)) {
		t.Errorf("preflight Access-Control-Allow-Methods %q, want resources.APICORS's %v", h.Get("Access-Control-Allow-Methods"), resources.APICORS.AllowMethods)
	}
	if got := h.Get("Access-Control-Max-Age"); got != strconv.Itoa(int(resources.APICORS.MaxAge.Seconds())) {
		t.Errorf("preflight Access-Control-Max-Age %q, want %v in seconds", got, resources.APICORS.MaxAge)
	}

	// An actual answer to that origin: the page may read every header the
	// contract names.
	tok := b.Token("u-cors", "user", "free")
	req, _ = http.NewRequest(http.MethodGet, url+"/v1/jobs?limit=0", nil)
	req.Header.Set("Origin", origin)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Total-Count") == "" {
		t.Fatalf("GET /v1/jobs?limit=0: %d, X-Total-Count %q", resp.StatusCode, resp.Header.Get("X-Total-Count"))
	}
	if got := resp.Header.Get("Access-Control-Allow-Origin"); got != "*" && got != origin {
		t.Errorf("answer's Access-Control-Allow-Origin %q, want %s or *", got, origin)
	}
	exposed := list(resp.Header.Get("Access-Control-Expose-Headers"))
	for _, want := range []string{"x-request-id", "retry-after", "idempotent-replayed", "x-total-count", "location"} {
		if !slices.Contains(exposed, want) {
			t.Errorf("answer's Access-Control-Expose-Headers %q lacks %s", resp.Header.Get("Access-Control-Expose-Headers"), want)
		}
	}
	if !slices.Equal(exposed, lower(resources.APICORS.ExposeHeaders)) {
		t.Errorf("answer exposes %v, want exactly resources.APICORS's %v", exposed, resources.APICORS.ExposeHeaders)
	}

	// Without an Origin (not a browser's cross-origin call), no CORS
	// header.
	req, _ = http.NewRequest(http.MethodGet, url+"/v1/jobs?limit=0", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := resp.Header.Get("Access-Control-Allow-Origin"); got != "" {
		t.Errorf("an answer without Origin has Access-Control-Allow-Origin %q", got)
	}
}
