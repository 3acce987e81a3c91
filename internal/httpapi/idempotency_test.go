package httpapi_test

import (
	"net/http"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/conveyor/conveyor/internal/aws/store"
	"github.com/conveyor/conveyor/internal/clock"
	"github.com/conveyor/conveyor/internal/httpapi"
	"github.com/conveyor/conveyor/localstack/awstest"
	"gopkg.in/yaml.v3"
)

// bundle is a guard over the test's own table, a simulated clock, and a
// creating handler that counts what it created (and may be held).
type bundle struct {
	clk     *clock.Simulated
	h       httpapi.HandlerFunc
	mu      sync.Mutex
	created int
	hold    chan struct{} // when set, the handler waits on it
	entered chan struct{}
	status  int
}

func setup(t *testing.T) *bundle {
	t.Helper()
	env := awstest.Provision(t)
	b := &bundle{clk: clock.NewSimulated(time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)), status: http.StatusCreated}
	st := store.New(env.Clients.DynamoDB, env.Res.Definition.Table.Name, b.clk.Now)
	g := httpapi.Idempotency{Records: st, Window: time.Hour, InFlight: time.Minute, Now: b.clk.Now}
	b.h = g.Wrap("POST /v1/things", func(r *httpapi.Request) (httpapi.Response, error) {
		b.mu.Lock()
		hold, entered, status := b.hold, b.entered, b.status
		b.mu.Unlock()
		if entered != nil {
			entered <- struct{}{}
		}
		if hold != nil {
			<-hold
		}
		if status < 0 {
			panic("the request dies")
		}
		if status >= 400 {
			return httpapi.Response{}, httpapi.Unprocessable("not_yet", "", "not yet")
		}
		b.mu.Lock()
		b.created++
		n := b.created
		b.mu.Unlock()
		resp := httpapi.JSON(status, map[string]any{"thing": n})
		resp.Headers["Location"] = "/v1/things/" + string(rune('0'+n))
		return resp, nil
	})
	return b
}

// post calls the guarded handler as user with key (none when "") and body;
// an *httpapi.Error is returned as its status and code.
func (b *bundle) post(t *testing.T, user, key, body string) (int, string, httpapi.Response) {
	t.Helper()
	h := map[string]string{"content-type": "application/json"}
	if key != "" {
		h["idempotency-key"] = key
	}
	r := &httpapi.Request{Ctx: t.Context(), Raw: events.APIGatewayV2HTTPRequest{Headers: h, Body: body}, RequestID: "req", Claims: httpapi.Claims{Subject: user}}
	resp, err := b.h(r)
	if err != nil {
		e, ok := err.(*httpapi.Error)
		if !ok {
			t.Fatalf("handler error %v", err)
		}
		return e.Status, e.Code, resp
	}
	return resp.StatusCode, "", resp
}

func TestSameKeySameBodyReplaysWithinTheWindow(t *testing.T) {
	t.Parallel()
	b := setup(t)
	st, _, first := b.post(t, "u1", `"k-123"`, `{"a":1,"b":[1,2]}`)
	if st != 201 || first.Headers["Location"] == "" {
		t.Fatalf("first: %d %v", st, first)
	}
	// The same body, spelt otherwise (member order, spacing, a null).
	b.clk.Advance(59 * time.Minute)
	st, _, again := b.post(t, "u1", `"k-123"`, `{ "b":[1,2], "a":1, "c":null }`)
	if st != 201 || again.Body != first.Body || again.Headers["Location"] != first.Headers["Location"] || again.Headers[httpapi.IdempotentReplayedHeader] != "true" {
		t.Fatalf("repeat: %d %q %v; want the first response (201 %q) replayed", st, again.Body, again.Headers, first.Body)
	}
	if b.created != 1 {
		t.Errorf("created %d; want 1", b.created)
	}
	// Another user's same key is another key.
	if st, _, _ := b.post(t, "u2", `"k-123"`, `{"a":1,"b":[1,2]}`); st != 201 || b.created != 2 {
		t.Errorf("another user's key: %d, created %d; want a new creation", st, b.created)
	}
	// Past the window the key is free again.
	b.clk.Advance(2 * time.Minute)
	if st, _, resp := b.post(t, "u1", `"k-123"`, `{"a":1,"b":[1,2]}`); st != 201 || resp.Headers[httpapi.IdempotentReplayedHeader] != "" || b.created != 3 {
		t.Errorf("after the window: %d %v created %d; want handled anew", st, resp.Headers, b.created)
	}
}

func TestSameKeyAnotherBodyIs422(t *testing.T) {
	t.Parallel()
	b := setup(t)
	if st, _, _ := b.post(t, "u1", "k-1", `{"a":1}`); st != 201 {
		t.Fatal(st)
	}
	if st, code, _ := b.post(t, "u1", "k-1", `{"a":2}`); st != 422 || code != httpapi.CodeIdempotencyKeyReused {
		t.Errorf("another body: %d %s; want 422 %s", st, code, httpapi.CodeIdempotencyKeyReused)
	}
	if b.created != 1 {
		t.Errorf("created %d; want 1", b.created)
	}
}

func TestConcurrentDuplicateIs409(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.hold, b.entered = make(chan struct{}), make(chan struct{}, 1)
	done := make(chan int)
	go func() {
		st, _, _ := b.post(t, "u1", "k-c", `{"a":1}`)
		done <- st
	}()
	<-b.entered
	b.mu.Lock()
	b.entered = nil
	b.mu.Unlock()
	if st, code, _ := b.post(t, "u1", "k-c", `{"a":1}`); st != 409 || code != httpapi.CodeIdempotencyKeyInFlight {
		t.Errorf("while the first is in flight: %d %s; want 409 %s", st, code, httpapi.CodeIdempotencyKeyInFlight)
	}
	close(b.hold)
	if st := <-done; st != 201 {
		t.Fatalf("first: %d", st)
	}
	b.mu.Lock()
	b.hold = nil
	b.mu.Unlock()
	if st, _, resp := b.post(t, "u1", "k-c", `{"a":1}`); st != 201 || resp.Headers[httpapi.IdempotentReplayedHeader] != "true" || b.created != 1 {
		t.Errorf("after it: %d %v created %d; want the replay", st, resp.Headers, b.created)
	}
}

// A request that was not a success leaves the key free (the client may
// correct it and send it again with the same key); a request that died
// holding the key gives it up after the in-flight time.
func TestFailuresAndDeadRequestsFreeTheKey(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.status = 422
	if st, _, _ := b.post(t, "u1", "k-f", `{"a":1}`); st != 422 {
		t.Fatal(st)
	}
	b.status = 201
	if st, _, resp := b.post(t, "u1", "k-f", `{"a":1}`); st != 201 || resp.Headers[httpapi.IdempotentReplayedHeader] != "" {
		t.Errorf("after a 422: %d %v; want handled anew", st, resp.Headers)
	}

	b.status = -1
	func() {
		defer func() { _ = recover() }()
		b.post(t, "u1", "k-dead", `{"a":1}`)
	}()
	b.status = 201
	if st, code, _ := b.post(t, "u1", "k-dead", `{"a":1}`); st != 409 || code != httpapi.CodeIdempotencyKeyInFlight {
		t.Errorf("right after a request died holding the key: %d %s; want 409", st, code)
	}
	b.clk.Advance(61 * time.Second)
	if st, _, resp := b.post(t, "u1", "k-dead", `{"a":1}`); st != 201 || resp.Headers[httpapi.IdempotentReplayedHeader] != "" {
		t.Errorf("past the in-flight time: %d %v; want handled anew", st, resp.Headers)
	}
}

func TestParseIdempotencyKey(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in, want string
		ok       bool
	}{
		{`"8e03978e-40d5-43e8-bc93-6894a57f9324"`, "8e03978e-40d5-43e8-bc93-6894a57f9324", true},
		{"k-123", "k-123", true},
		{` "a b" `, "a b", true},
		{`""`, "", false},
		{"", "", false},
		{strings.Repeat("k", httpapi.MaxIdempotencyKey+1), "", false},
		{"caf\u00e9", "", false},
		{"a\x00b", "", false},
		{`"a\"b"`, "", false},
		{`"abc`, "", false},
		{`"`, "", false},
		{`a"`, `a"`, true},
		{strings.Repeat("k", httpapi.MaxIdempotencyKey), strings.Repeat("k", httpapi.MaxIdempotencyKey), true},
		{`"` + strings.Repeat("k", httpapi.MaxIdempotencyKey) + `"`, strings.Repeat("k", httpapi.MaxIdempotencyKey), true},
	} {
		got, err := httpapi.ParseIdempotencyKey(c.in)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("ParseIdempotencyKey(%q) = %q, %v; want %q ok=%v", c.in, got, err, c.want, c.ok)
		}
		// The spec's schema says the same (schemathesis holds the server to it).
		if spec := idempotencyKeyPattern(t).MatchString(c.in); spec != c.ok {
			t.Errorf("openapi.yaml's Idempotency-Key pattern matches %q: %t, the server accepts it: %t", c.in, spec, c.ok)
		}
	}
}

// idempotencyKeyPattern is openapi.yaml's pattern of the Idempotency-Key
// header.
func idempotencyKeyPattern(t *testing.T) *regexp.Regexp {
	t.Helper()
	raw, err := os.ReadFile(specPath)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Components struct {
			Parameters map[string]struct {
				Schema struct{ Pattern string } `yaml:"schema"`
			} `yaml:"parameters"`
		} `yaml:"components"`
	}
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	return regexp.MustCompile(doc.Components.Parameters["IdempotencyKey"].Schema.Pattern)
}
