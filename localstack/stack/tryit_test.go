package stack_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/conveyor/conveyor/localstack/stack"
)

// tryIt is the README's Try-it block: the first sh block after the
// "### Try it" heading.
func tryIt(t *testing.T, root string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(raw), "\n### Try it\n")
	if !ok {
		t.Fatal("README.md has no \"### Try it\" section")
	}
	_, rest, ok = strings.Cut(rest, "```sh\n")
	block, _, closed := strings.Cut(rest, "```\n")
	if !ok || !closed {
		t.Fatal("the Try-it section has no sh block")
	}
	return block
}

// TestTryItBlock runs the README's Try-it block as written, twice, against
// a stack started as `make run` starts it (each function's own binary),
// from a directory laid out like the checkout whose .local/env is this
// stack's. Each run must confirm its upload, stream its job to the end and
// publish it: the second run proves the block can be run again.
func TestTryItBlock(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	block := tryIt(t, root)
	b := setupBinaries(t, nil, stack.Options{})

	// A checkout of links, but for .local, which holds this stack's env.
	dir := t.TempDir()
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() == ".local" || e.Name() == ".git" {
			continue
		}
		if err := os.Symlink(filepath.Join(root, e.Name()), filepath.Join(dir, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Stack.WriteEnv(filepath.Join(dir, ".local", "env")); err != nil {
		t.Fatal(err)
	}
	for run := 1; run <= 2; run++ {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		cmd := exec.CommandContext(ctx, "bash", "-c", "set -euo pipefail\n"+block)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		cancel()
		text := string(out)
		if err != nil {
			t.Fatalf("run %d: %v\n%s", run, err, text)
		}
		for _, want := range []string{`"status":"ok"`, "event: snapshot", "event: job.succeeded", `"status":"succeeded"`, `"deviationId"`, `"title":"A cat"`} {
			if !strings.Contains(text, want) {
				t.Errorf("run %d: the output lacks %s:\n%s", run, want, text)
			}
		}
		if strings.Contains(text, `"error":{`) {
			t.Errorf("run %d: an error answer:\n%s", run, text)
		}
	}
}
