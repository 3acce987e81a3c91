package handler_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/conveyor/conveyor/internal/config"
	"github.com/conveyor/conveyor/internal/handler"
	"github.com/conveyor/conveyor/internal/resources"
	"github.com/conveyor/conveyor/localstack/awstest"
)

// TestServesTheRoutes wires the function as its binary does: the health
// check answers, a user route refuses a request without a token.
func TestServesTheRoutes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := awstest.Provision(t).Function(t, resources.FuncAPI, map[string]string{config.VarJWTSecret: strings.Repeat("k", 32)})
	h, err := handler.NewAPI(ctx, env)
	if err != nil {
		t.Fatal(err)
	}
	get := func(path string) int {
		req := events.APIGatewayV2HTTPRequest{RawPath: path, RequestContext: events.APIGatewayV2HTTPRequestContext{
			HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: http.MethodGet, Path: path}}}
		resp, err := h(ctx, req)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		return resp.StatusCode
	}
	if got := get("/healthz"); got != http.StatusOK {
		t.Errorf("GET /healthz: %d, want 200", got)
	}
	if got := get("/v1/jobs"); got != http.StatusUnauthorized {
		t.Errorf("GET /v1/jobs without a token: %d, want 401", got)
	}
	// The admin routes are the admin function's: API Gateway never sends
	// them here, and this router does not know them.
	if got := get("/v1/admin/overview"); got != http.StatusNotFound {
		t.Errorf("GET /v1/admin/overview: %d, want 404", got)
	}
}

// TestPlatforms: in AWS the dashboard is sent with HSTS; the local
// stand-in serves it over plain HTTP. Which one a function gets is its
// caller's choice, whatever the configuration says.
func TestAPIPlatforms(t *testing.T) {
	t.Parallel()
	env := handler.Env{Config: config.Config{Env: "prod-en"}}.WithDefaults()
	if handler.APIOnAWS(env).Dashboard.Local {
		t.Error("AWS dashboard served as local (no HSTS)")
	}
	if !handler.APILocal(env).Dashboard.Local {
		t.Error("local dashboard served with HSTS")
	}
}
