package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/conveyor/conveyor/localstack/emulator"
)

// runWithEmulators is the with-emulators subcommand: it starts one moto
// and one DynamoDB emulator (DynamoDB Local, or what
// $CONVEYOR_DYNAMODB_ENGINE names), runs a command with AWS_ENDPOINT_URL and
// AWS_ENDPOINT_URL_DYNAMODB naming them, stops both when the command ends
// (whatever its outcome, and on Ctrl-C), and exits with the command's
// status.
//
//	go run ./localstack/cmd/conveyor-local with-emulators -- go test ./...
//
// make test runs the main module's tests through it: every test binary
// then uses the one pair (awstest starts none when AWS_ENDPOINT_URL is
// set) instead of starting its own, and each test still provisions its
// resources under a name prefix of its own. The emulators' output goes to
// moto.log and dynamodb-local.log in -logs (default: a new temporary
// directory), named on stderr, with the processor time each used.
func runWithEmulators(args []string) int { return withEmulators(args, os.Stderr) }

// withEmulators does the work of runWithEmulators, writing its own lines to
// stderr, and returns the exit status: the command's, or 2 for a usage
// error, or 1 when the emulators cannot start.
func withEmulators(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("with-emulators", flag.ContinueOnError)
	logs := fs.String("logs", "", "directory for moto.log and dynamodb-local.log (default: a new temporary directory)")
	if code, done := parse(fs, args); done {
		return code
	}
	if fs.NArg() == 0 {
		fmt.Fprintln(stderr, "usage: conveyor-local with-emulators [-logs DIR] -- command [args...]")
		return 2
	}
	e, dir, err := startEmulators(*logs)
	if err != nil {
		fmt.Fprintf(stderr, "with-emulators: %v\n", err)
		return 1
	}
	defer e.Stop()
	ep := e.Endpoints()
	fmt.Fprintf(stderr, "with-emulators: moto at %s (up in %.1fs), %s at %s (up in %.1fs); their logs in %s\n",
		ep.Default, e.Moto.Started.Seconds(), e.DynamoDB.Name(), ep.DynamoDB, e.DynamoDB.Started.Seconds(), dir)

	cmd := exec.Command(fs.Arg(0), fs.Args()[1:]...)
	cmd.Env = append(os.Environ(), "AWS_ENDPOINT_URL="+ep.Default, "AWS_ENDPOINT_URL_DYNAMODB="+ep.DynamoDB)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, stderr
	// Ctrl-C reaches the command through the terminal's process group; we
	// outlive it to stop the emulators (each in a process group of its own,
	// so the terminal's signal never reaches them). A signal sent to us
	// alone is passed on.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(stderr, "with-emulators: %v\n", err)
		return 1
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	for {
		select {
		case sig := <-sigs:
			_ = cmd.Process.Signal(sig)
		case err := <-done:
			reportEmulatorCPU(e, stderr)
			return exitStatus(err, stderr, fs.Arg(0))
		}
	}
}

// reportEmulatorCPU says how much processor time each emulator used while
// the command ran: what the run spent serving AWS calls.
func reportEmulatorCPU(e *emulator.Emulators, stderr io.Writer) {
	moto, err1 := e.Moto.CPUTime()
	ddb, err2 := e.DynamoDB.CPUTime()
	if err1 == nil && err2 == nil {
		fmt.Fprintf(stderr, "with-emulators: CPU used by moto %.1fs, by %s %.1fs\n", moto.Seconds(), e.DynamoDB.Name(), ddb.Seconds())
	}
}

// exitStatus is the exit status a shell gives for the command's end: its
// own, or 128 + the signal that killed it.
func exitStatus(err error, stderr io.Writer, name string) int {
	var exit *exec.ExitError
	if err == nil {
		return 0
	}
	if !errors.As(err, &exit) {
		fmt.Fprintf(stderr, "with-emulators: %s: %v\n", name, err)
		return 1
	}
	if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		fmt.Fprintf(stderr, "with-emulators: %s: %v\n", name, err)
		return 128 + int(ws.Signal())
	}
	return exit.ExitCode()
}

// startEmulators starts both emulators, logging to files in dir (a new
// temporary directory when empty), and returns them with the directory.
func startEmulators(dir string) (*emulator.Emulators, string, error) {
	var err error
	if dir == "" {
		dir, err = os.MkdirTemp("", "conveyor-emulators-")
	} else {
		err = os.MkdirAll(dir, 0o755)
	}
	if err != nil {
		return nil, "", fmt.Errorf("the log directory: %w", err)
	}
	motoLog, err := os.Create(filepath.Join(dir, "moto.log"))
	if err != nil {
		return nil, "", err
	}
	ddbLog, err := os.Create(filepath.Join(dir, "dynamodb-local.log"))
	if err != nil {
		return nil, "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), emulator.StartTimeoutDefault)
	defer cancel()
	e, err := emulator.StartAll(ctx, emulator.LogTo(motoLog, ddbLog))
	if err != nil {
		return nil, "", fmt.Errorf("starting the emulators (logs in %s): %w", dir, err)
	}
	return e, dir, nil
}
