package emulator

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
)

// The DynamoDB emulators StartDynamoDB can run (DynamoDBOptions.Engine,
// $CONVEYOR_DYNAMODB_ENGINE).
const (
	// EngineDynamoDBLocal is DynamoDB Local, AWS's own emulator (a JVM over
	// SQLite): the default, and what the store's conformance run in
	// make test uses.
	EngineDynamoDBLocal = "dynamodb-local"
	// EngineDynoxide is dynoxide (crates.io dynoxide-rs), a native
	// DynamoDB emulator over SQLite: the same answers where the suite
	// looks, at a fraction of DynamoDB Local's processor time per request,
	// so make test runs its Go suite on it (docs/testing.md).
	EngineDynoxide = "dynoxide"
)

// Engine is the DynamoDB emulator to run: e when set, else
// $CONVEYOR_DYNAMODB_ENGINE, else DynamoDB Local.
func Engine(e string) (string, error) {
	if e == "" {
		e = os.Getenv("CONVEYOR_DYNAMODB_ENGINE")
	}
	switch e {
	case "", EngineDynamoDBLocal:
		return EngineDynamoDBLocal, nil
	case EngineDynoxide:
		return EngineDynoxide, nil
	}
	return "", fmt.Errorf("unknown DynamoDB emulator %q (CONVEYOR_DYNAMODB_ENGINE): %s or %s", e, EngineDynamoDBLocal, EngineDynoxide)
}

// DynoxideLink is where the Makefile links the dynoxide it installs,
// relative to the repository root.
const DynoxideLink = ".cache/dynoxide"

// FindDynoxide locates dynoxide: $CONVEYOR_DYNOXIDE, then the link the
// Makefile made, then dynoxide on PATH.
func FindDynoxide() (string, error) {
	if b := os.Getenv("CONVEYOR_DYNOXIDE"); b != "" {
		return b, nil
	}
	if root, err := RepoRoot(); err == nil {
		if _, err := os.Stat(filepath.Join(root, DynoxideLink)); err == nil {
			return filepath.Join(root, DynoxideLink), nil
		}
	}
	if b, err := exec.LookPath("dynoxide"); err == nil {
		return b, nil
	}
	return "", errors.New("dynoxide not found: run `make emulator` (it installs it with cargo), set CONVEYOR_DYNOXIDE, or run on DynamoDB Local (CONVEYOR_DYNAMODB_ENGINE=" + EngineDynamoDBLocal + ")")
}

// startDynoxide launches dynoxide (in memory unless opts.DataDir) and waits
// until it answers ListTables. It keeps one database whatever the caller's
// access key and region, as DynamoDB Local's -sharedDb does.
func startDynoxide(ctx context.Context, opts DynamoDBOptions, port int) (*Process, error) {
	bin := opts.Dynoxide
	if bin == "" {
		var err error
		if bin, err = FindDynoxide(); err != nil {
			return nil, err
		}
	}
	args := []string{"serve", "--host", "127.0.0.1", "--port", strconv.Itoa(port), "--log", "quiet"}
	if opts.DataDir != "" {
		abs, err := filepath.Abs(opts.DataDir)
		if err != nil {
			return nil, err
		}
		if err := os.MkdirAll(abs, 0o700); err != nil {
			return nil, fmt.Errorf("dynoxide's data directory: %w", err)
		}
		args = append(args, "--db-path", filepath.Join(abs, "dynoxide.db"))
	}
	return launch(ctx, launchSpec{
		name: "dynoxide", cmd: exec.Command(bin, args...), port: port, log: opts.Log, timeout: opts.StartTimeout, ready: DynamoDBReady,
		hint: "run `make emulator` to reinstall it (cargo install dynoxide-rs)",
	})
}
