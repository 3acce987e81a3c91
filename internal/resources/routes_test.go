package resources_test

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/resources"
)

// TestFunctionForPath: each route group of API.md goes to its function, as
// API Gateway's routes send it (the schedules' collection has a route of
// its own; a prefix with its trailing slash goes with the paths under it,
// as the local gateway sent "/v1/admin/" before), and everything else —
// including look-alike paths — to the api function.
func TestFunctionForPath(t *testing.T) {
	t.Parallel()
	for path, want := range map[string]string{
		"/v1/uploads/sign":          resources.FuncUploads,
		"/v1/uploads/upl_1/confirm": resources.FuncUploads,
		"/v1/uploads/upl_1":         resources.FuncUploads,
		"/v1/uploads/a/b/c":         resources.FuncUploads,
		"/v1/uploads":               resources.FuncAPI,
		"/v1/uploads/":              resources.FuncUploads,
		"/v1/uploadsx/sign":         resources.FuncAPI,
		"/v1/schedules":             resources.FuncSchedules,
		"/v1/schedules/sch_1":       resources.FuncSchedules,
		"/v1/schedules/sch_1/pause": resources.FuncSchedules,
		"/v1/schedules/":            resources.FuncSchedules,
		"/v1/schedulesx":            resources.FuncAPI,
		"/v1/admin/overview":        resources.FuncAdmin,
		"/v1/admin":                 resources.FuncAPI,
		"/v1/jobs":                  resources.FuncAPI,
		"/v1/webhooks/secret":       resources.FuncAPI,
		"/dashboard/":               resources.FuncAPI,
		"/":                         resources.FuncAPI,
		"/V1/uploads/sign":          resources.FuncAPI,
		"/v2/uploads/sign":          resources.FuncAPI,
		"/v1/account/connection":    resources.FuncAPI,
		"/v1/jobs/job_1/events":     resources.FuncAPI,
	} {
		if got := resources.FunctionForPath(path); got != want {
			t.Errorf("FunctionForPath(%q) = %s, want %s", path, got, want)
		}
	}
}

// TestHTTPRoutesAreDeployedFunctions: every function of the route table is
// deployed, verifies tokens and has a size; the route keys are API
// Gateway's.
func TestHTTPRoutesAreDeployedFunctions(t *testing.T) {
	t.Parallel()
	fns := resources.For(job.Staging).Functions
	var keys []string
	for _, r := range resources.HTTPRoutes {
		if !slices.Contains(fns, r.Function) || !resources.ReadsJWTSecret(r.Function) {
			t.Errorf("%s: deployed %v, verifies tokens %v", r.Function, slices.Contains(fns, r.Function), resources.ReadsJWTSecret(r.Function))
		}
		if resources.FunctionSizes[r.Function].Timeout >= 30e9 {
			t.Errorf("%s: timeout %v, want under API Gateway's 30 s", r.Function, resources.FunctionSizes[r.Function].Timeout)
		}
		keys = append(keys, r.RouteKeys()...)
	}
	want := []string{"ANY /v1/admin/{proxy+}", "ANY /v1/uploads/{proxy+}", "ANY /v1/schedules", "ANY /v1/schedules/{proxy+}"}
	if diff := cmp.Diff(want, keys); diff != "" {
		t.Errorf("route keys (-want +got):\n%s", diff)
	}
}
