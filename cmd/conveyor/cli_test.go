package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/conveyor/conveyor/internal/auth"
	"github.com/conveyor/conveyor/localstack/awstest"
)

func TestMain(m *testing.M) { awstest.Main(m) }

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// golden compares got with testdata/name.golden (or rewrites it with -update).
func golden(t *testing.T, name string, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s (-want +got)\n%s", path, diff)
	}
}

// fakeEnv is one environment's API: fixed answers, requests recorded.
type fakeEnv struct {
	token    string
	overview string
	mu       sync.Mutex
	requests []string
	dlq      int // messages left to redrive
}

func (f *fakeEnv) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.requests = append(f.requests, r.Method+" "+r.URL.RequestURI()+" "+strings.TrimSpace(string(body)))
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if r.Header.Get("Authorization") != "Bearer "+f.token {
		w.WriteHeader(401)
		io.WriteString(w, `{"error":{"code":"unauthorized","message":"token is expired"}}`)
		return
	}
	var in struct {
		JobIDs []string `json:"jobIds"`
		Max    int      `json:"max"`
	}
	_ = json.Unmarshal(body, &in)
	switch {
	case r.URL.Path == "/v1/admin/overview":
		io.WriteString(w, f.overview)
	case r.URL.Path == "/v1/admin/jobs/restart" || r.URL.Path == "/v1/admin/jobs/stop":
		done, skipped := []string{}, []map[string]string{}
		for _, id := range in.JobIDs {
			if strings.HasSuffix(id, "7") {
				skipped = append(skipped, map[string]string{"id": id, "reason": "job is running"})
			} else {
				done = append(done, id)
			}
		}
		key := "restarted"
		if strings.HasSuffix(r.URL.Path, "stop") {
			key = "stopped"
		}
		json.NewEncoder(w).Encode(map[string]any{key: done, "skipped": skipped})
	case r.URL.Path == "/v1/admin/dlq/low":
		io.WriteString(w, `{"messages":[
			{"messageId":"m1","jobId":"job_aaaaaaaaaaaaaaaaaaaaaaaaaa","kind":"publish","status":"failed","attempts":7,"error":{"code":"attempts_exhausted","message":"gave up after 7 attempts: 503","retryable":true},"sentAt":"2026-01-02T01:00:00Z","receiveCount":11},
			{"messageId":"m2","jobId":"job_bbbbbbbbbbbbbbbbbbbbbbbbbb","kind":"publish","status":"queued","attempts":2,"error":null,"sentAt":"2026-01-02T02:00:00Z","receiveCount":10},
			{"messageId":"m3","jobId":"","attempts":0,"error":{"code":"unreadable","message":"the message body is not a Conveyor message"},"sentAt":null,"receiveCount":10}]}`)
	case r.URL.Path == "/v1/admin/dlq/low/redrive":
		f.mu.Lock()
		n := f.dlq
		if len(in.JobIDs) > 0 {
			n = min(n, len(in.JobIDs))
		} else if in.Max > 0 {
			n = min(n, in.Max)
		}
		f.dlq -= n
		f.mu.Unlock()
		w.WriteHeader(202)
		json.NewEncoder(w).Encode(map[string]int{"moved": n})
	case r.URL.Path == "/v1/admin/tiers/low/pause":
		io.WriteString(w, `{"tier":"low","paused":true}`)
	case r.URL.Path == "/v1/admin/tiers/urgent/pause":
		w.WriteHeader(404)
		io.WriteString(w, `{"error":{"code":"unknown_tier","message":"no such tier (want one of high, medium, low, system)"}}`)
	case r.URL.Path == "/v1/admin/breakers/host:www.deviantart.com/reset":
		io.WriteString(w, `{"key":"host:www.deviantart.com","state":"closed"}`)
	case r.URL.Path == "/v1/admin/breakers":
		io.WriteString(w, `{"breakers":[{"key":"host:www.deviantart.com","state":"open","failures":5,"openUntil":"2026-01-02T03:09:05Z","updatedAt":"2026-01-02T03:04:05Z"}]}`)
	default:
		w.WriteHeader(404)
		io.WriteString(w, `{"error":{"code":"not_found","message":"no such resource"}}`)
	}
}

const prodRU = `{"environment":"prod-ru","generatedAt":"2026-01-02T03:04:05Z",
 "tiers":{"high":{"waiting":1,"inFlight":2,"delayed":0,"dlq":0,"paused":false},
          "medium":{"waiting":12,"inFlight":8,"delayed":0,"dlq":1,"paused":false},
          "low":{"waiting":340,"inFlight":5,"delayed":0,"dlq":3,"paused":true},
          "system":{"waiting":0,"inFlight":1,"delayed":0,"dlq":0,"paused":false}},
 "jobs":{"scheduled":2,"queued":353,"running":15,"succeeded":12000,"failed":70,"cancelled":3},
 "orphans":1,"recovery":null,
 "breakers":[{"key":"host:www.deviantart.com","state":"open","failures":5,"openUntil":"2026-01-02T03:09:05Z","updatedAt":"2026-01-02T03:04:05Z"},
             {"key":"token:0123456789abcdef","state":"closed","failures":2,"openUntil":null,"updatedAt":"2026-01-02T03:00:00Z"}],
 "stats":{"succeeded":1180,"failed":12}}`

const prodEN = `{"environment":"prod-en","generatedAt":"2026-01-02T03:04:05Z",
 "tiers":{"high":{"waiting":0,"inFlight":0,"delayed":0,"dlq":0,"paused":false},
          "medium":{"waiting":4,"inFlight":2,"delayed":1,"dlq":0,"paused":false},
          "low":{"waiting":20,"inFlight":3,"delayed":0,"dlq":0,"paused":false},
          "system":{"waiting":0,"inFlight":0,"delayed":0,"dlq":0,"paused":false}},
 "jobs":{"scheduled":0,"queued":24,"running":5,"succeeded":900,"failed":4,"cancelled":0},
 "orphans":0,"recovery":{"at":"2026-01-02T03:00:00Z","orphans":0,"requeued":0,"failedStuck":0,"released":0,"staled":12,"lost":0},
 "breakers":[],"stats":{"succeeded":310,"failed":1}}`

// fixture is a config file with four environments: two that answer, one
// whose API fails, one whose token is missing.
type fixture struct {
	dir    string
	config string
	envs   map[string]*fakeEnv
	getenv map[string]string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{dir: t.TempDir(), envs: map[string]*fakeEnv{}, getenv: map[string]string{"CONVEYOR_TOKEN_PROD_EN": "tok-en"}}
	f.envs["prod-ru"] = &fakeEnv{token: "tok-ru", overview: prodRU, dlq: 3}
	f.envs["prod-en"] = &fakeEnv{token: "tok-en", overview: prodEN}
	urls := map[string]string{}
	for name, e := range f.envs {
		srv := httptest.NewServer(e)
		t.Cleanup(srv.Close)
		urls[name] = srv.URL
	}
	broken := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(503)
		io.WriteString(w, `{"error":{"code":"unavailable","message":"DynamoDB is throttling the table"}}`)
	}))
	t.Cleanup(broken.Close)
	tokenFile := filepath.Join(f.dir, "prod-ru.token")
	if err := os.WriteFile(tokenFile, []byte("tok-ru\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := map[string]any{"environments": map[string]any{
		"prod-ru": map[string]string{"url": urls["prod-ru"] + "/", "tokenFile": tokenFile},
		"prod-en": map[string]string{"url": urls["prod-en"], "tokenEnv": "CONVEYOR_TOKEN_PROD_EN"},
		"staging": map[string]string{"url": broken.URL, "token": "tok-staging"},
		"dev":     map[string]string{"url": broken.URL, "tokenEnv": "CONVEYOR_TOKEN_DEV"},
	}}
	raw, _ := json.Marshal(cfg)
	f.config = filepath.Join(f.dir, "environments.json")
	if err := os.WriteFile(f.config, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// run runs the CLI with the fixture's config file.
func (f *fixture) run(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	return runCLI(t, f.getenv, append(args, "--config", f.config)...)
}

func runCLI(t *testing.T, env map[string]string, args ...string) (string, string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	c := &cli{stdout: &out, stderr: &errOut, getenv: func(k string) string { return env[k] },
		http: &http.Client{Timeout: 10 * time.Second}, now: time.Now}
	err := c.run(context.Background(), args)
	return out.String(), errOut.String(), err
}

func TestOverviewAcrossEnvironments(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	out, _, err := f.run(t, "overview")
	if !errors.Is(err, errPartial) {
		t.Errorf("exit: %v, want the partial-failure exit", err)
	}
	golden(t, "overview", out)

	// JSON: the same environments, the failures with their reasons.
	out, _, _ = f.run(t, "overview", "--json")
	golden(t, "overview_json", out)

	// A subset, all healthy: exit 0.
	out, _, err = f.run(t, "overview", "--env", "prod-ru, prod-en")
	if err != nil {
		t.Errorf("exit: %v", err)
	}
	golden(t, "overview_subset", out)

	if _, _, err := f.run(t, "overview", "--env", "prod-us"); err == nil || !strings.Contains(err.Error(), `unknown environment "prod-us"`) {
		t.Errorf("unknown environment: %v", err)
	}
}

func TestOverviewWatch(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	var out bytes.Buffer
	c := &cli{stdout: &out, stderr: io.Discard, getenv: func(k string) string { return f.getenv[k] }, http: http.DefaultClient, now: time.Now}
	ctx, cancel := context.WithTimeout(context.Background(), 700*time.Millisecond)
	defer cancel()
	if err := c.run(ctx, []string{"overview", "--env", "prod-en", "--watch", "200ms", "--config", f.config}); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(out.String(), "ENVIRONMENT  TIER"); n < 2 {
		t.Errorf("printed %d times in 700ms at 200ms", n)
	}
	if n := len(f.envs["prod-en"].requests); n < 2 {
		t.Errorf("fetched %d times", n)
	}
}

func TestJobsRestartAndStop(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	var ids []string
	for i := range 105 {
		ids = append(ids, "job_"+strings.Repeat("a", 23)+string(rune('a'+i/26%26))+string(rune('a'+i%26))+[]string{"2", "7"}[i%25/24])
	}
	out, stderr, err := f.run(t, append([]string{"jobs", "restart", "--env", "prod-ru"}, ids...)...)
	if !errors.Is(err, errPartial) {
		t.Errorf("exit: %v", err)
	}
	golden(t, "jobs_restart", out)
	if !strings.HasSuffix(stderr, "restart [##############################] 105/105 100%\n") {
		t.Errorf("progress: %q", stderr)
	}
	reqs := f.envs["prod-ru"].requests
	if len(reqs) != 2 || strings.Count(reqs[0], "job_") != 100 || strings.Count(reqs[1], "job_") != 5 {
		t.Errorf("requests: %d", len(reqs))
	}

	out, _, err = f.run(t, "jobs", "stop", "job_aaaaaaaaaaaaaaaaaaaaaaaaaa", "--env", "prod-en")
	if err != nil {
		t.Error(err)
	}
	golden(t, "jobs_stop", out)

	// An action runs in one environment, named.
	if _, _, err := f.run(t, "jobs", "stop", "job_aaaaaaaaaaaaaaaaaaaaaaaaaa"); err == nil || !strings.Contains(err.Error(), "--env") {
		t.Errorf("no --env with several environments: %v", err)
	}
	if _, _, err := f.run(t, "jobs", "stop", "job_aaaaaaaaaaaaaaaaaaaaaaaaaa", "--env", "prod-ru,prod-en"); err == nil {
		t.Error("two environments for an action were accepted")
	}
	if _, _, err := f.run(t, "jobs", "stop", "job_aaaaaaaaaaaaaaaaaaaaaaaaaa", "--env", "dev"); err == nil || !strings.Contains(err.Error(), "CONVEYOR_TOKEN_DEV") {
		t.Errorf("missing token: %v", err)
	}
}

func TestDLQTierAndBreakerCommands(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	var all bytes.Buffer
	for _, args := range [][]string{
		{"dlq", "peek", "low", "--env", "prod-ru", "--limit", "3"},
		{"dlq", "redrive", "low", "--env", "prod-ru", "--batch", "2"},
		{"tier", "pause", "low", "--env", "prod-ru"},
		{"breaker", "list", "--env", "prod-ru"},
		{"breaker", "reset", "host:www.deviantart.com", "--env", "prod-ru"},
	} {
		out, stderr, err := f.run(t, args...)
		if err != nil {
			t.Errorf("%v: %v", args, err)
		}
		all.WriteString("$ conveyor " + strings.Join(args, " ") + "\n" + out)
		if args[1] == "redrive" && !strings.HasSuffix(stderr, "redrive [##############################] 3/3 100%\n") {
			t.Errorf("redrive progress: %q", stderr)
		}
	}
	golden(t, "dlq_tier_breaker", all.String())
	want := []string{
		"GET /v1/admin/dlq/low?limit=3 ",
		"GET /v1/admin/overview ",
		`POST /v1/admin/dlq/low/redrive {"max":2}`,
		`POST /v1/admin/dlq/low/redrive {"max":2}`,
		"POST /v1/admin/tiers/low/pause ",
		"GET /v1/admin/breakers ",
		"POST /v1/admin/breakers/host:www.deviantart.com/reset ",
	}
	if diff := cmp.Diff(want, f.envs["prod-ru"].requests); diff != "" {
		t.Errorf("requests (-want +got)\n%s", diff)
	}
	_, _, err := f.run(t, "tier", "pause", "urgent", "--env", "prod-ru")
	if err == nil || err.Error() != "prod-ru: 404 unknown_tier: no such tier (want one of high, medium, low, system)" {
		t.Errorf("unknown tier: %v", err)
	}
}

func TestLocalEnvironmentFromEnvFile(t *testing.T) {
	t.Parallel()
	secret := "s3cret-s3cret-s3cret-s3cret-s3cret"
	var got auth.Claims
	var verr error
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, verr = auth.NewVerifier([]byte(secret), time.Now).Verify(r.Header.Get("Authorization"))
		io.WriteString(w, `{"tier":"low","paused":false}`)
	}))
	t.Cleanup(srv.Close)
	envFile := filepath.Join(t.TempDir(), "env")
	os.WriteFile(envFile, []byte("# Written by `make run`\nexport CONVEYOR_API_URL='"+srv.URL+"'\nexport CONVEYOR_JWT_SECRET='"+secret+"'\n"), 0o600)
	home := t.TempDir() // no config file: local is the default
	out, _, err := runCLI(t, map[string]string{"HOME": home}, "tier", "resume", "low", "--env-file", envFile)
	if err != nil || out != "local: tier low is running\n" {
		t.Fatalf("%q %v", out, err)
	}
	if verr != nil || got.Role != auth.RoleAdmin {
		t.Errorf("the minted token: %+v %v", got, verr)
	}
	_, _, err = runCLI(t, map[string]string{"HOME": home}, "overview", "--env-file", filepath.Join(home, "missing"))
	if !errors.Is(err, errPartial) {
		t.Errorf("no local stack: %v", err)
	}
}

func TestTokenStillMintsLocalTokens(t *testing.T) {
	t.Parallel()
	secret := "s3cret-s3cret-s3cret-s3cret-s3cret"
	out, _, err := runCLI(t, map[string]string{"CONVEYOR_JWT_SECRET": secret}, "token", "--sub", "u1", "--plan", "pro", "--role", "user")
	if err != nil {
		t.Fatal(err)
	}
	c, err := auth.NewVerifier([]byte(secret), time.Now).Verify("Bearer " + strings.TrimSpace(out))
	if err != nil || c.Subject != "u1" || c.Plan != "pro" || c.Role != auth.RoleUser {
		t.Errorf("%+v %v", c, err)
	}
	if _, _, err := runCLI(t, map[string]string{}, "token", "--env-file", "/nonexistent"); err == nil {
		t.Error("minted without a secret")
	}
}

func TestUsage(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{nil, {"frobnicate"}, {"jobs"}, {"jobs", "kill", "x"}, {"dlq", "peek"}, {"tier", "pause"}, {"overview", "extra"}} {
		if _, _, err := runCLI(t, map[string]string{"HOME": t.TempDir()}, args...); err == nil {
			t.Errorf("%v: no usage error", args)
		}
	}
}

// portRE hides the ports of test servers in golden output.
var portRE = regexp.MustCompile(`127\.0\.0\.1:\d+`)
