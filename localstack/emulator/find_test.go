package emulator_test

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/conveyor/conveyor/localstack/emulator"
)

// TestAStackOutsideTheRepositoryRunsPatchedMoto: a stack run outside the
// repository (make fuzz's, in a directory of its own) finds no .venv by
// walking up; CONVEYOR_MOTO_PYTHON names the Python to run moto with, and
// moto then runs with the repository's patches (moto_server.py), as every
// other stack does. Stock moto_server spins a core per long poll on a FIFO
// queue whose messages wait behind a group in flight.
func TestAStackOutsideTheRepositoryRunsPatchedMoto(t *testing.T) {
	root, err := emulator.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	python := filepath.Join(root, ".venv", "bin", "python")
	t.Chdir(t.TempDir())
	t.Setenv("CONVEYOR_MOTO_SERVER", "")
	t.Setenv("CONVEYOR_MOTO_PYTHON", python)
	cmd, err := emulator.FindCommand()
	if err != nil {
		t.Fatal(err)
	}
	if len(cmd) != 3 || cmd[0] != python || cmd[1] != "-c" || !slices.ContainsFunc(cmd[2:], func(s string) bool { return len(s) > 1000 }) {
		t.Fatalf("FindCommand = %.120q, want %s -c <moto_server.py>", cmd, python)
	}
}
