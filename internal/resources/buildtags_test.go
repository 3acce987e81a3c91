package resources_test

import (
	"os"
	"strings"
	"testing"

	"github.com/conveyor/conveyor/internal/resources"
)

// TestMakefileBuildsWithTheLambdaBuildTags: `make build` (what deploys)
// and the local runtime and bench (resources.LambdaBuildTags) build the
// functions alike.
func TestMakefileBuildsWithTheLambdaBuildTags(t *testing.T) {
	b, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	var tags string
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "LAMBDA_TAGS := "); ok {
			tags = strings.TrimSpace(v)
		}
	}
	if tags != resources.LambdaBuildTags {
		t.Errorf("Makefile LAMBDA_TAGS = %q, resources.LambdaBuildTags = %q", tags, resources.LambdaBuildTags)
	}
	if !strings.Contains(string(b), "-tags $(LAMBDA_TAGS)") {
		t.Error("make build does not build with $(LAMBDA_TAGS)")
	}
}
