package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/conveyor/conveyor/localstack/emulator"
)

// TestRunsTheCommandAgainstEmulatorsItStops: the command sees both
// endpoints, answering, its status is ours, and both emulators are gone
// once run returns.
func TestRunsTheCommandAgainstEmulatorsItStops(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	seen := filepath.Join(dir, "endpoints")
	var stderr bytes.Buffer
	code := withEmulators([]string{"-logs", filepath.Join(dir, "logs"), "--", "sh", "-c",
		`echo "$AWS_ENDPOINT_URL $AWS_ENDPOINT_URL_DYNAMODB" > "$0"; exit 3`, seen}, &stderr)
	if code != 3 {
		t.Fatalf("status %d, want the command's 3; stderr:\n%s", code, &stderr)
	}
	raw, err := os.ReadFile(seen)
	if err != nil {
		t.Fatal(err)
	}
	eps := strings.Fields(string(raw))
	if len(eps) != 2 || eps[0] == eps[1] {
		t.Fatalf("the command saw endpoints %q, want moto's and DynamoDB Local's", raw)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := emulator.Ready(ctx, eps[0]); err == nil {
		t.Errorf("moto at %s still answers after run returned", eps[0])
	}
	if err := emulator.DynamoDBReady(ctx, eps[1]); err == nil {
		t.Errorf("DynamoDB Local at %s still answers after run returned", eps[1])
	}
	for _, f := range []string{"moto.log", "dynamodb-local.log"} {
		if _, err := os.Stat(filepath.Join(dir, "logs", f)); err != nil {
			t.Errorf("no emulator log: %v", err)
		}
	}
	if !strings.Contains(stderr.String(), filepath.Join(dir, "logs")) {
		t.Errorf("stderr does not say where the logs are:\n%s", &stderr)
	}
}

func TestWithoutACommandItSaysHowToUseIt(t *testing.T) {
	t.Parallel()
	var stderr bytes.Buffer
	if code := withEmulators(nil, &stderr); code != 2 {
		t.Errorf("status %d, want 2", code)
	}
	if !strings.Contains(stderr.String(), "usage: conveyor-local with-emulators") {
		t.Errorf("stderr:\n%s", &stderr)
	}
}
