package httpapi

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/conveyor/conveyor/internal/auth"
)

var secret = []byte("s3cret")

func router() *Router {
	rt := NewRouter(Options{Verifier: auth.NewVerifier(secret, nil), Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)), MaxBody: 64})
	type body struct {
		Name  string   `json:"name"`
		Count int      `json:"count"`
		Tags  []string `json:"tags"`
	}
	rt.Handle("POST", "/things", AnyUser, func(r *Request) (Response, error) {
		var b body
		if err := Decode(r, &b); err != nil {
			return Response{}, err
		}
		return JSON(201, b), nil
	})
	rt.Handle("GET", "/things/{id}", AnyUser, func(r *Request) (Response, error) { return JSON(200, r.Params), nil })
	rt.Handle("GET", "/admin", AdminOnly, func(r *Request) (Response, error) { return JSON(200, "ok"), nil })
	rt.Handle("GET", "/read", ReadOnly, func(r *Request) (Response, error) { return JSON(200, "ok"), nil })
	rt.Handle("GET", "/boom", Public, func(r *Request) (Response, error) { panic("secret detail") })
	rt.Handle("GET", "/fail", Public, func(r *Request) (Response, error) { return Response{}, errors.New("db password=hunter2") })
	return rt
}

func ev(method, path, token, body string, hdr map[string]string) events.APIGatewayV2HTTPRequest {
	h := map[string]string{"content-type": "application/json"}
	for k, v := range hdr {
		h[strings.ToLower(k)] = v
	}
	if token != "" {
		h["authorization"] = "Bearer " + token
	}
	return events.APIGatewayV2HTTPRequest{RawPath: path, Headers: h, Body: body,
		RequestContext: events.APIGatewayV2HTTPRequestContext{HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: method, Path: path}}}
}

func tok(t *testing.T, role string) string {
	s, err := auth.Mint(secret, auth.Claims{Subject: "u1", Role: auth.Role(role), Plan: "free", ExpiresAt: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestServe(t *testing.T) {
	t.Parallel()
	rt := router()
	user, admin, service := tok(t, "user"), tok(t, "admin"), tok(t, "service")
	b64 := events.APIGatewayV2HTTPRequest{}
	b64 = ev("POST", "/things", user, base64.StdEncoding.EncodeToString([]byte(`{"name":"x"}`)), nil)
	b64.IsBase64Encoded = true
	tests := []struct {
		name   string
		ev     events.APIGatewayV2HTTPRequest
		status int
		code   string
		field  string
	}{
		{"ok", ev("POST", "/things", user, `{"name":"a","count":2}`, nil), 201, "", ""},
		{"base64 body", b64, 201, "", ""},
		{"bad json", ev("POST", "/things", user, `{"name":`, nil), 400, "invalid_request", ""},
		{"unknown field", ev("POST", "/things", user, `{"nope":1}`, nil), 400, "unknown_field", "nope"},
		{"wrong type", ev("POST", "/things", user, `{"count":"two"}`, nil), 400, "invalid_request", "count"},
		{"trailing data", ev("POST", "/things", user, `{"name":"a"} {}`, nil), 400, "invalid_request", ""},
		{"empty body", ev("POST", "/things", user, ``, nil), 400, "invalid_request", ""},
		{"too large by size", ev("POST", "/things", user, `{"name":"`+strings.Repeat("x", 100)+`"}`, nil), 413, "payload_too_large", ""},
		{"too large by header", ev("POST", "/things", user, `{}`, map[string]string{"Content-Length": "1000"}), 413, "payload_too_large", ""},
		{"wrong content type", ev("POST", "/things", user, `{}`, map[string]string{"Content-Type": "text/plain"}), 415, "unsupported_media_type", ""},
		{"json with charset", ev("POST", "/things", user, `{}`, map[string]string{"Content-Type": "application/json; charset=utf-8"}), 201, "", ""},
		{"no token", ev("GET", "/things/1", "", "", nil), 401, "unauthorized", ""},
		{"bad token", ev("GET", "/things/1", "junk", "", nil), 401, "unauthorized", ""},
		{"user on admin", ev("GET", "/admin", user, "", nil), 403, "forbidden", ""},
		{"service on admin", ev("GET", "/admin", service, "", nil), 403, "forbidden", ""},
		{"service reads", ev("GET", "/read", service, "", nil), 200, "", ""},
		{"user reads admin", ev("GET", "/read", user, "", nil), 403, "forbidden", ""},
		{"admin", ev("GET", "/admin", admin, "", nil), 200, "", ""},
		{"unknown path", ev("GET", "/nothing", user, "", nil), 404, "not_found", ""},
		{"wrong method", ev("DELETE", "/things", user, "", nil), 405, "method_not_allowed", ""},
		{"panic", ev("GET", "/boom", "", "", nil), 500, "internal", ""},
		{"error", ev("GET", "/fail", "", "", nil), 500, "internal", ""},
	}
	for _, tt := range tests {
		resp, err := rt.Serve(context.Background(), tt.ev)
		if err != nil {
			t.Fatalf("%s: Serve returned an error: %v", tt.name, err)
		}
		if resp.StatusCode != tt.status {
			t.Errorf("%s: status %d, want %d (%s)", tt.name, resp.StatusCode, tt.status, resp.Body)
			continue
		}
		if resp.Headers["X-Request-Id"] == "" || resp.Headers["Content-Type"] != "application/json" {
			t.Errorf("%s: headers %v", tt.name, resp.Headers)
		}
		if strings.Contains(resp.Body, "secret detail") || strings.Contains(resp.Body, "hunter2") {
			t.Errorf("%s: internal detail leaked: %s", tt.name, resp.Body)
		}
		if tt.code == "" {
			continue
		}
		var e struct {
			Error struct{ Code, Message, Field string } `json:"error"`
		}
		if err := json.Unmarshal([]byte(resp.Body), &e); err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if e.Error.Code != tt.code || e.Error.Message == "" || (tt.field != "" && e.Error.Field != tt.field) {
			t.Errorf("%s: error %+v, want code %s field %s", tt.name, e.Error, tt.code, tt.field)
		}
	}
	resp, _ := rt.Serve(context.Background(), ev("DELETE", "/things", user, "", nil))
	if resp.Headers["Allow"] != http.MethodPost {
		t.Errorf("Allow = %q", resp.Headers["Allow"])
	}
	resp, _ = rt.Serve(context.Background(), ev("GET", "/things/a%2Fb", user, "", nil))
	if !strings.Contains(resp.Body, `"id":"a/b"`) {
		t.Errorf("path parameter not unescaped: %s", resp.Body)
	}
}
