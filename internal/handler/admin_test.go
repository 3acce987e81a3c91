package handler_test

import (
	"net/http"
	"testing"

	"github.com/conveyor/conveyor/internal/aws/esm"
	"github.com/conveyor/conveyor/internal/aws/queue"
	"github.com/conveyor/conveyor/internal/config"
	"github.com/conveyor/conveyor/internal/handler"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/resources"
	"github.com/conveyor/conveyor/localstack/awstest"
)

// TestServesTheAdminRoutes wires the function as its binary does, against
// the emulator: the overview answers an admin, a service token may read
// but not write, a user token and a missing one are refused, and the
// users' routes are not this function's.
func TestServesTheAdminRoutes(t *testing.T) {
	t.Parallel()
	f := awstest.Provision(t).HTTPFunc(t, resources.FuncAdmin, handler.NewAdminWith(onAWS))
	for _, c := range []struct {
		method, path, role string
		want               int
	}{
		{http.MethodGet, "/v1/admin/overview", "admin", http.StatusOK},
		{http.MethodGet, "/v1/admin/overview", "service", http.StatusOK},
		{http.MethodGet, "/v1/admin/overview", "user", http.StatusForbidden},
		{http.MethodGet, "/v1/admin/overview", "", http.StatusUnauthorized},
		{http.MethodPost, "/v1/admin/tiers/low/pause", "service", http.StatusForbidden},
		{http.MethodGet, "/v1/jobs", "admin", http.StatusNotFound},
	} {
		if got := f.Call(c.method, c.path, f.Token("op-"+c.role, c.role), "").StatusCode; got != c.want {
			t.Errorf("%s %s as %q: %d, want %d", c.method, c.path, c.role, got, c.want)
		}
	}
}

// onAWS is the admin function's platform in AWS, as its main makes it.
func onAWS(env handler.Env, client *queue.Client) handler.AdminPlatform {
	return handler.AdminOnAWS(env, client, esm.New(env.AWS, env.Config.ESMUUIDs))
}

// TestPlatforms: in AWS, DLQs are redriven by move tasks (a selection by
// receive/send/delete) and tiers switched through their mappings; the
// local stand-ins have neither. Which one a function gets is its caller's
// choice, whatever the configuration says.
func TestAdminPlatforms(t *testing.T) {
	t.Parallel()
	uuids := map[job.Tier]string{job.Low: "uuid-low"}
	env := handler.Env{Config: config.Config{Env: "prod-en", ESMUUIDs: uuids}}.WithDefaults()
	aws := onAWS(env, nil)
	if m, ok := aws.Mover.(queue.TaskMover); !ok {
		t.Errorf("AWS mover %T, want queue.TaskMover", aws.Mover)
	} else if _, ok := m.Fallback.(queue.SQSMover); !ok {
		t.Errorf("AWS mover's fallback %T, want queue.SQSMover", m.Fallback)
	}
	if sw, ok := aws.Switch.(esm.Switch); !ok || sw.UUIDs[job.Low] != "uuid-low" {
		t.Errorf("AWS switch %#v, want esm.Switch with the configured mappings", aws.Switch)
	}
	local := handler.AdminLocal(env, nil)
	if _, ok := local.Mover.(queue.SQSMover); !ok {
		t.Errorf("local mover %T, want queue.SQSMover", local.Mover)
	}
	if local.Switch != nil {
		t.Errorf("local switch %T, want none", local.Switch)
	}
}
