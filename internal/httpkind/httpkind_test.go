package httpkind_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/conveyor/conveyor/internal/httpkind"
	"github.com/conveyor/conveyor/internal/netguard"
	"github.com/conveyor/conveyor/internal/retry"
	"github.com/conveyor/conveyor/localstack/awstest"
	"github.com/conveyor/conveyor/localstack/stack"
)

func TestMain(m *testing.M) { awstest.Main(m) }

// target is a local HTTP endpoint that answers each call with the next
// scripted response and records the calls.
type target struct {
	mu     sync.Mutex
	script []func(w http.ResponseWriter, r *http.Request)
	calls  []*http.Request
	oks    int
	srv    *httptest.Server
}

func newTarget(t *testing.T, script ...func(w http.ResponseWriter, r *http.Request)) *target {
	tg := &target{script: script}
	tg.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tg.mu.Lock()
		n := len(tg.calls)
		tg.calls = append(tg.calls, r)
		step := tg.script[min(n, len(tg.script)-1)]
		tg.mu.Unlock()
		step(w, r)
	}))
	t.Cleanup(tg.srv.Close)
	return tg
}

func (tg *target) count() (calls, oks int) {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	return len(tg.calls), tg.oks
}

func status(code int) func(w http.ResponseWriter, r *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(code) }
}

func (tg *target) ok(body string) func(w http.ResponseWriter, r *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		tg.mu.Lock()
		tg.oks++
		tg.mu.Unlock()
		w.Header().Set("Content-Type", "text/plain")
		w.Header().Set("X-Secret-Internal", "not kept")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(body))
	}
}

// hang answers nothing until the caller gives up (its timeout), whatever
// the machine's speed.
func hang(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }

func submitHTTP(b *awstest.Bundle, tok string, params map[string]any) string {
	b.T.Helper()
	r := b.Must(b.Call("POST", "/v1/jobs", tok, map[string]any{"type": "http", "params": params}), 201)
	return r.Body["id"].(string)
}

func TestHTTPJobRetriesServerErrorsToSuccess(t *testing.T) {
	t.Parallel()
	b := awstest.Setup(t, nil, stack.Options{})
	tok := b.Token("u-http-retry", "user", "pro")
	tg := newTarget(t, nil)
	tg.script = []func(http.ResponseWriter, *http.Request){status(500), status(503), tg.ok(`{"ok":true}`)}
	id := submitHTTP(b, tok, map[string]any{"method": "put", "url": tg.srv.URL + "/hook",
		"headers": map[string]string{"x-api-key": "k1"}, "body": `{"n":1}`, "expectStatus": []int{200, 201}})
	r := b.WaitStatus(tok, id, "succeeded")
	if got := r.Body["attempts"].(float64); got != 3 {
		t.Errorf("attempts = %v, want 3 (two 5xx, then success)", got)
	}
	calls, oks := tg.count()
	if calls != 3 || oks != 1 {
		t.Errorf("target saw %d calls, %d successful; want 3 and 1", calls, oks)
	}
	res := r.Body["result"].(map[string]any)
	if res["status"].(float64) != 201 || res["body"] != `{"ok":true}` {
		t.Errorf("result = %v, want status 201 and the body", res)
	}
	hdrs := res["headers"].(map[string]any)
	if hdrs["content-type"] != "text/plain" || hdrs["x-secret-internal"] != nil {
		t.Errorf("result headers = %v, want the selected ones only", hdrs)
	}
	last := tg.calls[2]
	if last.Method != "PUT" || last.Header.Get("X-Api-Key") != "k1" || last.Header.Get("Idempotency-Key") != id {
		t.Errorf("request = %s with headers %v, want PUT with the job's headers and Idempotency-Key %s", last.Method, last.Header, id)
	}
	if r.Body["phases"].([]any)[0].(map[string]any)["status"] != "completed" {
		t.Errorf("phases = %v, want request completed", r.Body["phases"])
	}
}

func TestHTTPJobClientErrorFailsAtOnce(t *testing.T) {
	t.Parallel()
	b := awstest.Setup(t, nil, stack.Options{})
	tok := b.Token("u-http-404", "user", "free")
	tg := newTarget(t, status(404))
	id := submitHTTP(b, tok, map[string]any{"url": tg.srv.URL + "/gone"})
	r := b.WaitStatus(tok, id, "failed")
	if got := r.Body["attempts"].(float64); got != 1 {
		t.Errorf("attempts = %v, want 1", got)
	}
	e := r.Body["error"].(map[string]any)
	if e["retryable"] != false {
		t.Errorf("error = %v, want a permanent one", e)
	}
	if calls, _ := tg.count(); calls != 1 {
		t.Errorf("target called %d times, want 1", calls)
	}
	if res, _ := r.Body["result"].(map[string]any); res == nil || res["status"].(float64) != 404 {
		t.Errorf("result = %v, want the 404 kept", r.Body["result"])
	}
}

func TestHTTPJobTimeoutIsRetried(t *testing.T) {
	t.Parallel()
	b := awstest.Setup(t, nil, stack.Options{})
	tok := b.Token("u-http-slow", "user", "standard")
	tg := newTarget(t, nil)
	tg.script = []func(http.ResponseWriter, *http.Request){hang, tg.ok("late but fine")}
	id := submitHTTP(b, tok, map[string]any{"method": "GET", "url": tg.srv.URL, "timeoutMs": 500})
	r := b.WaitStatus(tok, id, "succeeded")
	if got := r.Body["attempts"].(float64); got != 2 {
		t.Errorf("attempts = %v, want 2 (a timeout, then success)", got)
	}
	if calls, oks := tg.count(); calls != 2 || oks != 1 {
		t.Errorf("target saw %d calls, %d successful; want 2 and 1", calls, oks)
	}
}

func TestARebindingTargetIsRefusedAtDialTime(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// At dial time too: a name that resolved to a public address when the
	// job was submitted and to loopback when it runs is refused, and the
	// refusal is permanent.
	tg := newTarget(t, status(200))
	tu, _ := url.Parse(tg.srv.URL)
	port := tu.Port()
	rebinding := httpkind.New(httpkind.Config{Resolver: &netguard.Rebinding{}})
	_, err := rebinding.Send(ctx, "u-test", "job_test", httpkind.Params{Method: "GET", URL: "https://hooks.example.com:" + port + "/x", TimeoutMs: 2000})
	if !errors.Is(err, netguard.ErrForbidden) || retry.Classify(err) != retry.ClassPermanent {
		t.Errorf("rebinding target: %v (class %v), want a permanent refusal", err, retry.Classify(err))
	}
	if calls, _ := tg.count(); calls != 0 {
		t.Errorf("the private target was called %d times", calls)
	}
}

func TestStatusErrorsClassify(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		status int
		want   retry.Class
	}{{500, retry.ClassTemporary}, {502, retry.ClassTemporary}, {429, retry.ClassTemporary}, {408, retry.ClassTemporary},
		{404, retry.ClassPermanent}, {400, retry.ClassPermanent}, {302, retry.ClassPermanent}, {200, retry.ClassPermanent}} {
		if got := retry.Classify(&httpkind.StatusError{Status: tc.status}); got != tc.want {
			t.Errorf("status %d: class %v, want %v", tc.status, got, tc.want)
		}
	}
	p := retry.Policy{Base: time.Second, Max: time.Minute, MaxAttempts: 5, Rand: func() float64 { return 0 }}
	d := p.Decide(&httpkind.StatusError{Status: 503, After: 30 * time.Second}, 1, now)
	if !d.Retry || d.Delay != 30*time.Second {
		t.Errorf("503 with Retry-After 30: %+v, want a retry in 30s", d)
	}
	if got := httpkind.RetryAfter("120", now); got != 2*time.Minute {
		t.Errorf("RetryAfter(120) = %v", got)
	}
	if got := httpkind.RetryAfter(now.Add(time.Minute).Format(http.TimeFormat), now); got != time.Minute {
		t.Errorf("RetryAfter(date) = %v", got)
	}
	if got := httpkind.RetryAfter("soon", now); got != 0 {
		t.Errorf("RetryAfter(soon) = %v", got)
	}
}

func TestRedactURL(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"https://hooks.example.com/x?token=abc&y=1", "https://hooks.example.com/x?[redacted]"},
		{"https://user:pw@hooks.example.com/x#frag", "https://hooks.example.com/x"},
		{"https://hooks.example.com/x", "https://hooks.example.com/x"},
		{"http://127.0.0.1:9/cb?", "http://127.0.0.1:9/cb?[redacted]"},
	} {
		if got := httpkind.RedactURL(tc.in); got != tc.want {
			t.Errorf("RedactURL(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestTransportErrorCarriesNoQuery: the client's *url.Error names the
// whole URL; what Send returns names it without the query, and keeps its
// class (a refused connection is temporary).
func TestTransportErrorCarriesNoQuery(t *testing.T) {
	t.Parallel()
	tg := newTarget(t, status(200))
	addr := tg.srv.Listener.Addr().String()
	tg.srv.Close()
	k := httpkind.New(httpkind.Config{Local: true})
	_, err := k.Send(context.Background(), "u1", "job_x", httpkind.Params{Method: "GET", URL: "http://" + addr + "/cb?sig=0123456789abcdef&x=1", TimeoutMs: 2000})
	if err == nil {
		t.Fatal("a closed port answered")
	}
	var ue *url.Error
	if msg := err.Error(); strings.Contains(msg, "0123456789abcdef") || !strings.Contains(msg, addr) || !errors.As(err, &ue) {
		t.Errorf("error %q: want the target named, the *url.Error kept, no query", msg)
	}
	if retry.Classify(err) != retry.ClassTemporary {
		t.Errorf("class %v, want temporary", retry.Classify(err))
	}
	_, err = url.Parse("http://x/%zz?sig=0123456789abcdef")
	if red := httpkind.Redact(err, "http://x/%zz?sig=0123456789abcdef"); strings.Contains(red.Error(), "0123456789abcdef") {
		t.Errorf("a parse error keeps the query: %v", red)
	}
}
