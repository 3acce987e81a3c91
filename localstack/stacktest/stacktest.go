// Package stacktest runs the whole local stack inside a test and talks to it
// the way a client does: tokens, JSON calls, presigned uploads confirmed by
// the S3 event, connected accounts, waiting for a job's status.
package stacktest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/conveyor/conveyor/internal/auth"
	"github.com/conveyor/conveyor/localstack/awstest"
	"github.com/conveyor/conveyor/localstack/stack"
)

// bundle is one test's running stack and a way to call it.
type Bundle struct {
	T     *testing.T
	Stack *stack.Stack
}

func Setup(t *testing.T, env map[string]string, opts stack.Options) *Bundle {
	t.Helper()
	merged := map[string]string{"CONVEYOR_HEARTBEAT_INTERVAL": "200ms", "CONVEYOR_RETRY_BASE": "100ms", "CONVEYOR_RETRY_MAX": "500ms"}
	for k, v := range env {
		merged[k] = v
	}
	opts.Endpoints, opts.Prefix, opts.APIAddr = awstest.Endpoints(t), awstest.Prefix(t), "127.0.0.1:0"
	opts.Getenv = func(k string) string { return merged[k] }
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewJSONHandler(io.Discard, nil))
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
	tok, err := auth.Mint(b.Stack.Config.JWTSecret, auth.Claims{Subject: sub, Role: auth.Role(role), Plan: plan, ExpiresAt: time.Now().Add(time.Hour)})
	if err != nil {
		b.T.Fatal(err)
	}
	return tok
}

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

// call sends a request; body may be nil, a string (sent raw) or a value
// (sent as JSON).
func (b *Bundle) Call(method, path, token string, body any, headers ...string) Response {
	b.T.Helper()
	var rd io.Reader
	switch v := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(v)
	case []byte:
		rd = bytes.NewReader(v)
	default:
		j, _ := json.Marshal(v)
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, b.Stack.APIURL+path, rd)
	if err != nil {
		b.T.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.T.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	r := Response{Status: resp.StatusCode, Header: resp.Header, Raw: raw}
	_ = json.Unmarshal(raw, &r.Body)
	return r
}

func (b *Bundle) Must(r Response, status int) Response {
	b.T.Helper()
	if r.Status != status {
		b.T.Fatalf("status %d, want %d: %s", r.Status, status, r.Raw)
	}
	return r
}

// pngBytes is a real PNG of n×n pixels.
func PNG(t *testing.T, n int) []byte {
	img := image.NewRGBA(image.Rect(0, 0, n, n))
	for i := range n {
		img.Set(i, i, color.RGBA{R: 200, A: 255})
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// upload signs, PUTs with a plain HTTP client and waits until the S3 event
// confirmed the upload — no confirm call.
func (b *Bundle) Upload(token string, data []byte) string {
	b.T.Helper()
	r := b.Must(b.Call("POST", "/v1/uploads/sign", token, map[string]any{"filename": "cat.png", "contentType": "image/png", "size": len(data)}), 201)
	id := r.Body["uploadId"].(string)
	req, _ := http.NewRequest(r.Body["method"].(string), r.Body["url"].(string), bytes.NewReader(data))
	for k, v := range r.Body["headers"].(map[string]any) {
		req.Header.Set(k, v.(string))
	}
	req.ContentLength = int64(len(data))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.T.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		b.T.Fatalf("presigned PUT: %s", resp.Status)
	}
	b.Eventually(func() bool {
		return b.Call("GET", "/v1/uploads/"+id, token, nil).Body["status"] == "confirmed"
	}, "upload %s confirmed by the S3 event", id)
	return id
}

func (b *Bundle) Connect(token string) {
	b.T.Helper()
	b.Must(b.Call("PUT", "/v1/account/connection", token, map[string]any{"provider": "deviantart", "refreshToken": "rt-" + fmt.Sprint(time.Now().UnixNano())}), 204)
}

// waitLimit bounds Eventually and WaitStatus. It only decides how long a
// broken test takes to fail: a passing one returns as soon as its
// condition holds, so it is generous for a loaded 2-core machine.
const waitLimit = 90 * time.Second

func (b *Bundle) Eventually(cond func() bool, format string, args ...any) {
	b.T.Helper()
	deadline := time.Now().Add(waitLimit)
	for !cond() {
		if time.Now().After(deadline) {
			b.T.Fatalf("timed out waiting: "+format, args...)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitStatus polls the job until it reaches status.
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
		defer body.Close()
		sc := bufio.NewScanner(body)
		var f SSEFrame
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				ch <- f
				f = SSEFrame{}
			case strings.HasPrefix(line, "id: "):
				f.ID = line[4:]
			case strings.HasPrefix(line, "event: "):
				f.Event = line[7:]
			case strings.HasPrefix(line, "data: "):
				f.Data = line[6:]
			}
		}
	}()
	return ch
}
