// Package emulator starts and stops the offline AWS emulator (moto in server
// mode) on a free loopback port. The Makefile installs moto into the
// project's git-ignored virtualenv (.venv); this package finds it there.
package emulator

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// StartTimeoutDefault bounds how long Start waits for the emulator to answer.
const StartTimeoutDefault = 30 * time.Second

// Options configures Start. Every field is optional.
type Options struct {
	// Command runs the emulator (its arguments -H and -p are appended).
	// Default: $CONVEYOR_MOTO_SERVER, then the repository's .venv python
	// running localstack/moto_server.py, then moto_server on PATH.
	Command []string
	// Port to listen on; 0 picks a free loopback port.
	Port int
	// Log receives the emulator's output; nil discards it.
	Log io.Writer
	// StartTimeout bounds the wait for readiness (default StartTimeoutDefault).
	StartTimeout time.Duration
}

// Process is a running emulator.
type Process struct {
	// Endpoint is the emulator's base URL, e.g. http://127.0.0.1:43127.
	Endpoint string
	// Started is how long the emulator took to answer its first request.
	Started time.Duration
	cmd     *exec.Cmd
	done    chan error
}

// Start launches moto_server and waits until it answers. The error says
// what is missing when the emulator cannot start.
func Start(ctx context.Context, opts Options) (*Process, error) {
	command := opts.Command
	if len(command) == 0 {
		var err error
		if command, err = FindCommand(); err != nil {
			return nil, err
		}
	}
	port := opts.Port
	if port == 0 {
		var err error
		if port, err = FreePort(); err != nil {
			return nil, err
		}
	}
	timeout := opts.StartTimeout
	if timeout == 0 {
		timeout = StartTimeoutDefault
	}
	began := time.Now()
	cmd := exec.Command(command[0], append(command[1:], "-H", "127.0.0.1", "-p", strconv.Itoa(port))...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	out := opts.Log
	if out == nil {
		out = io.Discard
	}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting emulator %v: %w", command, err)
	}
	p := &Process{Endpoint: fmt.Sprintf("http://127.0.0.1:%d", port), cmd: cmd, done: make(chan error, 1)}
	go func() { p.done <- cmd.Wait() }()
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := p.waitReady(wctx); err != nil {
		_ = p.Stop()
		return nil, err
	}
	p.Started = time.Since(began)
	return p, nil
}

func (p *Process) waitReady(ctx context.Context) error {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if Ready(ctx, p.Endpoint) == nil {
			return nil
		}
		select {
		case err := <-p.done:
			p.done <- err
			return fmt.Errorf("emulator exited before it answered (%v); run `make emulator` to reinstall it", err)
		case <-ctx.Done():
			return fmt.Errorf("emulator at %s did not answer: %w", p.Endpoint, ctx.Err())
		case <-tick.C:
		}
	}
}

// Pause freezes the emulator for d (SIGSTOP, then SIGCONT): every request
// in that time hangs or times out, as during an outage of the service.
func (p *Process) Pause(d time.Duration) {
	if p == nil || p.cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGSTOP)
	time.Sleep(d)
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGCONT)
}

// Stop ends the emulator and every process it started.
func (p *Process) Stop() error {
	if p == nil || p.cmd.Process == nil {
		return nil
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
	return nil
}

// Ready returns nil when the emulator at endpoint answers.
func Ready(ctx context.Context, endpoint string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, endpoint+"/moto-api/", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	_ = resp.Body.Close()
	if resp.StatusCode >= 500 {
		return fmt.Errorf("emulator answered %s", resp.Status)
	}
	return nil
}

// Reset drops every resource in the emulator (moto's reset API).
func Reset(ctx context.Context, endpoint string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint+"/moto-api/reset", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("resetting emulator: %w", err)
	}
	_ = resp.Body.Close()
	return nil
}

// FindCommand locates the emulator: $CONVEYOR_MOTO_SERVER (a moto_server
// executable), else the repository's .venv python running
// localstack/moto_server.py (moto with its DynamoDB requests serialised, see
// that file), else moto_server on PATH.
func FindCommand() ([]string, error) {
	if b := os.Getenv("CONVEYOR_MOTO_SERVER"); b != "" {
		return []string{b}, nil
	}
	if root, err := RepoRoot(); err == nil {
		py := filepath.Join(root, ".venv", "bin", "python")
		script := filepath.Join(root, "localstack", "moto_server.py")
		_, perr := os.Stat(py)
		_, serr := os.Stat(script)
		if perr == nil && serr == nil {
			return []string{py, script}, nil
		}
	}
	if b, err := exec.LookPath("moto_server"); err == nil {
		return []string{b}, nil
	}
	return nil, errors.New("moto not found: run `make emulator` (make test and make run do it) to install it into .venv, or set CONVEYOR_MOTO_SERVER")
}

// RepoRoot walks up from the working directory to the directory holding go.mod.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("go.mod not found above the working directory")
		}
		dir = parent
	}
}

// FreePort asks the kernel for a free loopback port.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
