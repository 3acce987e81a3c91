package httpapi_test

import (
	"context"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/conveyor/conveyor/internal/config"
	"github.com/conveyor/conveyor/internal/handler"
	"github.com/conveyor/conveyor/internal/httpapi"
	"github.com/conveyor/conveyor/internal/resources"
	"github.com/conveyor/conveyor/localstack/awstest"
)

// TestEveryHTTPFunctionAcceptsTheIssuer wires each function that serves
// HTTP (api, admin, uploads, schedules, stream) as its binary does, with
// an OIDC issuer configured: the issuer's RS256 and ES256 tokens are
// accepted (the role read from a namespaced claim), HS256 tokens still
// are, and a token for another audience, from another issuer or expired
// is a 401 with the JSON error shape. The key set is fetched once, on the
// first token, not at cold start.
func TestEveryHTTPFunctionAcceptsTheIssuer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	idp := newIssuer(t)
	const hsKey = "an-hs256-key-of-32-bytes-or-more"
	vars := idp.Vars("conveyor-test")
	vars[config.VarJWTSecret] = hsKey
	vars[config.VarOIDCRoleClaim] = "https://conveyor.example/role"
	res := awstest.Provision(t)
	env := func(fn string) handler.Env { return res.Function(t, fn, maps.Clone(vars)) }

	type httpFn = func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error)
	must := func(h httpFn, err error) httpFn {
		if err != nil {
			t.Fatalf("building a function: %v", err)
		}
		return h
	}
	api := must(handler.NewAPI(ctx, env(resources.FuncAPI)))
	admin := must(handler.NewAdminWith(handler.AdminLocal)(ctx, env(resources.FuncAdmin)))
	uploads := must(handler.NewUploads(ctx, env(resources.FuncUploads)))
	schedules := must(handler.NewSchedules(ctx, env(resources.FuncSchedules)))
	stream, err := handler.NewStream(ctx, env(resources.FuncStream))
	if err != nil {
		t.Fatal(err)
	}
	if n := idp.KeySetFetches.Load(); n != 0 {
		t.Fatalf("%d key set fetches at cold start, want 0", n)
	}

	call := func(h httpFn, path, token string) (int, string) {
		t.Helper()
		req := events.APIGatewayV2HTTPRequest{RawPath: path, Headers: map[string]string{"authorization": "Bearer " + token},
			RequestContext: events.APIGatewayV2HTTPRequestContext{HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: http.MethodGet, Path: path}}}
		resp, err := h(ctx, req)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		return resp.StatusCode, resp.Body
	}
	callStream := func(path, token string) (int, string) {
		t.Helper()
		resp, err := stream(ctx, events.LambdaFunctionURLRequest{RawPath: path, Headers: map[string]string{"authorization": "Bearer " + token}})
		if err != nil {
			t.Fatal(err)
		}
		var b []byte
		if resp.StatusCode != http.StatusOK {
			b, _ = io.ReadAll(resp.Body)
		}
		return resp.StatusCode, string(b)
	}
	user := idp.Token(t, false, map[string]any{"sub": "idp-user-1", "aud": "conveyor-test"})
	userES := idp.Token(t, true, map[string]any{"sub": "idp-user-2", "aud": []string{"x", "conveyor-test"}})
	admin1 := idp.Token(t, true, map[string]any{"sub": "idp-ops", "aud": "conveyor-test", "https://conveyor.example/role": "admin"})
	hs, err := httpapi.Mint([]byte(hsKey), httpapi.Claims{Subject: "svc", Role: httpapi.RoleService, ExpiresAt: jwtExp()})
	if err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name string
		got  func() (int, string)
		want int
	}{
		{"api, RS256 user", func() (int, string) { return call(api, "/v1/jobs", user) }, 200},
		{"api, ES256 user", func() (int, string) { return call(api, "/v1/jobs", userES) }, 200},
		{"schedules, RS256 user", func() (int, string) { return call(schedules, "/v1/schedules", user) }, 200},
		{"uploads, a user's unknown upload", func() (int, string) { return call(uploads, "/v1/uploads/upl_00000000000000000000000000", user) }, 404},
		{"admin, a user", func() (int, string) { return call(admin, "/v1/admin/overview", user) }, 403},
		{"admin, the issuer's admin", func() (int, string) { return call(admin, "/v1/admin/breakers", admin1) }, 200},
		{"admin, an HS256 service token", func() (int, string) { return call(admin, "/v1/admin/breakers", hs) }, 200},
		{"stream, a user on the admin stream", func() (int, string) { return callStream("/v1/admin/events", user) }, 403},
	} {
		if status, body := tc.got(); status != tc.want {
			t.Errorf("%s: %d %s, want %d", tc.name, status, body, tc.want)
		}
	}

	other := newIssuer(t)
	refused := map[string]string{
		"another audience": idp.Token(t, false, map[string]any{"sub": "u", "aud": "someone-else"}),
		"another issuer":   other.Token(t, false, map[string]any{"sub": "u", "aud": "conveyor-test"}),
		"expired":          idp.Token(t, true, map[string]any{"sub": "u", "aud": "conveyor-test", "exp": 1, "iat": 0}),
	}
	for name, tok := range refused {
		for fn, h := range map[string]httpFn{"api": api, "admin": admin, "uploads": uploads, "schedules": schedules} {
			path := map[string]string{"api": "/v1/jobs", "admin": "/v1/admin/breakers", "uploads": "/v1/uploads/upl_x", "schedules": "/v1/schedules"}[fn]
			status, body := call(h, path, tok)
			var e struct {
				Error struct{ Code, Message string } `json:"error"`
			}
			if status != http.StatusUnauthorized || json.Unmarshal([]byte(body), &e) != nil || e.Error.Code != "unauthorized" || e.Error.Message == "" {
				t.Errorf("%s, %s function: %d %s, want 401 {\"error\":{\"code\":\"unauthorized\",…}}", name, fn, status, body)
			}
		}
		if status, body := callStream("/v1/events", tok); status != http.StatusUnauthorized || !strings.Contains(body, `"unauthorized"`) {
			t.Errorf("%s, stream function: %d %s, want 401", name, status, body)
		}
	}
	// One fetch per function instance (each has its own cache), none per token.
	if n := idp.KeySetFetches.Load(); n != 5 {
		t.Errorf("%d key set fetches, want 5 (one per function)", n)
	}
}

func jwtExp() time.Time { return time.Now().Add(time.Hour) }
