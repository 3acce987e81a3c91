package apiclient

import (
	"net/http"
	"testing"
	"time"
)

// Retry-After is delay-seconds or an HTTP date, read against the injected
// time; anything else, or a date already past, is no hint.
func TestRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 23, 18, 0, 0, 0, time.UTC)
	for in, want := range map[string]time.Duration{
		"":                              0,
		"5":                             5 * time.Second,
		" 120 ":                         2 * time.Minute,
		"-3":                            0,
		"soon":                          0,
		"Mon, 23 Nov 2026 18:00:30 GMT": 30 * time.Second,
		"Mon, 23 Nov 2026 17:59:00 GMT": 0,
	} {
		if got := retryAfter(in, now); got != want {
			t.Errorf("retryAfter(%q) = %s, want %s", in, got, want)
		}
	}
}

// An answer outside the contract's shape (a proxy's HTML, an empty 502)
// is still an *APIError, with the start of the body or the status text.
func TestAPIErrorOfAnAnswerOutsideTheContract(t *testing.T) {
	t.Parallel()
	now := time.Now()
	e := apiError("GET", "/v1/jobs", &Response{Status: 502, Header: http.Header{"X-Request-Id": {"r-1"}}, Body: []byte("<html>bad gateway</html>")}, now)
	if e.Code != "" || e.Message != "<html>bad gateway</html>" || e.RequestID != "r-1" || !e.Temporary() {
		t.Errorf("502 with HTML = %+v", *e)
	}
	if got, want := e.Error(), "HTTP 502: <html>bad gateway</html>"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if e := apiError("GET", "/", &Response{Status: 503, Header: http.Header{}}, now); e.Message != "Service Unavailable" {
		t.Errorf("empty 503: message %q", e.Message)
	}
	if e.Unwrap() != nil {
		t.Errorf("an error without a field unwraps to %v", e.Unwrap())
	}
}

// A 429 throttled carries its Retry-After and the limit it names.
func TestAPIErrorOfAThrottledRequest(t *testing.T) {
	t.Parallel()
	body := `{"error":{"code":"throttled","message":"too many requests","limit":{"value":5,"period":"1s","burst":60}}}`
	e := apiError("POST", "/v1/jobs", &Response{Status: 429, Header: http.Header{"Retry-After": {"2"}}, Body: []byte(body)}, time.Now())
	if e.Code != "throttled" || e.RetryAfter != 2*time.Second || !e.Temporary() || e.Limit == nil || *e.Limit != (Limit{Value: 5, Period: "1s", Burst: 60}) {
		t.Errorf("429 throttled = %+v (limit %+v)", *e, e.Limit)
	}
}
