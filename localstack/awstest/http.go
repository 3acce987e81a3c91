package awstest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/conveyor/conveyor/internal/config"
	"github.com/conveyor/conveyor/internal/handler"
	"github.com/conveyor/conveyor/internal/httpapi"
)

// HTTPFunction calls an HTTP API function's handler (payload v2) as API
// Gateway does, with tokens signed by Key: what the tests of the
// functions behind the HTTP API share.
type HTTPFunction struct {
	T       testing.TB
	Handler func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error)
	// Key is the JWT key the function was configured with.
	Key string
}

// HTTPFunc builds the HTTP function fn with build, as its binary builds
// it, on e's resources and a JWT key of its own.
func (e Env) HTTPFunc(t testing.TB, fn string, build func(context.Context, handler.Env) (handler.HTTPHandler, error)) HTTPFunction {
	t.Helper()
	key := strings.Repeat("k", 32)
	h, err := build(context.Background(), e.Function(t, fn, map[string]string{config.VarJWTSecret: key}))
	if err != nil {
		t.Fatal(err)
	}
	return HTTPFunction{T: t, Handler: h, Key: key}
}

// Token is a token of role (user, admin, service; "" for none) for sub.
func (f HTTPFunction) Token(sub, role string) string {
	if role == "" {
		return ""
	}
	s, err := httpapi.Mint([]byte(f.Key), httpapi.Claims{Subject: sub, Role: httpapi.Role(role), Plan: "pro", ExpiresAt: time.Now().Add(time.Hour)})
	if err != nil {
		f.T.Fatal(err)
	}
	return s
}

// Call sends method and path with token (none when "") and a JSON body
// (none when ""), and returns the answer.
func (f HTTPFunction) Call(method, path, token, body string) events.APIGatewayV2HTTPResponse {
	f.T.Helper()
	req := events.APIGatewayV2HTTPRequest{RawPath: path, Headers: map[string]string{}, Body: body,
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: method, Path: path}}}
	if token != "" {
		req.Headers["authorization"] = "Bearer " + token
	}
	if body != "" {
		req.Headers["content-type"] = "application/json"
	}
	resp, err := f.Handler(context.Background(), req)
	if err != nil {
		f.T.Fatalf("%s %s: %v", method, path, err)
	}
	return resp
}
