package main

import (
	"encoding/json"
	"errors"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/conveyor/conveyor/localstack/awstest"
	"github.com/conveyor/conveyor/localstack/stack"
)

// TestAgainstTwoLocalStacks runs the CLI against two real local stacks at
// once (two isolated copies of the resources on the emulator), plus one
// environment that is down.
func TestAgainstTwoLocalStacks(t *testing.T) {
	t.Parallel()
	envs := map[string]any{}
	for _, name := range []string{"local-a", "local-b"} {
		b := awstest.Setup(t, nil, stack.Options{DisablePollers: true})
		srv := awstest.ServeAdmin(t, b.Stack)
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

// TestUnreachableStackSaysWhatToRun: a local env file whose stack is gone,
// or no env file at all, is told in words, never as a raw dial error.
func TestUnreachableStackSaysWhatToRun(t *testing.T) {
	t.Parallel()
	down := httptest.NewServer(nil)
	down.Close()
	dir := t.TempDir()
	envFile := filepath.Join(dir, "env")
	if err := os.WriteFile(envFile, []byte("export CONVEYOR_API_URL='"+down.URL+"'\nexport CONVEYOR_JWT_SECRET='s3cret'\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "env.9090"), []byte("export CONVEYOR_API_URL='http://127.0.0.1:9090'\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	home := map[string]string{"HOME": dir, "XDG_CONFIG_HOME": dir} // no environments file
	for _, args := range [][]string{{"overview"}, {"jobs", "list"}, {"jobs", "stop", "job_aaaaaaaaaaaaaaaaaaaaaaaaaa"}} {
		out, stderr, code := runMain(t, home, append(args, "--env", "local", "--env-file", envFile)...)
		want := "no Conveyor stack answers at " + down.URL + ": start one with `make run`, or pass --env-file (the address came from " + envFile + "; other stacks wrote " + filepath.Join(dir, "env.9090") + ")"
		// overview prints each environment's error on stdout, the others on stderr
		if code != exitFailure || !strings.Contains(out+stderr, want) || strings.Contains(out+stderr, "dial tcp") {
			t.Errorf("%v: exit %d\nstdout %q\nstderr %q\nwant %q", args, code, out, stderr, want)
		}
	}
	_, stderr, code := runMain(t, home, "jobs", "list", "--env-file", filepath.Join(dir, "missing"))
	if code != exitFailure || !strings.Contains(stderr, "start one with `make run`") {
		t.Errorf("no env file: %d %q", code, stderr)
	}
}
