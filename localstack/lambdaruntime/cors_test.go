package lambdaruntime

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// TestWithCORS: an API with CORS answers every preflight itself (204),
// with its headers only for an allowed origin; an allowed origin's answers
// carry the origin and the exposed headers, whatever the function set;
// an origin not allowed, or a request without one, gets none; without CORS
// a preflight reaches the function.
func TestWithCORS(t *testing.T) {
	t.Parallel()
	cors := &CORS{AllowOrigins: []string{"https://app.conveyor.dev"}, AllowMethods: []string{"GET", "POST"},
		AllowHeaders: []string{"Authorization", "Idempotency-Key"}, ExposeHeaders: []string{"X-Request-Id", "Retry-After"}, MaxAge: time.Hour}
	invoked := 0
	fn := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		invoked++
		w.Header().Set("Access-Control-Allow-Origin", "https://evil.example")
		w.Header().Set("X-Request-Id", "req_1")
		w.WriteHeader(http.StatusCreated)
	})
	do := func(h http.Handler, method, origin string, preflight bool) *httptest.ResponseRecorder {
		r := httptest.NewRequest(method, "/v1/jobs", nil)
		if origin != "" {
			r.Header.Set("Origin", origin)
		}
		if preflight {
			r.Header.Set("Access-Control-Request-Method", "POST")
			r.Header.Set("Access-Control-Request-Headers", "idempotency-key")
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	h := WithCORS(cors, fn)

	w := do(h, http.MethodOptions, "https://app.conveyor.dev", true)
	if w.Code != http.StatusNoContent || invoked != 0 {
		t.Errorf("preflight: %d, function invoked %d times; want 204 from the gateway", w.Code, invoked)
	}
	for k, want := range map[string]string{"Access-Control-Allow-Origin": "https://app.conveyor.dev", "Access-Control-Allow-Methods": "GET,POST",
		"Access-Control-Allow-Headers": "Authorization,Idempotency-Key", "Access-Control-Max-Age": "3600", "Vary": "Origin"} {
		if got := w.Header().Get(k); got != want {
			t.Errorf("preflight %s = %q, want %q", k, got, want)
		}
	}
	w = do(h, http.MethodOptions, "https://other.conveyor.dev", true)
	if w.Code != http.StatusNoContent || w.Header().Get("Access-Control-Allow-Origin") != "" || w.Header().Get("Access-Control-Allow-Headers") != "" || invoked != 0 {
		t.Errorf("another origin's preflight: %d %v (function invoked %d times), want 204 without CORS headers", w.Code, w.Header(), invoked)
	}

	w = do(h, http.MethodPost, "https://app.conveyor.dev", false)
	if w.Code != http.StatusCreated || invoked != 1 {
		t.Errorf("POST: %d, invoked %d", w.Code, invoked)
	}
	for k, want := range map[string]string{"Access-Control-Allow-Origin": "https://app.conveyor.dev", "Access-Control-Expose-Headers": "X-Request-Id,Retry-After",
		"X-Request-Id": "req_1"} {
		if got := w.Header().Get(k); got != want {
			t.Errorf("POST %s = %q, want %q", k, got, want)
		}
	}
	for _, origin := range []string{"https://other.conveyor.dev", ""} {
		w = do(h, http.MethodPost, origin, false)
		if got := w.Header().Get("Access-Control-Expose-Headers"); got != "" {
			t.Errorf("POST from %q: Access-Control-Expose-Headers %q, want none", origin, got)
		}
	}

	invoked = 0
	if w := do(WithCORS(nil, fn), http.MethodOptions, "https://app.conveyor.dev", true); w.Code != http.StatusCreated || invoked != 1 {
		t.Errorf("without CORS, a preflight: %d, invoked %d; want it passed to the function", w.Code, invoked)
	}
}
