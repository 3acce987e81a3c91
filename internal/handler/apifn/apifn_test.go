package apifn

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/conveyor/conveyor/internal/admin"
	"github.com/conveyor/conveyor/internal/admin/esm"
	"github.com/conveyor/conveyor/internal/config"
	"github.com/conveyor/conveyor/internal/handler"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/localstack/awstest"
)

// TestServesTheRoutes wires the function as its binary does: the health
// check answers, a user route refuses a request without a token.
func TestServesTheRoutes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := awstest.Provision(t).Function(t, Name, map[string]string{config.VarJWTSecret: strings.Repeat("k", 32)})
	h, err := New(ctx, env)
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
}

// TestMoversAreAWSOnesOutsideTheLocalEnvironment: in AWS, DLQs are
// redriven by move tasks and tiers switched through their mappings; the
// local environment has neither.
func TestMoversAreAWSOnesOutsideTheLocalEnvironment(t *testing.T) {
	t.Parallel()
	uuids := map[job.Tier]string{job.Low: "uuid-low"}
	env := handler.Env{Config: config.Config{Env: job.Local, ESMUUIDs: uuids}}.WithDefaults()
	if m, s := Movers(env, nil); m != nil || s != nil {
		t.Errorf("local: mover %T, switch %T, want none", m, s)
	}
	env.Config.Env = "prod-en"
	m, s := Movers(env, nil)
	if _, ok := m.(admin.TaskMover); !ok {
		t.Errorf("mover %T, want admin.TaskMover", m)
	}
	if sw, ok := s.(esm.Switch); !ok || sw.UUIDs[job.Low] != "uuid-low" {
		t.Errorf("switch %#v, want esm.Switch with the configured mappings", s)
	}
}
