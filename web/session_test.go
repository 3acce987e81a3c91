package web

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/conveyor/conveyor/internal/httpapi"
	"github.com/conveyor/conveyor/internal/job"
)

// TestSessionOnlyOnTheLocalStack: the dashboard's self sign-in hands out a
// token only with CONVEYOR_ENV=local, to a request addressed to a loopback
// host and not cross-site; every other environment refuses.
func TestSessionOnlyOnTheLocalStack(t *testing.T) {
	t.Parallel()
	secret := []byte("s3cret-s3cret-s3cret-s3cret-s3cret")
	now := time.Date(2026, 1, 2, 15, 0, 0, 0, time.UTC)
	call := func(env job.Env, host string, header ...string) *http.Response {
		h := SessionHandler(LocalSession{Env: env, Secret: secret, StreamURL: "http://127.0.0.1:8081/", Now: func() time.Time { return now }})
		req := httptest.NewRequest(http.MethodGet, SessionPath, nil)
		req.Host = host
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Result()
	}
	for _, env := range []job.Env{"staging", "prod-ru", "prod-en", ""} {
		if r := call(env, "127.0.0.1:8080"); r.StatusCode != http.StatusNotFound {
			t.Errorf("CONVEYOR_ENV=%q: %d, want 404", env, r.StatusCode)
		}
	}
	for _, host := range []string{"evil.example:8080", "10.0.0.5:8080", "conveyor.example.com"} {
		if r := call(job.Local, host); r.StatusCode != http.StatusNotFound {
			t.Errorf("Host %s: %d, want 404", host, r.StatusCode)
		}
	}
	if r := call(job.Local, "127.0.0.1:8080", "Sec-Fetch-Site", "cross-site"); r.StatusCode != http.StatusNotFound {
		t.Errorf("cross-site: %d, want 404", r.StatusCode)
	}
	for _, host := range []string{"127.0.0.1:8080", "localhost:8080", "[::1]:8080"} {
		r := call(job.Local, host, "Sec-Fetch-Site", "same-origin")
		var s Session
		if err := json.NewDecoder(r.Body).Decode(&s); r.StatusCode != http.StatusOK || err != nil {
			t.Fatalf("Host %s: %d %v", host, r.StatusCode, err)
		}
		if s.EventsBase != "http://127.0.0.1:8081" || s.ExpiresAt != "2026-01-03T03:00:00Z" || r.Header.Get("Cache-Control") != "no-store" {
			t.Errorf("session %+v, Cache-Control %q", s, r.Header.Get("Cache-Control"))
		}
		c, err := httpapi.NewVerifier(secret, func() time.Time { return now }).Verify("Bearer " + s.Token)
		if err != nil || c.Subject != LocalUser || c.Role != httpapi.RoleAdmin {
			t.Errorf("token: %+v %v", c, err)
		}
	}
}
