package handler_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/resources"
)

// linkedByAll is what every function's binary links: the AWS SDK services
// whose packages its imports reach (each costs the binary the service's
// package inits at every cold start, called or not; a service's calls are
// linked only where a function creates its client). Every function's main
// imports internal/handler, which holds every function's wiring, so every
// function links the services the wiring of any of them reaches: DynamoDB,
// SQS, S3, Scheduler, KMS and Secrets Manager. The adapters of one function
// alone are chosen by its main (mainLinks): the admin function's tier
// switch (Lambda's event source mappings) and the relay's bus
// (EventBridge), whose service packages' inits are the costliest (0.65 and
// 0.4 ms). Nothing of a function imports internal/aws/awsclient (the SDK's
// shared-configuration loader, with SSO, SSO OIDC, sign-in and STS): a
// deployed function's configuration comes from internal/aws/awsenv. A function
// that starts linking another service — through an import that drags a
// client for a type or a constant — fails here, naming it; `go list -deps`
// shows the import chain.
//
// Bootstraps (`make build`, linux/arm64, stripped, MB) and cold starts:
// docs/performance.md, "Bootstraps and cold start".
var linkedByAll = []string{"dynamodb", "kms", "s3", "scheduler", "secretsmanager", "sqs"}

// mainLinks are the services a function's main adds, for the adapter only
// it uses.
var mainLinks = map[string][]string{resources.FuncAdmin: {"lambda"}, resources.FuncRelay: {"eventbridge"}}

// tzdataLinkers are the functions whose main embeds the time zone database
// (0.45 MB): the one that loads zones.
var tzdataLinkers = []string{resources.FuncSchedules}

// TestEachFunctionLinksOnlyWhatItUses lists each function's dependencies
// as `make build` builds it (linux/arm64, resources.LambdaBuildTags): the SDK
// services of linkedByAll and its mainLinks, and time/tzdata for
// tzdataLinkers.
func TestEachFunctionLinksOnlyWhatItUses(t *testing.T) {
	t.Parallel()
	goTool, err := exec.LookPath("go")
	if err != nil {
		goTool = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	for _, fn := range resources.For(job.Local).Functions {
		t.Run(fn, func(t *testing.T) {
			t.Parallel()
			want := slices.Concat(linkedByAll, mainLinks[fn])
			if slices.Contains(tzdataLinkers, fn) {
				want = append(want, "time/tzdata")
			}
			slices.Sort(want)
			cmd := exec.Command(goTool, "list", "-tags", resources.LambdaBuildTags, "-deps", "github.com/conveyor/conveyor/functions/"+fn)
			cmd.Env = append(os.Environ(), "GOOS=linux", "GOARCH=arm64", "CGO_ENABLED=0")
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("go list -deps functions/%s: %v", fn, err)
			}
			var got []string
			for _, pkg := range strings.Fields(string(out)) {
				if svc, ok := strings.CutPrefix(pkg, "github.com/aws/aws-sdk-go-v2/service/"); ok && !strings.Contains(svc, "/") {
					got = append(got, svc)
				}
				if pkg == "time/tzdata" {
					got = append(got, pkg)
				}
			}
			slices.Sort(got)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("functions/%s links (-budget +linked):\n%s", fn, diff)
			}
		})
	}
}
