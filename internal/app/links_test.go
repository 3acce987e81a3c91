package app

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

// linked is what each function's binary may link: the AWS SDK services
// whose clients it creates (each costs its binary the service's package
// inits at every cold start, called or not) and the embedded time zone
// database (0.45 MB). docs/performance.md, "Bootstraps and cold start", says
// the same. A function that starts linking another service — through an
// import that drags a client for a type or a constant — fails here, naming
// it and the import chain to look for with `go list -deps`.
//
// The HTTP functions' routes are one package (internal/httpapi), so each of
// them links every route group's domain package. internal/uploads names
// internal/aws/bucket's value types (a presigned PUT, an object's head), so
// the four link the S3 adapter and its SDK, though only uploads and confirm
// create an S3 client.
var linked = map[string][]string{
	resources.FuncAPI:       {"dynamodb", "kms", "s3", "secretsmanager", "sqs"},
	resources.FuncAdmin:     {"dynamodb", "lambda", "s3", "secretsmanager", "sqs"},
	resources.FuncUploads:   {"dynamodb", "s3", "secretsmanager", "sqs"},
	resources.FuncSchedules: {"dynamodb", "s3", "scheduler", "secretsmanager", "sqs", "time/tzdata"},
	resources.FuncConfirm:   {"dynamodb", "s3", "sqs"},
	resources.FuncPublisher: {"dynamodb", "kms", "s3", "secretsmanager", "sqs"},
	resources.FuncRecovery:  {"dynamodb", "kms", "s3", "scheduler", "sqs"},
	resources.FuncRelay:     {"dynamodb", "eventbridge", "sqs"},
	resources.FuncStream:    {"dynamodb", "secretsmanager", "sqs"},
	resources.FuncSystem:    {"dynamodb", "kms", "sqs"},
}

// TestEachFunctionLinksOnlyWhatItUses lists each function's dependencies
// as `make build` builds it (linux/arm64, resources.LambdaBuildTags): the SDK
// services in its budget. A kind is one package, front and Work: a function
// that submits jobs links its kinds whole (docs/performance.md weighs it).
func TestEachFunctionLinksOnlyWhatItUses(t *testing.T) {
	t.Parallel()
	goTool, err := exec.LookPath("go")
	if err != nil {
		goTool = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	fns := slices.Clone(resources.For(job.Local).Functions)
	slices.Sort(fns)
	want := make([]string, 0, len(linked))
	for fn := range linked {
		want = append(want, fn)
	}
	slices.Sort(want)
	if diff := cmp.Diff(want, fns); diff != "" {
		t.Fatalf("functions with a link budget (-budget +definition):\n%s", diff)
	}
	for _, fn := range fns {
		t.Run(fn, func(t *testing.T) {
			t.Parallel()
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
			if diff := cmp.Diff(linked[fn], got); diff != "" {
				t.Errorf("functions/%s links (-budget +linked):\n%s", fn, diff)
			}
		})
	}
}
