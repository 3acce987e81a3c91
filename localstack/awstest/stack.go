package awstest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/conveyor/conveyor/internal/accounts"
	"github.com/conveyor/conveyor/internal/apiclient"
	"github.com/conveyor/conveyor/internal/config"
	"github.com/conveyor/conveyor/internal/httpapi"
	"github.com/conveyor/conveyor/internal/uploads"
	"github.com/conveyor/conveyor/localstack/simulator"
	"github.com/conveyor/conveyor/localstack/stack"
)

// Bundle is one test's running stack (Setup) and a way to call it the way
// a client does, through internal/apiclient: tokens, typed calls (Client)
// and raw ones (Call), presigned uploads confirmed by the S3 event,
// connected accounts, waiting for a job's status.
type Bundle struct {
	T     *testing.T
	Stack *stack.Stack
}

// Setup starts a local stack for t on freshly provisioned resources of the
// emulators, with compressed timings (a 200 ms heartbeat, 100–500 ms
// retries of jobs and of webhooks) under env's variables, and stops it
// when t ends.
func Setup(t *testing.T, env map[string]string, opts stack.Options) *Bundle {
	t.Helper()
	merged := map[string]string{"CONVEYOR_HEARTBEAT_INTERVAL": "200ms", "CONVEYOR_RETRY_BASE": "100ms", "CONVEYOR_RETRY_MAX": "500ms",
		"CONVEYOR_WEBHOOK_RETRY_BASE": "100ms", "CONVEYOR_WEBHOOK_RETRY_MAX": "500ms",
		// The tests push many requests through one owner; the rate's own
		// tests set config.RateLimitsDefault.
		config.VarRateLimits: stack.RateLimitsForLoad}
	for k, v := range env {
		merged[k] = v
	}
	opts.Endpoints, opts.Prefix, opts.APIAddr = Endpoints(t), Prefix(t), "127.0.0.1:0"
	opts.Getenv = func(k string) string { return merged[k] }
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewJSONHandler(LogTail(t), &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	if opts.Metrics == nil {
		opts.Metrics = io.Discard
	}
	s, err := stack.Start(context.Background(), opts)
	if err != nil {
		t.Fatalf("starting the stack: %v", err)
	}
	t.Cleanup(s.Close)
	return &Bundle{T: t, Stack: s}
}

// tailLines is how many of the stack's last log lines a failed test prints.
const tailLines = 200

// LogTail is a log destination for a stack the test starts: its last
// lines are printed if the test fails.
func LogTail(t testing.TB) io.Writer {
	tail := &logTail{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the stack's last %d log lines (%d access lines of answered GETs, the test's own polls among them, left out):\n%s",
				tailLines, tail.polls.Load(), tail.String())
		}
	})
	return tail
}

// logTail keeps the last tailLines lines written to it: the stack's logs,
// printed when its test fails and discarded when it passes. The API's
// access lines of answered GETs only count: a test waiting on a job polls
// it every 50 ms, and its lines would push out what the stack did.
type logTail struct {
	mu    sync.Mutex
	lines []string
	polls atomic.Int64
}

// isAnsweredGet reports whether line is the API's access line of a GET
// answered 200.
func isAnsweredGet(line []byte) bool {
	return bytes.Contains(line, []byte(`"msg":"request"`)) && bytes.Contains(line, []byte(`"method":"GET"`)) &&
		bytes.Contains(line, []byte(`"status":200,`))
}

func (l *logTail) Write(p []byte) (int, error) {
	if isAnsweredGet(p) {
		l.polls.Add(1)
		return len(p), nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, string(p))
	if len(l.lines) > 2*tailLines {
		l.lines = append(l.lines[:0], l.lines[len(l.lines)-tailLines:]...)
	}
	return len(p), nil
}

func (l *logTail) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines[max(0, len(l.lines)-tailLines):], "")
}

var (
	buildOnce  sync.Once
	bootstraps map[string]string
	buildErr   error
)

// Bootstraps builds every function's bootstrap for this host once per test
// binary and returns their paths, for stack.Options.Bootstraps (binary
// mode).
func Bootstraps(t testing.TB) map[string]string {
	t.Helper()
	buildOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		bootstraps, buildErr = stack.BuildFunctions(ctx, "", nil)
	})
	if buildErr != nil {
		t.Fatalf("building the functions: %v", buildErr)
	}
	return bootstraps
}

// token mints a JWT for user with plan and role.
func (b *Bundle) Token(sub, role, plan string) string {
	b.T.Helper()
	tok, err := httpapi.Mint(b.Stack.Config.JWTSecret, httpapi.Claims{Subject: sub, Role: httpapi.Role(role), Plan: plan, ExpiresAt: time.Now().Add(time.Hour)})
	if err != nil {
		b.T.Fatal(err)
	}
	return tok
}

// Client is a client of the stack's API that sends token (none when
// empty): the typed calls of internal/apiclient.
func (b *Bundle) Client(token string) *apiclient.Client {
	return apiclient.New(b.Stack.APIURL, apiclient.WithToken(token), apiclient.WithStreamURL(b.Stack.StreamURL))
}

// Response is an answer as it came, with its body decoded when it is a JSON
// object.
type Response struct {
	Status int
	Header http.Header
	Body   map[string]any
	Raw    []byte
}

func (r Response) ErrorCode() string {
	e, _ := r.Body["error"].(map[string]any)
	s, _ := e["code"].(string)
	return s
}

// Call sends a request as it is (apiclient's Do), for tests of what the
// typed calls would not send or of the answer's exact shape; body may be
// nil, a string or []byte (sent raw) or a value (sent as JSON); headers are
// name, value pairs.
func (b *Bundle) Call(method, path, token string, body any, headers ...string) Response {
	b.T.Helper()
	return b.CallAt(b.Stack.APIURL, method, path, token, body, headers...)
}

// CallAt is Call to another server of the stack's routes (the admin routes
// served apart by admintest).
func (b *Bundle) CallAt(baseURL, method, path, token string, body any, headers ...string) Response {
	b.T.Helper()
	h := http.Header{}
	for i := 0; i+1 < len(headers); i += 2 {
		h.Set(headers[i], headers[i+1])
	}
	a, err := apiclient.New(baseURL, apiclient.WithToken(token)).Do(context.Background(), method, path, body, h)
	if err != nil {
		b.T.Fatal(err)
	}
	r := Response{Status: a.Status, Header: a.Header, Raw: a.Body}
	_ = json.Unmarshal(a.Body, &r.Body)
	return r
}

func (b *Bundle) Must(r Response, status int) Response {
	b.T.Helper()
	if r.Status != status {
		b.T.Fatalf("status %d, want %d: %s", r.Status, status, r.Raw)
	}
	return r
}

// PNG is a real PNG of n×n pixels.
func PNG(_ testing.TB, n int) []byte { return simulator.PNG(n) }

// Upload signs, PUTs and waits until the S3 event confirmed the upload —
// no confirm call.
func (b *Bundle) Upload(token string, data []byte) string {
	b.T.Helper()
	ctx, c := context.Background(), b.Client(token)
	signed, err := c.SignUpload(ctx, uploads.SignRequest{Filename: "cat.png", ContentType: "image/png", Size: int64(len(data))})
	if err != nil {
		b.T.Fatalf("signing an upload: %v", err)
	}
	if err := c.PutObject(ctx, signed, data); err != nil {
		b.T.Fatalf("presigned PUT: %v", err)
	}
	b.Eventually(func() bool {
		u, err := c.GetUpload(ctx, signed.UploadID)
		return err == nil && u.Status == uploads.Confirmed
	}, "upload %s confirmed by the S3 event", signed.UploadID)
	return signed.UploadID
}

func (b *Bundle) Connect(token string) {
	b.T.Helper()
	err := b.Client(token).Connect(context.Background(), accounts.ConnectRequest{Provider: "deviantart", RefreshToken: "rt-" + fmt.Sprint(time.Now().UnixNano())})
	if err != nil {
		b.T.Fatalf("connecting the account: %v", err)
	}
}

// waitLimit bounds Eventually and WaitStatus. It only decides how long a
// broken test takes to fail: a passing one returns as soon as its
// condition holds, so it is generous for a loaded 2-core machine.
const waitLimit = 90 * time.Second

// Eventually waits until cond holds, checking it every 50 ms.
func (b *Bundle) Eventually(cond func() bool, format string, args ...any) {
	b.T.Helper()
	b.EventuallyEvery(50*time.Millisecond, cond, format, args...)
}

// EventuallyEvery waits until cond holds, checking it every interval: a
// condition that is dear to read is read less often than a job (the admin
// overview reads every active partition of the sweep index: about 200
// queries a read).
func (b *Bundle) EventuallyEvery(interval time.Duration, cond func() bool, format string, args ...any) {
	b.T.Helper()
	deadline := time.Now().Add(waitLimit)
	for !cond() {
		if time.Now().After(deadline) {
			b.T.Fatalf("timed out waiting: "+format, args...)
		}
		time.Sleep(interval)
	}
}

// WaitStatus polls the job until it reaches status.
func (b *Bundle) WaitStatus(token, id, status string) Response {
	b.T.Helper()
	deadline := time.Now().Add(waitLimit)
	for {
		r := b.Call("GET", "/v1/jobs/"+id, token, nil)
		if r.Body["status"] == status {
			return r
		}
		if time.Now().After(deadline) {
			b.T.Fatalf("timed out waiting for job %s to become %s; last seen: %s", id, status, r.Raw)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// SSEFrame is one Server-Sent Events message.
type SSEFrame struct{ ID, Event, Data string }

// ReadSSE reads an event stream's frames into a channel, closed (and body
// with it) when the stream ends.
func ReadSSE(body io.ReadCloser) <-chan SSEFrame {
	ch := make(chan SSEFrame, 100)
	go func() {
		defer close(ch)
		for e := range apiclient.NewStream(body).Chan() {
			ch <- SSEFrame{ID: e.ID, Event: e.Type, Data: e.Data}
		}
	}()
	return ch
}
