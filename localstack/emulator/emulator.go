// Package emulator starts and stops the offline AWS emulators on free
// loopback ports — moto in server mode for every service but DynamoDB, and
// DynamoDB Local (AWS's own DynamoDB emulator) for DynamoDB — and provisions
// on them every resource of the definition (Provision, provision.go). The
// Makefile installs moto into the project's git-ignored virtualenv (.venv)
// and DynamoDB Local into .cache/dynamodb-local; this package finds them
// there.
package emulator

import (
	"bytes"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// StartTimeoutDefault bounds how long Start and StartDynamoDB wait for an
// emulator to answer. DynamoDB Local needs ≈2.2 s of CPU to answer (a JVM;
// see DynamoDBJavaOptionsDefault), so its start time is that CPU stretched
// by the machine's load: 2–5 s on a quiet two-core machine, 14.5 s measured
// at a load average of 16 (several test binaries and builds at once), when
// moto took 7.6 s. A process that dies is reported at once, not after this.
const StartTimeoutDefault = 60 * time.Second

// Options configures Start (moto). Every field is optional.
type Options struct {
	// Command runs moto (its arguments -H and -p are appended).
	// Default: FindCommand's.
	Command []string
	// Port to listen on; 0 picks a free loopback port.
	Port int
	// Log receives the emulator's output; nil discards it.
	Log io.Writer
	// StartTimeout bounds the wait for readiness (default StartTimeoutDefault).
	StartTimeout time.Duration
	// StateFile, when set, is where moto keeps its state between runs
	// (buckets and objects, queues and messages, keys, secrets, buses,
	// schedules): read at start when it exists, written every few seconds
	// and at Stop (moto_server.py, CONVEYOR_MOTO_STATE). Needs the
	// repository's moto launcher (moto_server.py: not a
	// CONVEYOR_MOTO_SERVER).
	StateFile string
}

// Process is a running emulator, in a process group of its own.
type Process struct {
	// Endpoint is the emulator's base URL, e.g. http://127.0.0.1:43127.
	Endpoint string
	// Started is how long the emulator took to answer its first request.
	Started time.Duration
	name    string
	cmd     *exec.Cmd
	done    chan error
	tail    *tailBuffer
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
	cmd := exec.Command(command[0], append(command[1:], "-H", "127.0.0.1", "-p", strconv.Itoa(port))...)
	if opts.StateFile != "" {
		abs, err := filepath.Abs(opts.StateFile)
		if err != nil {
			return nil, err
		}
		if err := os.MkdirAll(filepath.Dir(abs), 0o700); err != nil {
			return nil, fmt.Errorf("moto's state directory: %w", err)
		}
		cmd.Env = append(os.Environ(), "CONVEYOR_MOTO_STATE="+abs)
	}
	return launch(ctx, launchSpec{
		name: "moto", cmd: cmd, port: port, log: opts.Log, timeout: opts.StartTimeout, ready: Ready,
		hint: "run `make emulator` to reinstall it",
	})
}

// launchSpec is what launch needs to start one emulator.
type launchSpec struct {
	name    string
	cmd     *exec.Cmd
	port    int
	log     io.Writer
	timeout time.Duration
	// ready returns nil once the emulator at endpoint serves requests.
	ready func(ctx context.Context, endpoint string) error
	// hint is said when the process dies before it answers.
	hint string
}

// launch starts spec.cmd in its own process group and waits until it is
// ready, its timeout passes or the process exits.
func launch(ctx context.Context, spec launchSpec) (*Process, error) {
	timeout := spec.timeout
	if timeout == 0 {
		timeout = StartTimeoutDefault
	}
	began := time.Now()
	cmd := spec.cmd
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	tail := &tailBuffer{max: 4 << 10}
	out := io.Writer(tail)
	if spec.log != nil {
		out = io.MultiWriter(spec.log, tail)
	}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s %v: %w", spec.name, cmd.Args, err)
	}
	p := &Process{Endpoint: fmt.Sprintf("http://127.0.0.1:%d", spec.port), name: spec.name, cmd: cmd, done: make(chan error, 1), tail: tail}
	go func() { p.done <- cmd.Wait() }()
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := p.waitReady(wctx, spec); err != nil {
		_ = p.Stop()
		return nil, err
	}
	p.Started = time.Since(began)
	return p, nil
}

func (p *Process) waitReady(ctx context.Context, spec launchSpec) error {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if spec.ready(ctx, p.Endpoint) == nil {
			return nil
		}
		select {
		case err := <-p.done:
			p.done <- err
			return fmt.Errorf("%s exited before it answered (%v); %s; its last output:\n%s", p.name, err, spec.hint, p.tail)
		case <-ctx.Done():
			return fmt.Errorf("%s at %s did not answer: %w; its last output:\n%s", p.name, p.Endpoint, ctx.Err(), p.tail)
		case <-tick.C:
		}
	}
}

// Name is the emulator's name: moto, DynamoDB Local or dynoxide.
func (p *Process) Name() string { return p.name }

// Pause freezes the emulator for d (SIGSTOP, then SIGCONT): every request
// in that time hangs or times out, as during an outage of the service.
func (p *Process) Pause(d time.Duration) {
	p.freeze()
	time.Sleep(d)
	p.thaw()
}

// freeze stops the emulator's processes and returns once the kernel
// reports the emulator stopped (where /proc tells; at most a few seconds).
func (p *Process) freeze() {
	p.signal(syscall.SIGSTOP)
	if p == nil || p.cmd.Process == nil {
		return
	}
	stat := fmt.Sprintf("/proc/%d/stat", p.cmd.Process.Pid)
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		b, err := os.ReadFile(stat)
		if err != nil {
			return // no /proc: nothing to wait on
		}
		// "pid (comm) state …": the state follows the last ')'.
		if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) && (b[i+2] == 'T' || b[i+2] == 't') {
			return
		}
	}
}

func (p *Process) thaw() { p.signal(syscall.SIGCONT) }

// CPUTime is the processor time (user + system) the emulator's process has
// used so far, from /proc (Linux; an error elsewhere). Benchmarks use it to
// say where a machine's time goes: the emulators' or the product's.
func (p *Process) CPUTime() (time.Duration, error) {
	if p == nil || p.cmd.Process == nil {
		return 0, errors.New("no process")
	}
	return procCPUTime(p.cmd.Process.Pid)
}

// procCPUTime reads utime + stime of pid from /proc/<pid>/stat, in clock
// ticks of 1/100 s (USER_HZ, 100 on every Linux architecture Go runs on).
func procCPUTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// "pid (comm) state ppid …": fields counted from the state, after the
	// last ')' (comm may hold spaces and parentheses); utime and stime are
	// the 14th and 15th fields of the line, the 12th and 13th after comm.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("reading /proc/%d/stat: no ')'", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("reading /proc/%d/stat: %d fields", pid, len(f))
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("reading /proc/%d/stat: %w", pid, err)
	}
	return time.Duration(utime+stime) * 10 * time.Millisecond, nil
}

func (p *Process) signal(sig syscall.Signal) {
	if p == nil || p.cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, sig)
}

// Stop ends the emulator and every process it started; stopping a stopped
// emulator does nothing.
func (p *Process) Stop() error {
	if p == nil || p.cmd.Process == nil {
		return nil
	}
	// A frozen process group would never handle SIGTERM.
	p.thaw()
	p.signal(syscall.SIGTERM)
	var err error
	select {
	case err = <-p.done:
	case <-time.After(5 * time.Second):
		p.signal(syscall.SIGKILL)
		err = <-p.done
	}
	p.done <- err // for the next Stop
	return nil
}

// Ready returns nil when the moto server at endpoint answers.
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

// FindCommand locates moto: $CONVEYOR_MOTO_SERVER (a moto_server
// executable, run as it is), else $CONVEYOR_MOTO_PYTHON or the
// repository's .venv/bin/python (for a stack run outside the repository)
// running moto_server.py, moto with its per-message hot paths made cheap
// (see that file: every answer is moto's, but a call no longer costs
// O(backlog)) — else moto_server on PATH.
func FindCommand() ([]string, error) {
	if b := os.Getenv("CONVEYOR_MOTO_SERVER"); b != "" {
		return []string{b}, nil
	}
	if python := os.Getenv("CONVEYOR_MOTO_PYTHON"); python != "" {
		return []string{python, "-c", motoServerPy}, nil
	}
	if root, err := RepoRoot(); err == nil {
		python := filepath.Join(root, ".venv", "bin", "python")
		if _, err := os.Stat(filepath.Join(root, ".venv", "bin", "moto_server")); err == nil {
			return []string{python, "-c", motoServerPy}, nil
		}
	}
	if b, err := exec.LookPath("moto_server"); err == nil {
		return []string{b}, nil
	}
	return nil, errors.New("moto not found: run `make emulator` (make test and make run do it) to install it into .venv, or set CONVEYOR_MOTO_SERVER")
}

// motoServerPy starts moto_server after patching its hot paths.
//
//go:embed moto_server.py
var motoServerPy string

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

// tailBuffer keeps the last max bytes written to it, to say why an emulator
// did not start.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = append(t.b[:0], t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}
