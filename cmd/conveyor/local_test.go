package main

import (
	"encoding/json"
	"errors"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/conveyor/conveyor/localstack/admintest"
	"github.com/conveyor/conveyor/localstack/stack"
	"github.com/conveyor/conveyor/localstack/stacktest"
)

// TestAgainstTwoLocalStacks runs the CLI against two real local stacks at
// once (two isolated copies of the resources on the emulator), plus one
// environment that is down.
func TestAgainstTwoLocalStacks(t *testing.T) {
	t.Parallel()
	envs := map[string]any{}
	for _, name := range []string{"local-a", "local-b"} {
		b := stacktest.Setup(t, nil, stack.Options{DisablePollers: true})
		srv := admintest.Serve(t, b.Stack)
		envs[name] = map[string]string{"url": srv.URL, "token": b.Token("conveyor-cli", "admin", "")}
	}
	down := httptest.NewServer(nil)
	down.Close()
	envs["local-down"] = map[string]string{"url": down.URL, "token": "whatever"}
	raw, _ := json.Marshal(map[string]any{"environments": envs})
	config := filepath.Join(t.TempDir(), "environments.json")
	if err := os.WriteFile(config, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (string, error) {
		out, _, err := runCLI(t, nil, append(args, "--config", config)...)
		return portRE.ReplaceAllString(out, "127.0.0.1:PORT"), err
	}
	if out, err := run("tier", "pause", "low", "--env", "local-a"); err != nil || out != "local-a: tier low is paused\n" {
		t.Fatalf("pause: %q %v", out, err)
	}
	out, err := run("overview")
	if !errors.Is(err, errPartial) {
		t.Errorf("exit: %v", err)
	}
	golden(t, "overview_local", out)
}
