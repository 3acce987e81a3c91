package lambdaruntime

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults of FunctionConfig, Lambda's own.
const (
	// FunctionTimeoutDefault is Lambda's default function timeout.
	FunctionTimeoutDefault = 3 * time.Second
	// FunctionMemoryDefault is Lambda's default memory size, in MB.
	FunctionMemoryDefault = 128
	// InitTimeoutDefault is how long Lambda lets an on-demand instance
	// initialise before its first invocation/next.
	InitTimeoutDefault = 10 * time.Second
	// MaxResponseSize is Lambda's limit on a synchronous (buffered)
	// response payload; streamed responses are not limited.
	MaxResponseSize = 6 << 20
	// AccountID is the account the emulator uses.
	AccountID = "123456789012"
)

// FunctionConfig describes one function to run under the local Runtime API.
type FunctionConfig struct {
	// Name is the function's name (AWS_LAMBDA_FUNCTION_NAME); required.
	Name string
	// Bootstrap is the path of the function's executable (built for this
	// host); required. Its directory is the task root (LAMBDA_TASK_ROOT).
	Bootstrap string
	// Env is the function's own configuration, what the deployment sets
	// (CDK's Environment), plus the emulator's AWS_ENDPOINT_URL* and
	// credentials. The variables Lambda itself sets (AWS_LAMBDA_*,
	// _HANDLER, AWS_REGION, …) are added, and win. Nothing is inherited
	// from this process.
	Env map[string]string
	// MemoryMB is AWS_LAMBDA_FUNCTION_MEMORY_SIZE (default 128).
	MemoryMB int
	// Timeout is the invocation deadline (default 3s): the runtime is told
	// it (Lambda-Runtime-Deadline-Ms) and the instance is killed when it
	// passes.
	Timeout time.Duration
	// InitTimeout bounds a new instance's start-up, up to its first
	// invocation/next (default 10s).
	InitTimeout time.Duration
	// Region is AWS_REGION (default us-east-1).
	Region string
	// Output receives the processes' stdout and stderr, what Lambda sends
	// to CloudWatch Logs (default os.Stderr).
	Output io.Writer
	// Logger reports instance starts, crashes and kills (default
	// slog.Default()).
	Logger *slog.Logger
}

// Function runs one Lambda function's bootstrap under a local Lambda
// Runtime API, the way Lambda does: each instance is a child process with
// its own Runtime API endpoint (AWS_LAMBDA_RUNTIME_API) and handles one
// invocation at a time; an invocation takes an idle (warm) instance or
// starts a new one, so concurrency spawns instances; an instance that
// crashes is replaced, and one still running at its deadline is killed and
// replaced. Function satisfies Invoker and StreamInvoker.
type Function struct {
	cfg FunctionConfig
	arn string
	log *slog.Logger

	mu         sync.Mutex
	idle       []*instance // LIFO: the most recently used first
	live       map[*instance]struct{}
	closed     bool
	started    int
	coldStarts []time.Duration
	// firstAnswers: process start → the first invocation's answer
	// (response or error) posted, per instance.
	firstAnswers []time.Duration
	wg           sync.WaitGroup
}

// NewFunction checks cfg and returns the function, with no instance yet
// (the first invocation starts one).
func NewFunction(cfg FunctionConfig) (*Function, error) {
	if cfg.Name == "" {
		return nil, errors.New("runtime: a function needs a name")
	}
	st, err := os.Stat(cfg.Bootstrap)
	if err != nil {
		return nil, fmt.Errorf("runtime: function %s: %w", cfg.Name, err)
	}
	if st.IsDir() || st.Mode()&0o111 == 0 {
		return nil, fmt.Errorf("runtime: function %s: %s is not an executable", cfg.Name, cfg.Bootstrap)
	}
	if cfg.MemoryMB == 0 {
		cfg.MemoryMB = FunctionMemoryDefault
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = FunctionTimeoutDefault
	}
	if cfg.InitTimeout == 0 {
		cfg.InitTimeout = InitTimeoutDefault
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	if cfg.Output == nil {
		cfg.Output = os.Stderr
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Function{
		cfg:  cfg,
		arn:  "arn:aws:lambda:" + cfg.Region + ":" + AccountID + ":function:" + cfg.Name,
		log:  cfg.Logger.With("function", cfg.Name),
		live: map[*instance]struct{}{},
	}, nil
}

// Name is the function's name.
func (f *Function) Name() string { return f.cfg.Name }

// Stats is what a function's instances have done so far.
type Stats struct {
	// Started counts the instances started (cold starts, restarts included).
	Started int
	// Live counts the instances running now, idle or busy.
	Live int
	// Idle counts the warm instances waiting for an invocation.
	Idle int
}

// Stats returns the function's instance counts.
func (f *Function) Stats() Stats {
	f.mu.Lock()
	defer f.mu.Unlock()
	return Stats{Started: f.started, Live: len(f.live), Idle: len(f.idle)}
}

// Config returns the configuration the function was made with (a fresh
// Function from it starts cold: the bench's cold-start runs).
func (f *Function) Config() FunctionConfig { return f.cfg }

// ColdStarts returns, for every instance that reached its first
// invocation/next, the time from its process start to that request: the
// function's own initialisation (config, SDK clients, secrets) as Lambda's
// Init Duration measures it, in the order the instances got there.
func (f *Function) ColdStarts() []time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.coldStarts)
}

// FirstAnswers returns, for every instance that answered an invocation,
// the time from its process start to its first answer (response or
// error) posted: what a cold request waits for, beyond the platform's
// own part. Work an instance defers past its first invocation/next (a
// secret read in the background) shows here and not in ColdStarts.
func (f *Function) FirstAnswers() []time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.firstAnswers)
}

// Invoke runs one invocation on an instance and returns the function's
// answer; a function error, crash, timeout or failed start is a
// *FunctionError. A streamed answer is read whole. If ctx ends first,
// Invoke returns ctx's error and the invocation runs on to its end or
// deadline, as in Lambda.
func (f *Function) Invoke(ctx context.Context, payload []byte) ([]byte, error) {
	out, err := f.invoke(ctx, payload, false)
	if err != nil {
		return nil, err
	}
	return out.payload, nil
}

// InvokeStream runs one invocation whose answer is a function URL
// response: streamed (application/vnd.awslambda.http-integration-response:
// the prelude, eight NUL bytes, the body) or buffered (the JSON of
// events.LambdaFunctionURLResponse). It returns once the status and headers
// are known; the body streams until the function ends its response. Closing
// the body early drops the connection the function writes its response on,
// as a client that went away does.
func (f *Function) InvokeStream(ctx context.Context, payload []byte) (*StreamResponse, error) {
	out, err := f.invoke(ctx, payload, true)
	if err != nil {
		return nil, err
	}
	return out.stream, nil
}

// Close kills every instance and waits for them to exit; invocations in
// flight fail.
func (f *Function) Close() error {
	f.mu.Lock()
	f.closed = true
	all := make([]*instance, 0, len(f.live))
	for in := range f.live {
		all = append(all, in)
	}
	f.idle = nil
	f.mu.Unlock()
	for _, in := range all {
		in.kill()
	}
	f.wg.Wait()
	// Every instance is dead now, whether or not the invocation it served
	// has got round to discarding it yet.
	f.mu.Lock()
	for _, in := range all {
		delete(f.live, in)
	}
	f.mu.Unlock()
	return nil
}

var errClosed = errors.New("runtime: the function is shut down")

func (f *Function) invoke(ctx context.Context, payload []byte, stream bool) (outcome, error) {
	inv := newInvocation(payload, stream)
	for {
		in, err := f.acquire()
		if err != nil {
			return outcome{}, err
		}
		handed, err := f.handOver(ctx, in, inv)
		if err != nil {
			return outcome{}, err
		}
		if handed {
			break
		}
		// A warm instance that died while idle: take another.
	}
	select {
	case out := <-inv.result:
		if !stream {
			// Settle the instance first (idle again, or gone), so that an
			// invocation after this one finds it as Lambda would.
			select {
			case <-inv.settled:
			case <-ctx.Done():
			}
		}
		return out, out.err
	case <-ctx.Done():
		return outcome{}, ctx.Err()
	}
}

// acquire returns a warm instance, or starts one.
func (f *Function) acquire() (*instance, error) {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return nil, errClosed
	}
	if n := len(f.idle); n > 0 {
		in := f.idle[n-1]
		f.idle = f.idle[:n-1]
		f.mu.Unlock()
		return in, nil
	}
	f.mu.Unlock()
	return f.start()
}

// handOver gives inv to in's next invocation/next and starts supervising
// it; false means in had died between invocations and inv is untouched.
func (f *Function) handOver(ctx context.Context, in *instance, inv *invocation) (bool, error) {
	t := time.NewTimer(f.cfg.InitTimeout)
	defer t.Stop()
	select {
	case in.next <- inv:
	case <-in.exited:
		f.discard(in)
		if !in.isReady() {
			return false, in.initError()
		}
		return false, nil
	case <-t.C:
		f.log.Warn("instance did not ask for an invocation in time; killing it", "instance", in.id, "init_timeout", f.cfg.InitTimeout)
		in.kill()
		f.discard(in)
		if !in.isReady() {
			return false, &FunctionError{Function: f.cfg.Name, Type: ErrorTypeInit,
				Message: fmt.Sprintf("Init timed out after %.2f seconds", f.cfg.InitTimeout.Seconds())}
		}
		return false, nil
	case <-ctx.Done():
		f.release(in)
		return false, ctx.Err()
	}
	<-inv.accepted
	if !f.track(func() { f.supervise(in, inv) }) {
		close(inv.settled)
		in.kill()
		inv.fail(&FunctionError{Function: f.cfg.Name, Type: ErrorTypeExit, Message: errClosed.Error()})
	}
	return true, nil
}

// supervise waits for the end of inv on in: its response or error, the
// process's exit, or its deadline (the instance is killed then).
func (f *Function) supervise(in *instance, inv *invocation) {
	defer close(inv.settled)
	t := time.NewTimer(time.Until(inv.deadline))
	defer t.Stop()
	select {
	case <-inv.finished:
		if in.dropped.Load() {
			<-in.exited
			f.discard(in)
			return
		}
		f.release(in)
	case <-in.exited:
		err := &FunctionError{Function: f.cfg.Name, Type: ErrorTypeExit,
			Message: fmt.Sprintf("RequestId: %s Error: Runtime exited with error: %v", inv.id, in.exitErr)}
		if in.dropped.Load() {
			// We dropped its connection (the streaming client left).
			err.Message = fmt.Sprintf("RequestId: %s Error: the client went away", inv.id)
		} else {
			f.log.Warn("instance exited during an invocation", "instance", in.id, "request_id", inv.id, "error", in.exitErr, "output", in.tail.String())
		}
		inv.fail(err)
		f.discard(in)
	case <-t.C:
		f.log.Warn("invocation timed out; killing its instance", "instance", in.id, "request_id", inv.id, "timeout", f.cfg.Timeout)
		inv.fail(&FunctionError{Function: f.cfg.Name, Type: ErrorTypeTimeout,
			Message: fmt.Sprintf("RequestId: %s Error: Task timed out after %.2f seconds", inv.id, f.cfg.Timeout.Seconds())})
		in.kill()
		<-in.exited
		f.discard(in)
	}
}

// release makes in idle again, unless it has exited.
func (f *Function) release(in *instance) {
	select {
	case <-in.exited:
		f.discard(in)
		return
	default:
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return
	}
	f.idle = append(f.idle, in)
}

// discard forgets in (it has exited or is being killed).
func (f *Function) discard(in *instance) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.live, in)
	f.idle = slices.DeleteFunc(f.idle, func(x *instance) bool { return x == in })
}

// start launches a new instance: its Runtime API endpoint, then its
// process.
func (f *Function) start() (*instance, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("runtime: function %s: listening for its Runtime API: %w", f.cfg.Name, err)
	}
	in := &instance{
		fn:     f,
		id:     randomHex(8),
		addr:   ln.Addr().String(),
		next:   make(chan *invocation),
		exited: make(chan struct{}),
		ready:  make(chan struct{}),
	}
	in.srv = &http.Server{Handler: in.api(), ReadHeaderTimeout: 10 * time.Second}
	cmd := exec.Command(f.cfg.Bootstrap)
	cmd.Dir = filepath.Dir(f.cfg.Bootstrap)
	cmd.Env = f.environ(in)
	out := io.MultiWriter(f.cfg.Output, &in.tail)
	cmd.Stdout, cmd.Stderr = out, out
	configure(cmd)
	in.cmd = cmd

	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		_ = ln.Close()
		return nil, errClosed
	}
	f.live[in] = struct{}{}
	f.started++
	f.wg.Add(1)
	f.mu.Unlock()

	in.startedAt = time.Now()
	go func() {
		defer f.wg.Done()
		_ = in.srv.Serve(ln)
	}()
	if err := cmd.Start(); err != nil {
		_ = in.srv.Close()
		close(in.exited)
		f.discard(in)
		return nil, &FunctionError{Function: f.cfg.Name, Type: ErrorTypeInit, Message: fmt.Sprintf("starting %s: %v", f.cfg.Bootstrap, err)}
	}
	in.mu.Lock()
	in.proc = cmd.Process
	if in.killed {
		_ = in.proc.Kill()
	}
	in.mu.Unlock()
	f.log.Debug("instance started", "instance", in.id, "pid", cmd.Process.Pid)
	if !f.track(func() {
		in.exitErr = cmd.Wait()
		if in.exitErr == nil {
			in.exitErr = errors.New("exit status 0")
		}
		close(in.exited)
		_ = in.srv.Close()
	}) {
		// Shut down meanwhile: nobody will wait for it.
		in.kill()
		go func() {
			in.exitErr = cmd.Wait()
			close(in.exited)
			_ = in.srv.Close()
		}()
		return nil, errClosed
	}
	return in, nil
}

// track runs fn in a goroutine that Close waits for, unless the function
// is shut down already (then it returns false and does not run fn).
func (f *Function) track(fn func()) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return false
	}
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		fn()
	}()
	return true
}

// environ is what Lambda sets for a provided.al2023 function, over the
// function's own configuration.
func (f *Function) environ(in *instance) []string {
	env := map[string]string{
		"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "en_US.UTF-8", "TZ": ":UTC",
	}
	for k, v := range f.cfg.Env {
		env[k] = v
	}
	root := filepath.Dir(f.cfg.Bootstrap)
	now := time.Now().UTC()
	for k, v := range map[string]string{
		"AWS_LAMBDA_RUNTIME_API":          in.addr,
		"AWS_LAMBDA_FUNCTION_NAME":        f.cfg.Name,
		"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": strconv.Itoa(f.cfg.MemoryMB),
		"AWS_LAMBDA_FUNCTION_VERSION":     "$LATEST",
		"AWS_LAMBDA_INITIALIZATION_TYPE":  "on-demand",
		"AWS_LAMBDA_LOG_GROUP_NAME":       "/aws/lambda/" + f.cfg.Name,
		"AWS_LAMBDA_LOG_STREAM_NAME":      now.Format("2006/01/02") + "/[$LATEST]" + in.id + in.id,
		"AWS_REGION":                      f.cfg.Region,
		"AWS_DEFAULT_REGION":              f.cfg.Region,
		"_HANDLER":                        filepath.Base(f.cfg.Bootstrap),
		"LAMBDA_TASK_ROOT":                root,
		"LAMBDA_RUNTIME_DIR":              root,
	} {
		env[k] = v
	}
	list := make([]string, 0, len(env))
	for k, v := range env {
		list = append(list, k+"="+v)
	}
	slices.Sort(list)
	return list
}

// instance is one running process of a function and its Runtime API.
type instance struct {
	fn        *Function
	id        string
	addr      string
	srv       *http.Server
	cmd       *exec.Cmd
	startedAt time.Time
	// next hands an invocation to the process's GET invocation/next.
	next chan *invocation
	// exited is closed once the process has exited (exitErr says how).
	exited  chan struct{}
	exitErr error
	// ready is closed at the first invocation/next.
	ready     chan struct{}
	readyOnce sync.Once
	// answerOnce records the first invocation's answer (FirstAnswers).
	answerOnce sync.Once
	// dropped is set when we cut the response connection on purpose.
	dropped atomic.Bool
	// tail keeps the end of the process's output for error messages.
	tail tailBuffer

	mu      sync.Mutex
	current *invocation
	posted  *FunctionError // posted to /runtime/init/error
	proc    *os.Process
	killed  bool
}

func (in *instance) isReady() bool {
	select {
	case <-in.ready:
		return true
	default:
		return false
	}
}

func (in *instance) markReady() {
	in.readyOnce.Do(func() {
		d := time.Since(in.startedAt)
		close(in.ready)
		in.fn.mu.Lock()
		in.fn.coldStarts = append(in.fn.coldStarts, d)
		in.fn.mu.Unlock()
		in.fn.log.Debug("instance ready", "instance", in.id, "init_duration", d)
	})
}

// markAnswered records, once, the time from process start to the first
// answer this instance posted.
func (in *instance) markAnswered() {
	in.answerOnce.Do(func() {
		d := time.Since(in.startedAt)
		in.fn.mu.Lock()
		in.fn.firstAnswers = append(in.fn.firstAnswers, d)
		in.fn.mu.Unlock()
	})
}

// initError is why an instance that never asked for an invocation ended.
func (in *instance) initError() error {
	in.mu.Lock()
	posted := in.posted
	in.mu.Unlock()
	if posted != nil {
		return posted
	}
	return &FunctionError{Function: in.fn.cfg.Name, Type: ErrorTypeExit,
		Message: fmt.Sprintf("Runtime exited during init: %v; output: %s", in.exitErr, in.tail.String())}
}

// kill ends the process at once (SIGKILL), as Lambda does at a timeout.
func (in *instance) kill() {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.killed = true
	if in.proc != nil {
		_ = in.proc.Kill()
	}
}

// invocation is one event on its way through an instance.
type invocation struct {
	id      string
	payload []byte
	stream  bool
	// accepted is closed when an instance's invocation/next took it;
	// deadline is set then.
	accepted chan struct{}
	deadline time.Time
	// result receives the outcome once: the answer (for a stream, its
	// head) or the error.
	result     chan outcome
	resultOnce sync.Once
	// finished is closed when the runtime has finished its response or
	// error; the instance is free again.
	finished   chan struct{}
	finishOnce sync.Once
	// settled is closed once the instance is idle again or gone.
	settled chan struct{}
	// abort, set for a streamed body, ends it with an error.
	mu    sync.Mutex
	abort func(error)
}

type outcome struct {
	payload []byte
	stream  *StreamResponse
	err     error
}

func newInvocation(payload []byte, stream bool) *invocation {
	return &invocation{
		id: newRequestID(), payload: payload, stream: stream,
		accepted: make(chan struct{}), result: make(chan outcome, 1), finished: make(chan struct{}), settled: make(chan struct{}),
	}
}

func (inv *invocation) succeed(o outcome) { inv.resultOnce.Do(func() { inv.result <- o }) }

// fail reports err, or, once the stream's head was delivered, ends its body
// with err.
func (inv *invocation) fail(err error) {
	delivered := true
	inv.resultOnce.Do(func() {
		delivered = false
		inv.result <- outcome{err: err}
	})
	if delivered {
		inv.mu.Lock()
		abort := inv.abort
		inv.mu.Unlock()
		if abort != nil {
			abort(err)
		}
	}
	inv.finish()
}

func (inv *invocation) finish() { inv.finishOnce.Do(func() { close(inv.finished) }) }

func newRequestID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	h := hex.EncodeToString(b)
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// tailBuffer keeps the last 4 KiB written to it.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
}

const tailSize = 4 << 10

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > tailSize {
		t.buf = t.buf[len(t.buf)-tailSize:]
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(bytes.TrimSpace(t.buf))
}
