package lambdaruntime_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/conveyor/conveyor/localstack/lambdaruntime"
)

// newFunction runs this test binary as a function's bootstrap in the
// given helper mode.
func newFunction(t *testing.T, mode string, adjust ...func(*lambdaruntime.FunctionConfig)) *lambdaruntime.Function {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cfg := lambdaruntime.FunctionConfig{
		Name: "helper-" + mode, Bootstrap: exe, MemoryMB: 256, Timeout: 20 * time.Second,
		Env:    map[string]string{"HELPER": mode, "CONVEYOR_SAMPLE": "from-the-deployment"},
		Output: io.Discard, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	for _, a := range adjust {
		a(&cfg)
	}
	fn, err := lambdaruntime.NewFunction(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fn.Close() })
	return fn
}

func invoke(t *testing.T, fn *lambdaruntime.Function, a action) answer {
	t.Helper()
	out, err := fn.Invoke(context.Background(), payload(t, a))
	if err != nil {
		t.Fatalf("invoke %+v: %v", a, err)
	}
	return decode(t, out)
}

func functionError(t *testing.T, err error) *lambdaruntime.FunctionError {
	t.Helper()
	var fe *lambdaruntime.FunctionError
	if !errors.As(err, &fe) {
		t.Fatalf("error %v (%T) is no *lambdaruntime.FunctionError", err, err)
	}
	return fe
}

func eventually(t *testing.T, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestWarmInstanceIsReusedWithLambdasEnvironment(t *testing.T) {
	t.Parallel()
	fn := newFunction(t, "echo")
	first := invoke(t, fn, action{})
	second := invoke(t, fn, action{})
	if first.PID != second.PID {
		t.Errorf("the second invocation ran in process %d, want the warm %d", second.PID, first.PID)
	}
	if first.RequestID == "" || first.RequestID == second.RequestID {
		t.Errorf("request ids %q, %q: want distinct ids", first.RequestID, second.RequestID)
	}
	if s := fn.Stats(); s.Started != 1 || s.Live != 1 || s.Idle != 1 {
		t.Errorf("stats = %+v, want one instance started, live and idle", s)
	}
	if cs := fn.ColdStarts(); len(cs) != 1 || cs[0] <= 0 {
		t.Errorf("cold starts = %v, want one positive duration", cs)
	} else if fa := fn.FirstAnswers(); len(fa) != 1 || fa[0] < cs[0] {
		// One per instance (the warm second answer is not a first), and
		// never before the instance asked for its invocation.
		t.Errorf("first answers = %v, want one, not before the cold start %v", fa, cs[0])
	}
	if first.Function != "helper-echo" || first.Memory != 256 {
		t.Errorf("function %q with %d MB, want helper-echo with 256", first.Function, first.Memory)
	}
	if want := "arn:aws:lambda:us-east-1:123456789012:function:helper-echo"; first.ARN != want {
		t.Errorf("invoked ARN %q, want %q", first.ARN, want)
	}
	if first.DeadlineIn <= 15*time.Second || first.DeadlineIn > 20*time.Second {
		t.Errorf("the handler's deadline is %v away, want the 20s timeout", first.DeadlineIn)
	}
	env := first.Env
	if env["AWS_LAMBDA_RUNTIME_API"] == "" || env["AWS_LAMBDA_FUNCTION_VERSION"] != "$LATEST" || env["AWS_REGION"] != "us-east-1" || env["_HANDLER"] == "" || env["LAMBDA_TASK_ROOT"] == "" {
		t.Errorf("Lambda's variables are missing: %v", env)
	}
	if env["CONVEYOR_SAMPLE"] != "from-the-deployment" {
		t.Errorf("the function's own configuration is missing: %v", env)
	}
	if env["HOME"] != "" {
		t.Errorf("HOME=%q leaked from the host's environment", env["HOME"])
	}
}

func TestFunctionErrorKeepsTheInstance(t *testing.T) {
	t.Parallel()
	fn := newFunction(t, "echo")
	before := invoke(t, fn, action{})
	_, err := fn.Invoke(context.Background(), payload(t, action{Do: "fail"}))
	fe := functionError(t, err)
	if fe.Type != "errorString" || fe.Message != "boom" {
		t.Errorf("error = %+v, want errorString: boom", fe)
	}
	if after := invoke(t, fn, action{}); after.PID != before.PID {
		t.Errorf("a returned error replaced the instance (%d → %d)", before.PID, after.PID)
	}
}

func TestCrashRestartsTheInstance(t *testing.T) {
	t.Parallel()
	fn := newFunction(t, "echo")
	before := invoke(t, fn, action{})
	_, err := fn.Invoke(context.Background(), payload(t, action{Do: "crash"}))
	if fe := functionError(t, err); fe.Type != lambdaruntime.ErrorTypeExit || !strings.Contains(fe.Message, "exit status 3") {
		t.Errorf("error = %+v, want %s with exit status 3", fe, lambdaruntime.ErrorTypeExit)
	}
	after := invoke(t, fn, action{})
	if after.PID == before.PID {
		t.Errorf("the crashed process %d answered again", before.PID)
	}
	if s := fn.Stats(); s.Started != 2 || s.Live != 1 {
		t.Errorf("stats = %+v, want 2 started, 1 live", s)
	}
}

func TestPanicReportsAndReplacesTheInstance(t *testing.T) {
	t.Parallel()
	fn := newFunction(t, "echo")
	before := invoke(t, fn, action{})
	_, err := fn.Invoke(context.Background(), payload(t, action{Do: "panic"}))
	if fe := functionError(t, err); fe.Type != "string" || fe.Message != "kaboom" {
		t.Errorf("error = %+v, want the panic's value", fe)
	}
	// aws-lambda-go exits after reporting a panic; the next invocation
	// gets a new instance.
	if after := invoke(t, fn, action{}); after.PID == before.PID {
		t.Errorf("the panicked process %d answered again", before.PID)
	}
}

func TestTimeoutKillsAndRestarts(t *testing.T) {
	t.Parallel()
	fn := newFunction(t, "echo", func(c *lambdaruntime.FunctionConfig) { c.Timeout = 700 * time.Millisecond })
	before := invoke(t, fn, action{})
	start := time.Now()
	_, err := fn.Invoke(context.Background(), payload(t, action{Do: "hang"}))
	took := time.Since(start)
	if fe := functionError(t, err); fe.Type != lambdaruntime.ErrorTypeTimeout || !strings.Contains(fe.Message, "Task timed out after 0.70 seconds") {
		t.Errorf("error = %+v, want %s", fe, lambdaruntime.ErrorTypeTimeout)
	}
	if took < 700*time.Millisecond || took > 5*time.Second {
		t.Errorf("the timeout took %v, want about 0.7s", took)
	}
	if after := invoke(t, fn, action{}); after.PID == before.PID {
		t.Errorf("the timed-out process %d answered again", before.PID)
	}
	if s := fn.Stats(); s.Started != 2 || s.Live != 1 {
		t.Errorf("stats = %+v, want 2 started, 1 live (the killed one gone)", s)
	}
}

// barrier answers its n-th GET and every earlier one at once: it opens only
// when n invocations are in flight together.
func barrier(t *testing.T, n int) string {
	t.Helper()
	var (
		mu      sync.Mutex
		arrived int
		open    = make(chan struct{})
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		arrived++
		if arrived == n {
			close(open)
		}
		mu.Unlock()
		select {
		case <-open:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestConcurrentInvocationsSpawnInstances(t *testing.T) {
	t.Parallel()
	fn := newFunction(t, "echo")
	const n = 3
	gate := barrier(t, n)
	pids := make(chan int, n)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			out, err := fn.Invoke(context.Background(), payload(t, action{Barrier: gate}))
			if err != nil {
				t.Errorf("invoke: %v", err)
				pids <- 0
				return
			}
			pids <- decode(t, out).PID
		})
	}
	wg.Wait()
	close(pids)
	seen := map[int]bool{}
	for p := range pids {
		seen[p] = true
	}
	if len(seen) != n {
		t.Errorf("%d concurrent invocations ran in %d processes, want one each", n, len(seen))
	}
	if s := fn.Stats(); s.Started != n || s.Idle != n {
		t.Errorf("stats = %+v, want %d started and idle", s, n)
	}
	// Then one at a time: warm instances serve, none starts.
	invoke(t, fn, action{})
	if s := fn.Stats(); s.Started != n {
		t.Errorf("a sequential invocation started an instance: %+v", s)
	}
	if cs := fn.ColdStarts(); len(cs) != n {
		t.Errorf("cold starts = %v, want %d", cs, n)
	}
}

func TestInitErrors(t *testing.T) {
	t.Parallel()
	t.Run("exit before the first next", func(t *testing.T) {
		t.Parallel()
		fn := newFunction(t, "init-exit")
		_, err := fn.Invoke(context.Background(), payload(t, action{}))
		fe := functionError(t, err)
		if fe.Type != lambdaruntime.ErrorTypeExit || !strings.Contains(fe.Message, "CONVEYOR_TABLE is not set") {
			t.Errorf("error = %+v, want %s quoting the function's output", fe, lambdaruntime.ErrorTypeExit)
		}
		if cs := fn.ColdStarts(); len(cs) != 0 {
			t.Errorf("cold starts = %v, want none (never ready)", cs)
		}
	})
	t.Run("posted to init/error", func(t *testing.T) {
		t.Parallel()
		fn := newFunction(t, "init-post")
		_, err := fn.Invoke(context.Background(), payload(t, action{}))
		if fe := functionError(t, err); fe.Type != "Runtime.ConfigError" || fe.Message != "no secrets for you" {
			t.Errorf("error = %+v, want the posted Runtime.ConfigError", fe)
		}
	})
}

func TestCloseKillsInstances(t *testing.T) {
	t.Parallel()
	fn := newFunction(t, "echo")
	done := make(chan error, 1)
	go func() {
		_, err := fn.Invoke(context.Background(), payload(t, action{Do: "hang"}))
		done <- err
	}()
	eventually(t, func() bool { return len(fn.ColdStarts()) == 1 }, "the instance to start")
	if err := fn.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err == nil {
		t.Error("an invocation in flight at Close succeeded")
	}
	if s := fn.Stats(); s.Live != 0 {
		t.Errorf("stats after Close = %+v, want nothing live", s)
	}
	if _, err := fn.Invoke(context.Background(), payload(t, action{})); err == nil {
		t.Error("Invoke after Close succeeded")
	}
}

// gate is a URL whose GET blocks until open is called.
func gate(t *testing.T) (string, func()) {
	t.Helper()
	ch := make(chan struct{})
	var once sync.Once
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-ch:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { once.Do(func() { close(ch) }) })
	return srv.URL, func() { once.Do(func() { close(ch) }) }
}

func streamURL(t *testing.T, fn lambdaruntime.StreamInvoker) string {
	t.Helper()
	srv := httptest.NewServer(&lambdaruntime.FunctionURL{
		Function: fn, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		CORS: &lambdaruntime.CORS{AllowOrigins: []string{"*"}, AllowMethods: []string{"GET"}, AllowHeaders: []string{"Authorization"}, MaxAge: time.Hour},
	})
	t.Cleanup(srv.Close)
	t.Cleanup(srv.Client().CloseIdleConnections)
	return srv.URL
}

func TestStreamedResponseArrivesAsWritten(t *testing.T) {
	t.Parallel()
	fn := newFunction(t, "stream")
	base := streamURL(t, fn)
	gateURL, open := gate(t)
	resp, err := http.Get(base + "/v1/events?first=hello&last=world&gate=" + url.QueryEscape(gateURL))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusTeapot || resp.Header.Get("Content-Type") != "text/plain" || resp.Header.Get("Set-Cookie") != "a=b" {
		t.Errorf("head = %d %v, want the prelude's 418, headers and cookie", resp.StatusCode, resp.Header)
	}
	// The first part arrives while the function is still running.
	first := make([]byte, 5)
	if _, err := io.ReadFull(resp.Body, first); err != nil || string(first) != "hello" {
		t.Fatalf("first part = %q, %v", first, err)
	}
	open()
	rest, err := io.ReadAll(resp.Body)
	if err != nil || string(rest) != "world" {
		t.Errorf("rest = %q, %v; want world", rest, err)
	}
	// The instance is warm again once the invocation has ended (which the
	// runtime learns just after the body's last byte).
	pid := resp.Header.Get("X-Pid")
	eventually(t, func() bool { return fn.Stats().Idle == 1 }, "the instance to be idle again")
	resp2, err := http.Get(base + "/?first=a&last=b")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp2.Body)
	resp2.Body.Close()
	if string(body) != "ab" || resp2.Header.Get("X-Pid") != pid {
		t.Errorf("second stream = %q from %s, want ab from the warm %s", body, resp2.Header.Get("X-Pid"), pid)
	}
}

func TestStreamFailures(t *testing.T) {
	t.Parallel()
	fn := newFunction(t, "stream")
	base := streamURL(t, fn)
	t.Run("before the head: 502", func(t *testing.T) {
		t.Parallel()
		resp, err := http.Get(base + "/?refuse=1")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadGateway {
			t.Errorf("status %d, want 502", resp.StatusCode)
		}
	})
	t.Run("mid-stream: the connection is cut", func(t *testing.T) {
		t.Parallel()
		resp, err := http.Get(base + "/?first=partial&fail=1")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err == nil {
			t.Errorf("the failed stream ended cleanly with %q", body)
		}
		if string(body) != "partial" {
			t.Errorf("body = %q, want what was written before the failure", body)
		}
	})
}

// TestStreamClientGoneLeavesTheInvocationRunning: as in AWS, a client that
// goes away does not stop a streaming invocation: the function writes on
// (its writes dropped) and holds its execution until its timeout ends it.
func TestStreamClientGoneLeavesTheInvocationRunning(t *testing.T) {
	t.Parallel()
	const timeout = 1500 * time.Millisecond
	fn := newFunction(t, "stream", func(c *lambdaruntime.FunctionConfig) { c.Timeout = timeout })
	srv := httptest.NewServer(&lambdaruntime.FunctionURL{Function: fn, Timeout: timeout, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/?first=x&hold=1", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(resp.Body)
	if b, err := br.ReadByte(); err != nil || b != 'x' {
		t.Fatalf("first byte = %q, %v", b, err)
	}
	cancel()
	resp.Body.Close()
	time.Sleep(timeout / 3)
	busy := func() int { st := fn.Stats(); return st.Live - st.Idle }
	if n := busy(); n != 1 {
		t.Fatalf("%d busy instances just after the client left, want the invocation still running", n)
	}
	eventually(t, func() bool { return busy() == 0 }, "the function's timeout to end the invocation")
	// The timed-out instance is replaced: a new stream is served.
	eventually(t, func() bool {
		resp, err := http.Get(srv.URL + "/?first=a&last=b")
		if err != nil {
			return false
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return string(body) == "ab"
	}, "a new stream served after the timeout")
}

// TestFunctionURLThrottlesBeyondItsConcurrency: a function URL whose
// function may run one invocation at a time answers a second request at
// once with Lambda's 429, and serves again once the first has ended.
func TestFunctionURLThrottlesBeyondItsConcurrency(t *testing.T) {
	t.Parallel()
	fn := newFunction(t, "stream")
	srv := httptest.NewServer(&lambdaruntime.FunctionURL{Function: fn, Concurrency: 1, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	t.Cleanup(srv.Close)
	gateURL, open := gate(t)
	first, err := http.Get(srv.URL + "/?first=x&last=y&gate=" + gateURL)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Body.Close()
	if b, err := bufio.NewReader(first.Body).ReadByte(); err != nil || b != 'x' {
		t.Fatalf("first byte = %q, %v", b, err)
	}
	second, err := http.Get(srv.URL + "/?first=a&last=b")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(second.Body)
	second.Body.Close()
	if second.StatusCode != http.StatusTooManyRequests || string(body) != lambdaruntime.ThrottledBody ||
		second.Header.Get("x-amzn-ErrorType") != "TooManyRequestsException" {
		t.Fatalf("a request beyond the concurrency: %s %q %v, want Lambda's throttle", second.Status, body, second.Header)
	}
	open()
	_, _ = io.ReadAll(first.Body)
	eventually(t, func() bool {
		resp, err := http.Get(srv.URL + "/?first=a&last=b")
		if err != nil {
			return false
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode != http.StatusTooManyRequests && string(body) == "ab"
	}, "a request served once the first invocation ended")
}

func TestFunctionURLAnswersPreflights(t *testing.T) {
	t.Parallel()
	base := streamURL(t, lambdaruntime.InProcessStream("never", nil))
	req, _ := http.NewRequest(http.MethodOptions, base+"/v1/events", nil)
	req.Header.Set("Origin", "http://127.0.0.1:8080")
	req.Header.Set("Access-Control-Request-Method", "GET")
	req.Header.Set("Access-Control-Request-Headers", "authorization")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	h := resp.Header
	if resp.StatusCode != 200 || h.Get("Access-Control-Allow-Origin") != "*" || h.Get("Access-Control-Allow-Headers") != "Authorization" || h.Get("Access-Control-Max-Age") != "3600" {
		t.Errorf("preflight = %d %v", resp.StatusCode, h)
	}
}
