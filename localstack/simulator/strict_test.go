package simulator_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/conveyor/conveyor/localstack/simulator"
)

func TestTokenRequiresTheConfiguredClient(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tests := []struct {
		name         string
		form         url.Values // client_id / client_secret form fields
		basicID      string     // HTTP Basic, when basic is set
		basicSecret  string
		basic        bool
		status       int
		errCode      string
		mustNotLeak  string
		refreshAfter bool // the refresh token still works with the right client afterwards
	}{
		{name: "form", form: url.Values{"client_id": {clientID}, "client_secret": {clientSecret}}, status: 200},
		{name: "basic", basic: true, basicID: clientID, basicSecret: clientSecret, status: 200},
		{name: "none", form: url.Values{}, status: 401, errCode: "invalid_client", refreshAfter: true},
		{name: "empty", form: url.Values{"client_id": {""}, "client_secret": {""}}, status: 401, errCode: "invalid_client", refreshAfter: true},
		{name: "wrong secret", form: url.Values{"client_id": {clientID}, "client_secret": {"guess-123"}}, status: 401,
			errCode: "invalid_client", mustNotLeak: "guess-123", refreshAfter: true},
		{name: "wrong id", form: url.Values{"client_id": {"someone-else"}, "client_secret": {clientSecret}}, status: 401,
			errCode: "invalid_client", refreshAfter: true},
		{name: "id only", form: url.Values{"client_id": {clientID}}, status: 401, errCode: "invalid_client", refreshAfter: true},
		{name: "secret as a prefix", form: url.Values{"client_id": {clientID}, "client_secret": {clientSecret[:3]}}, status: 401,
			errCode: "invalid_client", refreshAfter: true},
		{name: "basic, wrong secret", basic: true, basicID: clientID, basicSecret: "guess-456", status: 401,
			errCode: "invalid_client", mustNotLeak: "guess-456", refreshAfter: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rt := b.sim.MintRefreshToken()
			form := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {rt}}
			for k, v := range tt.form {
				form[k] = v
			}
			req, err := http.NewRequest(http.MethodPost, b.url+"/oauth2/token", strings.NewReader(form.Encode()))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			if tt.basic {
				req.SetBasicAuth(tt.basicID, tt.basicSecret)
			}
			a := b.do(req)
			wantStatus(t, a, tt.status, tt.errCode)
			if tt.status == http.StatusUnauthorized {
				if a.Header.Get("WWW-Authenticate") == "" {
					t.Error("a 401 without WWW-Authenticate")
				}
				if a.Body["status"] != "error" || a.Body["error_description"] == "" {
					t.Errorf("not a DeviantArt-like error: %s", a.Raw)
				}
			}
			if tt.mustNotLeak != "" && strings.Contains(string(a.Raw), tt.mustNotLeak) {
				t.Errorf("the answer echoes the secret sent: %s", a.Raw)
			}
			if tt.refreshAfter {
				// A refused client does not spend the user's refresh token.
				wantStatus(t, b.refresh(rt), http.StatusOK, "")
			}
		})
	}
}

func TestSetClientRotatesTheAcceptedCredentials(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.sim.SetClient(clientID, "regenerated")
	wantStatus(t, b.refresh(b.sim.MintRefreshToken()), http.StatusUnauthorized, "invalid_client")
	a := b.form("/oauth2/token", "", url.Values{"grant_type": {"refresh_token"}, "refresh_token": {b.sim.MintRefreshToken()},
		"client_id": {clientID}, "client_secret": {"regenerated"}})
	wantStatus(t, a, http.StatusOK, "")
	if got := b.sim.Stats().Calls["/oauth2/token"]; !cmp.Equal(got, map[string]int{"401": 1, "200": 1}) {
		t.Errorf("token calls = %v, want one 401 and one 200", got)
	}
}

func TestZeroOptionsAreStrict(t *testing.T) {
	t.Parallel()
	sim := simulator.New(simulator.Options{})
	post := func(form url.Values) int {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPost, "/oauth2/token", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		sim.ServeHTTP(rec, req)
		return rec.Code
	}
	base := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {"x"}}
	if code := post(base); code != http.StatusUnauthorized {
		t.Errorf("no client: %d, want 401", code)
	}
	base.Set("client_id", simulator.ClientIDDefault)
	base.Set("client_secret", simulator.ClientSecretDefault)
	if code := post(base); code != http.StatusOK {
		t.Errorf("the default client: %d, want 200", code)
	}
}

func TestAccessTokenLifetime(t *testing.T) {
	t.Parallel()
	b := setupWith(t, simulator.Options{AccessTokenTTL: 10 * time.Minute})
	first := b.refresh(b.sim.MintRefreshToken())
	if first.Body["expires_in"] != 600.0 {
		t.Fatalf("expires_in = %v, want 600", first.Body["expires_in"])
	}
	tok := first.Body["access_token"].(string)
	delta := "/api/v1/oauth2/stash/delta"
	b.clock.Advance(10*time.Minute - time.Second)
	wantStatus(t, b.req(http.MethodGet, delta, tok, nil, ""), http.StatusOK, "")
	b.clock.Advance(time.Second)
	wantStatus(t, b.req(http.MethodGet, delta, tok, nil, ""), http.StatusUnauthorized, "invalid_token")

	// The lifetime can change while it runs, for tokens issued afterwards.
	wantStatus(t, b.json(http.MethodPut, "/_sim/settings", map[string]any{"accessTokenTtlMs": 2000}), http.StatusOK, "")
	short := b.refresh(first.Body["refresh_token"].(string))
	if short.Body["expires_in"] != 2.0 {
		t.Fatalf("expires_in = %v, want 2", short.Body["expires_in"])
	}
	b.clock.Advance(2 * time.Second)
	wantStatus(t, b.req(http.MethodGet, delta, short.Body["access_token"].(string), nil, ""), http.StatusUnauthorized, "invalid_token")
}

func TestRateLimitPerAccessToken(t *testing.T) {
	t.Parallel()
	b := setupWith(t, simulator.Options{RateLimit: 2, RateWindow: time.Minute})
	one, two := b.login(), b.login()
	delta := "/api/v1/oauth2/stash/delta"
	for range 2 {
		wantStatus(t, b.req(http.MethodGet, delta, one, nil, ""), http.StatusOK, "")
	}
	over := b.req(http.MethodGet, delta, one, nil, "")
	wantStatus(t, over, http.StatusTooManyRequests, "user_api_threshold")
	if got := over.Header.Get("Retry-After"); got != "60" {
		t.Errorf("Retry-After = %q, want 60", got)
	}
	// Every path counts against the same token; another token has its own.
	sub := b.submit(one, part{name: "title", value: "x"}, part{name: "f", filename: "a", value: "x"})
	wantStatus(t, sub, http.StatusTooManyRequests, "user_api_threshold")
	wantStatus(t, b.req(http.MethodGet, delta, two, nil, ""), http.StatusOK, "")

	b.clock.Advance(45 * time.Second)
	if got := b.req(http.MethodGet, delta, one, nil, "").Header.Get("Retry-After"); got != "15" {
		t.Errorf("Retry-After 45 s into the window = %q, want 15", got)
	}
	b.clock.Advance(15 * time.Second)
	wantStatus(t, b.req(http.MethodGet, delta, one, nil, ""), http.StatusOK, "")

	if got := b.sim.Stats().Calls[delta]; !cmp.Equal(got, map[string]int{"200": 4, "429": 2}) {
		t.Errorf("delta calls = %v", got)
	}
	// An unknown token is a 401, not a 429.
	wantStatus(t, b.req(http.MethodGet, delta, "at_nope", nil, ""), http.StatusUnauthorized, "invalid_token")
}

func TestRateLimitIsOffByDefaultAndSettable(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tok := b.login()
	delta := "/api/v1/oauth2/stash/delta"
	for range 50 {
		wantStatus(t, b.req(http.MethodGet, delta, tok, nil, ""), http.StatusOK, "")
	}
	set := b.json(http.MethodPatch, "/_sim/settings", map[string]any{"rateLimit": 1, "rateWindowMs": 10_000})
	wantStatus(t, set, http.StatusOK, "")
	wantStatus(t, b.req(http.MethodGet, delta, tok, nil, ""), http.StatusOK, "")
	a := b.req(http.MethodGet, delta, tok, nil, "")
	wantStatus(t, a, http.StatusTooManyRequests, "user_api_threshold")
	if got := a.Header.Get("Retry-After"); got != "10" {
		t.Errorf("Retry-After = %q, want 10", got)
	}
}

func TestSettings(t *testing.T) {
	t.Parallel()
	b := setupWith(t, simulator.Options{Latency: 5 * time.Millisecond})
	want := simulator.Settings{LatencyMs: 5, RateWindowMs: 60_000, AccessTokenTTLMs: 3_600_000}
	var got simulator.Settings
	a := b.req(http.MethodGet, "/_sim/settings", "", nil, "")
	wantStatus(t, a, http.StatusOK, "")
	decode(t, a.Raw, &got)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("settings (-want +got):\n%s", diff)
	}

	// A PUT changes the fields it names and keeps the others.
	a = b.json(http.MethodPut, "/_sim/settings", map[string]any{"latencyMs": 0, "latencyJitterMs": 3, "rateLimit": 100})
	wantStatus(t, a, http.StatusOK, "")
	decode(t, a.Raw, &got)
	want = simulator.Settings{LatencyJitterMs: 3, RateLimit: 100, RateWindowMs: 60_000, AccessTokenTTLMs: 3_600_000}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("after PUT (-want +got):\n%s", diff)
	}
	for _, body := range []string{
		`{"latencyMs":-1}`, `{"latencyJitterMs":-1}`, `{"rateLimit":-1}`, `{"rateWindowMs":0}`, `{"accessTokenTtlMs":0}`,
		`{"bogus":1}`, `not json`, `{"rateLimit":"1"}`,
	} {
		wantStatus(t, b.req(http.MethodPut, "/_sim/settings", "", strings.NewReader(body), "application/json"), 400, "invalid_request")
	}
	if diff := cmp.Diff(want, b.sim.Settings()); diff != "" {
		t.Errorf("bad settings changed something (-want +got):\n%s", diff)
	}
	wantStatus(t, b.req(http.MethodDelete, "/_sim/settings", "", nil, ""), http.StatusMethodNotAllowed, "invalid_request")

	// Reset restores the options' settings.
	b.sim.Reset()
	if diff := cmp.Diff(simulator.Settings{LatencyMs: 5, RateWindowMs: 60_000, AccessTokenTTLMs: 3_600_000}, b.sim.Settings()); diff != "" {
		t.Errorf("after reset (-want +got):\n%s", diff)
	}
}

func TestLatencyOnEveryCall(t *testing.T) {
	t.Parallel()
	const latency = 40 * time.Millisecond
	b := setupWith(t, simulator.Options{Latency: latency})
	for _, call := range []struct {
		name string
		do   func() answer
	}{
		{"token", func() answer { return b.refresh(b.sim.MintRefreshToken()) }},
		{"unknown path", func() answer { return b.req(http.MethodGet, "/nope", "", nil, "") }},
	} {
		start := time.Now()
		call.do()
		if d := time.Since(start); d < latency {
			t.Errorf("%s answered after %v, want ≥ %v", call.name, d, latency)
		}
	}

	// A fault's latency comes on top, and its status still applies.
	b.sim.AddFault(simulator.Fault{Path: "/api/v1/oauth2/stash/delta", Status: 503, LatencyMs: 20, Count: 1})
	start := time.Now()
	wantStatus(t, b.req(http.MethodGet, "/api/v1/oauth2/stash/delta", "", nil, ""), 503, "server_error")
	if d := time.Since(start); d < latency+20*time.Millisecond {
		t.Errorf("faulted call answered after %v, want ≥ %v", d, latency+20*time.Millisecond)
	}
}

func TestLatencyEndsWhenTheClientGoesAway(t *testing.T) {
	t.Parallel()
	sim := simulator.New(simulator.Options{Latency: time.Minute})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		sim.ServeHTTP(httptest.NewRecorder(), httptest.NewRequestWithContext(ctx, http.MethodGet, "/api/v1/oauth2/stash/delta", nil))
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the handler kept waiting after the client went away")
	}
	if got := sim.Stats().Calls["/api/v1/oauth2/stash/delta"]; !cmp.Equal(got, map[string]int{"499": 1}) {
		t.Errorf("calls = %v, want one 499", got)
	}
	// Control endpoints are never delayed.
	rec := httptest.NewRecorder()
	sim.ServeHTTP(rec, httptest.NewRequestWithContext(ctx, http.MethodGet, "/_sim/settings", nil))
	if rec.Code != http.StatusOK {
		t.Errorf("/_sim/settings with a gone client = %d, want 200 (no latency)", rec.Code)
	}
}

func decode(t *testing.T, raw []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(raw, v); err != nil {
		t.Fatalf("decoding %s: %v", raw, err)
	}
}
