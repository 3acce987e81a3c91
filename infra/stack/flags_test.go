package stack_test

import (
	"archive/tar"
	"compress/gzip"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/jsii-runtime-go"
	"github.com/google/go-cmp/cmp"
)

// recommendedFlags evaluates cx-api's CURRENTLY_RECOMMENDED_FLAGS (what
// `cdk init` writes into a new project's cdk.json) of the aws-cdk-lib the
// Go bindings embed, with the Node that runs jsii.
func recommendedFlags(t *testing.T) map[string]any {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/aws/aws-cdk-go/awscdk/v2").Output()
	if err != nil {
		t.Fatalf("locating the awscdk module: %v", err)
	}
	tarballs, _ := filepath.Glob(filepath.Join(strings.TrimSpace(string(out)), "jsii", "aws-cdk-lib-*.tgz"))
	if len(tarballs) != 1 {
		t.Fatalf("aws-cdk-lib tarballs in the awscdk module: %v, want one", tarballs)
	}
	f, err := os.Open(tarballs[0])
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(h.Name, "package/cx-api/lib/") || !strings.HasSuffix(h.Name, ".js") {
			continue
		}
		p := filepath.Join(dir, filepath.FromSlash(h.Name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	script := `process.stdout.write(JSON.stringify(require(process.argv[1]).CURRENTLY_RECOMMENDED_FLAGS))`
	js, err := exec.Command("node", "-e", script, filepath.Join(dir, "package", "cx-api", "lib", "features.js")).Output()
	if err != nil {
		t.Fatalf("evaluating cx-api's recommended flags: %v", err)
	}
	var flags map[string]any
	if err := json.Unmarshal(js, &flags); err != nil {
		t.Fatal(err)
	}
	if len(flags) < 50 {
		t.Fatalf("only %d recommended flags read", len(flags))
	}
	return flags
}

// infra/cdk.json holds exactly the recommended flags of the pinned
// aws-cdk-lib: a version bump that adds flags fails here until cdk.json
// is regenerated (make cdk-flags).
func TestCDKJSONHoldsTheRecommendedFlags(t *testing.T) {
	t.Parallel()
	got, err := cdkJSONContext()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(recommendedFlags(t), got); diff != "" {
		t.Errorf("infra/cdk.json context vs the pinned aws-cdk-lib's recommended flags (-want +got):\n%s", diff)
	}
}

// The app the tests synthesize reads cdk.json, as the CDK app does: every
// flag is set in its context.
func TestAppReadsCDKJSON(t *testing.T) {
	t.Parallel()
	stacks(t)
	want, err := cdkJSONContext()
	if err != nil {
		t.Fatal(err)
	}
	jsiiMu.Lock()
	defer jsiiMu.Unlock()
	for k, v := range want {
		got := testApp.Node().TryGetContext(jsii.String(k))
		if !cmp.Equal(normal(v), normal(got)) {
			t.Errorf("app context %s = %v, want %v (cdk.json)", k, got, v)
		}
	}
}

// normal makes JSON values from cdk.json and from jsii comparable.
func normal(v any) any {
	b, _ := json.Marshal(v)
	var out any
	_ = json.Unmarshal(b, &out)
	return out
}
