package httpapi

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/conveyor/conveyor/internal/fault"
)

// refuseAfter admits n requests per owner, then throttles them; err, when
// set, is what it answers instead.
type refuseAfter struct {
	mu   sync.Mutex
	n    int
	seen map[string]int
	err  error
}

func (l *refuseAfter) Admit(_ context.Context, owner, plan string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return l.err
	}
	l.seen[owner+"/"+plan]++
	if l.seen[owner+"/"+plan] > l.n {
		return &fault.Throttled{Code: "throttled", Limit: 5, Period: time.Second, Burst: 60, RetryAfter: 1500 * time.Millisecond, Msg: "too many requests"}
	}
	return nil
}

func TestARequestOverItsOwnersRateIs429WithRetryAfter(t *testing.T) {
	t.Parallel()
	b := setup(t)
	lim := &refuseAfter{n: 2, seen: map[string]int{}}
	b.rt.opts.Limiter = lim
	for i := range 2 {
		if resp := serve(t, b.rt, event(http.MethodGet, "/things/1", b.user, "")); resp.StatusCode != http.StatusOK {
			t.Fatalf("request %d under the limit: %d %s", i+1, resp.StatusCode, resp.Body)
		}
	}
	resp := serve(t, b.rt, event(http.MethodPost, "/things", b.user, `{"name":"x"}`))
	if resp.StatusCode != http.StatusTooManyRequests || resp.Headers["Retry-After"] != "2" {
		t.Fatalf("the third request: %d Retry-After %q, want 429 with Retry-After 2 (1.5 s rounded up)", resp.StatusCode, resp.Headers["Retry-After"])
	}
	want := errorDetail{Code: "throttled", Message: "too many requests", Limit: &ErrorLimit{Value: 5, Period: "1s", Burst: 60}}
	if diff := cmp.Diff(want, errorOf(t, resp)); diff != "" {
		t.Errorf("the 429's body (-want +got):\n%s", diff)
	}
	for _, tok := range []string{b.admin, b.service, ""} {
		path := "/things/1"
		if tok == "" {
			path = "/public"
		}
		if resp := serve(t, b.rt, event(http.MethodGet, path, tok, "")); resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s with an admin, service or no token: %d, want 200 (not rate limited)", path, resp.StatusCode)
		}
	}
	if diff := cmp.Diff(map[string]int{"u-user/free": 3}, lim.seen); diff != "" {
		t.Errorf("the limiter was asked (-want +got):\n%s", diff)
	}
}

func TestALimiterFailureServesTheRequest(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.rt.opts.Limiter = &refuseAfter{err: errors.New("table unavailable")}
	b.rt.opts.Logger = slog.New(slog.NewJSONHandler(b.log, nil))
	if resp := serve(t, b.rt, event(http.MethodGet, "/things/1", b.user, "")); resp.StatusCode != http.StatusOK {
		t.Errorf("with the limiter failing: %d, want 200 (fail open)", resp.StatusCode)
	}
}
