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
	h := awstest.Handler(t, Name, map[string]string{config.VarJWTSecret: strings.Repeat("k", 32)}, New)
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

// TestPlatforms: in AWS, DLQs are redriven by move tasks (a selection by
// receive/send/delete), tiers switched through their mappings and the
// dashboard sent with HSTS; the local stand-ins have neither move tasks
// nor mappings, and serve the dashboard over plain HTTP. Which one a
// function gets is its caller's choice, whatever the configuration says.
func TestPlatforms(t *testing.T) {
	t.Parallel()
	uuids := map[job.Tier]string{job.Low: "uuid-low"}
	env := handler.Env{Config: config.Config{Env: "prod-en", ESMUUIDs: uuids}}.WithDefaults()
	aws := AWS(env, nil)
	if m, ok := aws.Mover.(admin.TaskMover); !ok {
		t.Errorf("AWS mover %T, want admin.TaskMover", aws.Mover)
	} else if _, ok := m.Fallback.(admin.SQSMover); !ok {
		t.Errorf("AWS mover's fallback %T, want admin.SQSMover", m.Fallback)
	}
	if sw, ok := aws.Switch.(esm.Switch); !ok || sw.UUIDs[job.Low] != "uuid-low" {
		t.Errorf("AWS switch %#v, want esm.Switch with the configured mappings", aws.Switch)
	}
	if aws.Dashboard.Local {
		t.Error("AWS dashboard served as local (no HSTS)")
	}
	local := Local(env, nil)
	if _, ok := local.Mover.(admin.SQSMover); !ok {
		t.Errorf("local mover %T, want admin.SQSMover", local.Mover)
	}
	if local.Switch != nil || !local.Dashboard.Local {
		t.Errorf("local: switch %T, dashboard %+v; want no switch, a local dashboard", local.Switch, local.Dashboard)
	}
}
