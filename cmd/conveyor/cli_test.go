package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/conveyor/conveyor/internal/httpapi"
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
	// inspector: the API serves the job inspector's routes.
	inspector bool
	mu        sync.Mutex
	requests  []string
	dlq       int // messages left to redrive
	matching  int // jobs a bulk filter selects
	// syncMax, when set, is the most matches a bulk call by filter
	// without limit acts on in the request: more start an operation,
	// which each read of it moves 40 jobs on (the last 2 skipped).
	syncMax int
	op      map[string]any
}

// operation serves the fake operation: each read moves it on.
func (f *fakeEnv) operation(w http.ResponseWriter, id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.op == nil || f.op["id"] != id {
		w.WriteHeader(404)
		io.WriteString(w, `{"error":{"code":"not_found","message":"no such operation"}}`)
		return
	}
	matched := f.op["matched"].(int)
	done := min(f.op["done"].(int)+40, matched-2)
	f.op["done"], f.op["progress"] = done, done*100/matched
	if done == matched-2 {
		f.op["status"], f.op["progress"], f.op["skipped"] = "succeeded", 100, map[string]int{"job is running": 2}
	}
	json.NewEncoder(w).Encode(f.op)
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
		JobIDs []string        `json:"jobIds"`
		Max    int             `json:"max"`
		Filter json.RawMessage `json:"filter"`
		Limit  *int            `json:"limit"`
		DryRun bool            `json:"dryRun"`
	}
	_ = json.Unmarshal(body, &in)
	switch {
	case (r.URL.Path == "/v1/admin/jobs/restart" || r.URL.Path == "/v1/admin/jobs/stop") && in.Filter != nil:
		f.mu.Lock()
		limit := 100
		if in.Limit != nil {
			limit = *in.Limit
		}
		matched := f.matching
		if f.syncMax > 0 && in.Limit == nil && !in.DryRun && matched > f.syncMax {
			action := "restart"
			if strings.HasSuffix(r.URL.Path, "stop") {
				action = "stop"
			}
			f.op = map[string]any{"id": "op_01hzzzzzzzzzzzzzzzzzzzzzzz", "action": action, "filter": in.Filter, "status": "running",
				"matched": matched, "done": 0, "skipped": map[string]int{}, "progress": 0, "error": nil,
				"createdAt": "2026-01-02T03:04:05Z", "updatedAt": "2026-01-02T03:04:05Z"}
			f.matching = 0
			f.mu.Unlock()
			w.Header().Set("Location", "/v1/admin/operations/"+f.op["id"].(string))
			w.WriteHeader(202)
			json.NewEncoder(w).Encode(f.op)
			return
		}
		var took []string
		for i := range min(limit, matched) {
			took = append(took, fmt.Sprintf("job_%026d", matched-i))
		}
		done, key := took, "restarted"
		if in.DryRun {
			done = []string{}
		} else {
			f.matching -= len(took)
		}
		f.mu.Unlock()
		if strings.HasSuffix(r.URL.Path, "stop") {
			key = "stopped"
		}
		json.NewEncoder(w).Encode(map[string]any{key: done, "skipped": []string{}, "dryRun": in.DryRun, "matched": matched, "limit": limit, "jobIds": took})
	case strings.HasPrefix(r.URL.Path, "/v1/admin/operations/"):
		f.operation(w, strings.TrimPrefix(r.URL.Path, "/v1/admin/operations/"))
	case r.URL.Path == "/v1/admin/overview":
		io.WriteString(w, f.overview)
	case f.inspector && r.URL.Path == "/v1/admin/jobs" && r.Method == http.MethodGet:
		w.Header().Set("X-Total-Count", "3")
		if r.URL.Query().Get("limit") == "0" {
			io.WriteString(w, `{"jobs":[],"nextCursor":null}`)
			return
		}
		io.WriteString(w, `{"jobs":[`+inspectedJob+`],"nextCursor":"c2"}`)
	case f.inspector && r.URL.Path == "/v1/admin/jobs/job_cccccccccccccccccccccccccc":
		io.WriteString(w, inspectedJob)
	case f.inspector && r.URL.Path == "/v1/admin/orphans":
		io.WriteString(w, `{"orphans":[{"jobId":"job_dddddddddddddddddddddddddd","owner":"u2","tier":"low","status":"queued","since":"2026-01-02T02:00:00Z","reason":"queued_unreceived"}]}`)
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
 "stats":{"hours":[],"succeeded":1180,"failed":12,"cancelled":3}}`

const prodEN = `{"environment":"prod-en","generatedAt":"2026-01-02T03:04:05Z",
 "tiers":{"high":{"waiting":0,"inFlight":0,"delayed":0,"dlq":0,"paused":false},
          "medium":{"waiting":4,"inFlight":2,"delayed":1,"dlq":0,"paused":false},
          "low":{"waiting":20,"inFlight":3,"delayed":0,"dlq":0,"paused":false},
          "system":{"waiting":0,"inFlight":0,"delayed":0,"dlq":0,"paused":false}},
 "jobs":{"scheduled":0,"queued":24,"running":5,"succeeded":900,"failed":4,"cancelled":0},
 "orphans":0,"recovery":{"at":"2026-01-02T03:00:00Z","orphans":0,"requeued":0,"failedStuck":0,"released":0,"staled":12,"lost":0},
 "breakers":[],"stats":{"hours":[],"succeeded":310,"failed":1,"cancelled":0}}`

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
	f.envs["prod-ru"] = &fakeEnv{token: "tok-ru", overview: prodRU, dlq: 3, inspector: true}
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
	err := testCLI(env, &out, &errOut, false).run(context.Background(), args)
	return out.String(), errOut.String(), err
}

// testCLI is a cli whose environment is env and whose stderr is a terminal
// when tty is set. Its HTTP client times out as the CLI's own does (main):
// an overview's counts are dozens of queries, which a DynamoDB Local busy
// with the rest of the suite has taken more than 10 s to answer.
func testCLI(env map[string]string, stdout, stderr io.Writer, tty bool) *cli {
	return &cli{stdout: stdout, stderr: stderr, getenv: func(k string) string { return env[k] },
		http: &http.Client{Timeout: 30 * time.Second}, now: time.Now, tty: tty, opPoll: time.Millisecond}
}

// runMain runs the CLI as the process would: it returns what it printed
// and the exit status.
func runMain(t *testing.T, env map[string]string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = testCLI(env, &out, &errOut, false).main(context.Background(), args)
	return out.String(), errOut.String(), code
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
	c := testCLI(f.getenv, &out, io.Discard, false)
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
	if stderr != "" {
		t.Errorf("stderr is not a terminal, yet: %q", stderr)
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

// TestJobsRestartAndStopByFilter: the filter flags become the API's filter;
// --dry-run changes nothing; --all calls until nothing matches; ids and a
// filter together are a usage error.
func TestJobsRestartAndStopByFilter(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	env := f.envs["prod-ru"]
	env.matching = 230

	out, _, err := f.run(t, "jobs", "restart", "--env", "prod-ru", "--status", "failed", "--tier", "low", "--error-code", "attempts_exhausted", "--limit", "3", "--dry-run")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "230 jobs match status=failed tier=low errorCode=attempts_exhausted; a restart would take 3 (limit 3), nothing changed") || env.matching != 230 {
		t.Errorf("dry run: %q, %d left", out, env.matching)
	}
	if got := env.requests[0]; !strings.Contains(got, `"filter":{"status":"failed","tier":"low","errorCode":"attempts_exhausted"}`) || !strings.Contains(got, `"limit":3`) || !strings.Contains(got, `"dryRun":true`) {
		t.Errorf("request: %s", got)
	}

	out, _, err = f.run(t, "jobs", "restart", "--env", "prod-ru", "--status", "failed")
	if err != nil || !strings.HasSuffix(out, "prod-ru: 230 matched status=failed, 100 restarted, 0 skipped\n") || env.matching != 130 {
		t.Errorf("one call: %v %q, %d left", err, out[max(0, len(out)-80):], env.matching)
	}
	out, _, err = f.run(t, "jobs", "stop", "--env", "prod-ru", "--status", "queued", "--all", "--json")
	if err != nil || !strings.Contains(out, `"matched": 130`) || strings.Count(out, "job_") != 130 || env.matching != 0 {
		t.Errorf("--all: %v, %d ids, %d left", err, strings.Count(out, "job_"), env.matching)
	}

	for _, bad := range [][]string{
		{"jobs", "stop", "--env", "prod-ru", "--status", "queued", "job_aaaaaaaaaaaaaaaaaaaaaaaaaa"},
		{"jobs", "stop", "--env", "prod-ru", "--dry-run", "job_aaaaaaaaaaaaaaaaaaaaaaaaaa"},
		{"jobs", "stop", "--env", "prod-ru"},
		{"jobs", "stop", "--env", "prod-ru", "--status", "queued", "--all", "--limit", "5"},
		{"jobs", "stop", "--env", "prod-ru", "--status", "queued", "--limit", "500"},
	} {
		if _, _, err := f.run(t, bad...); exitCode(err) != exitUsage {
			t.Errorf("%v: %v, want a usage error", bad, err)
		}
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
		if stderr != "" {
			t.Errorf("%v: stderr: %q", args, stderr)
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
	var got httpapi.Claims
	var verr error
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, verr = httpapi.NewVerifier([]byte(secret), time.Now).Verify(r.Header.Get("Authorization"))
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
	if verr != nil || got.Role != httpapi.RoleAdmin {
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
	c, err := httpapi.NewVerifier([]byte(secret), time.Now).Verify("Bearer " + strings.TrimSpace(out))
	if err != nil || c.Subject != "u1" || c.Plan != "pro" || c.Role != httpapi.RoleUser {
		t.Errorf("%+v %v", c, err)
	}
	if _, _, err := runCLI(t, map[string]string{}, "token", "--env-file", "/nonexistent"); err == nil {
		t.Error("minted without a secret")
	}
}

const inspectedJob = `{"id":"job_cccccccccccccccccccccccccc","type":"publish","status":"failed","tier":"low","phase":"failed","progress":50,
 "phases":[{"name":"upload","status":"completed","progress":100,"message":"","startedAt":"2026-01-02T01:00:00Z","completedAt":"2026-01-02T01:00:05Z","error":null},
           {"name":"publish","status":"failed","progress":0,"message":"","startedAt":"2026-01-02T01:00:05Z","completedAt":null,"error":{"code":"attempts_exhausted","message":"gave up","retryable":true}}],
 "items":[{"id":"itm_aaaaaaaaaaaaaaaaaaaaaaaaaa","uploadId":"upl_aaaaaaaaaaaaaaaaaaaaaaaaaa","status":"uploaded","output":null}],
 "params":{"title":"A cat"},"attempts":7,"maxAttempts":7,"error":{"code":"attempts_exhausted","message":"gave up after 7 attempts","retryable":true},"result":null,
 "createdAt":"2026-01-02T00:59:00Z","updatedAt":"2026-01-02T01:10:00Z","scheduleAt":null,"startedAt":"2026-01-02T01:00:00Z","finishedAt":"2026-01-02T01:10:00Z","owner":"u1"}`

func TestUsageExitsTwo(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		nil, {"frobnicate"}, {"jobs"}, {"jobs", "kill", "x"}, {"dlq"}, {"dlq", "peek"}, {"tier", "pause"},
		{"tier", "pause", "low", "high"}, {"overview", "extra"}, {"overview", "--bogus"}, {"overview", "--watch", "soon"},
		{"overview", "--watch", "1ms"}, {"dlq", "peek", "low", "--batch", "5"}, {"jobs", "get"}, {"jobs", "restart"},
		{"jobs", "list", "--created-from", "yesterday"}, {"jobs", "list", "--limit", "500"}, {"token", "--role", "root"},
		{"completion"}, {"completion", "tcsh"}, {"-env", "x", "overview"}, {"jobs", "stop", "job_x", "--env", "a,b"},
	} {
		stdout, stderr, code := runMain(t, map[string]string{"HOME": t.TempDir()}, args...)
		if code != exitUsage {
			t.Errorf("%v: exit %d, want %d (stderr %q)", args, code, exitUsage, stderr)
		}
		if stdout != "" || !strings.HasPrefix(stderr, "conveyor: ") || !strings.Contains(stderr, "--help' for usage") {
			t.Errorf("%v: stdout %q, stderr %q", args, stdout, stderr)
		}
	}
}

func TestHelpGoesToStdoutAndExitsZero(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"--help"}, {"-h"}, {"help"}, {"help", "jobs"}, {"jobs", "--help"}, {"jobs", "list", "--help"}, {"jobs", "get", "-h"},
		{"jobs", "orphans", "--help"}, {"jobs", "restart", "--help"}, {"jobs", "stop", "--help"}, {"dlq", "--help"},
		{"dlq", "peek", "--help"}, {"dlq", "redrive", "--help"}, {"tier", "pause", "--help"}, {"tier", "resume", "--help"},
		{"breaker", "list", "--help"}, {"breakers", "reset", "--help"}, {"overview", "--help"}, {"token", "--help"},
		{"completion", "--help"}, {"completion", "bash", "--help"}, {"version", "--help"},
		{"operations", "--help"}, {"operations", "get", "--help"},
	} {
		stdout, stderr, code := runMain(t, nil, args...)
		if code != exitOK || stderr != "" || !strings.Contains(stdout, "Usage:") {
			t.Errorf("%v: exit %d, stderr %q, stdout %.80q", args, code, stderr, stdout)
		}
	}
	// Flags belong to their command: peek's help lists --limit, not --batch.
	peek, _, _ := runMain(t, nil, "dlq", "peek", "--help")
	redrive, _, _ := runMain(t, nil, "dlq", "redrive", "--help")
	if !strings.Contains(peek, "--limit") || strings.Contains(peek, "--batch") || strings.Contains(peek, "--task") {
		t.Errorf("dlq peek --help:\n%s", peek)
	}
	if !strings.Contains(redrive, "--batch") || strings.Contains(redrive, "--limit") {
		t.Errorf("dlq redrive --help:\n%s", redrive)
	}
	root, _, _ := runMain(t, nil, "--help")
	for _, cmd := range []string{"overview", "jobs", "dlq", "tier", "breaker", "operations", "token", "completion", "version"} {
		if !strings.Contains(root, "\n  "+cmd+" ") {
			t.Errorf("--help does not list %s:\n%s", cmd, root)
		}
	}
}

func TestVersion(t *testing.T) {
	t.Parallel()
	out, stderr, code := runMain(t, nil, "--version")
	if code != 0 || stderr != "" || !strings.HasPrefix(out, "conveyor ") || strings.TrimSpace(out) == "conveyor" {
		t.Errorf("--version: %d %q %q", code, out, stderr)
	}
	out, _, code = runMain(t, nil, "version", "--json")
	var v versionInfo
	if err := json.Unmarshal([]byte(out), &v); code != 0 || err != nil || v.String() != buildVersion() || v.Version == "" || v.Go == "" {
		t.Errorf("version --json: %d %q %v", code, out, err)
	}
}

// TestVersionFromBuildInfo: the module's version and the commit it was
// built from, never "(devel)" alone.
func TestVersionFromBuildInfo(t *testing.T) {
	t.Parallel()
	stamped := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/conveyor/conveyor", Version: "v0.0.0-20260102150405-0123456789ab+dirty"},
		Settings: []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: "0123456789abcdef0123456789abcdef01234567"}, {Key: "vcs.time", Value: "2026-01-02T15:04:05Z"}, {Key: "vcs.modified", Value: "true"}}}
	for _, tc := range []struct {
		bi   *debug.BuildInfo
		want string
	}{
		{stamped, "v0.0.0-20260102150405-0123456789ab+dirty (revision 0123456789ab, 2026-01-02T15:04:05Z, modified) go1.26.8"},
		{&debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}}, "(devel) (" + noVCS + ") go1.26.8"},
		{nil, "(devel) (" + noVCS + ")"},
	} {
		if got := readVersion(tc.bi).String(); got != tc.want {
			t.Errorf("got  %q\nwant %q", got, tc.want)
		}
	}
	raw, _ := json.Marshal(readVersion(stamped))
	if want := `{"version":"v0.0.0-20260102150405-0123456789ab+dirty","revision":"0123456789abcdef0123456789abcdef01234567","time":"2026-01-02T15:04:05Z","modified":true,"go":"go1.26.8","note":""}`; string(raw) != want {
		t.Errorf("json %s", raw)
	}
}

func TestCompletion(t *testing.T) {
	t.Parallel()
	for shell, marker := range map[string]string{"bash": "complete -o default -F __start_conveyor conveyor", "zsh": "#compdef conveyor", "fish": "complete -c conveyor", "powershell": "Register-ArgumentCompleter"} {
		out, stderr, code := runMain(t, nil, "completion", shell)
		if code != 0 || stderr != "" || !strings.Contains(out, marker) {
			t.Errorf("completion %s: exit %d, stderr %q, no %q in %.200q", shell, code, stderr, marker, out)
		}
	}
	// What the scripts ask for: tiers as arguments, environments for --env.
	out, _, _ := runMain(t, nil, "__complete", "dlq", "peek", "")
	if !strings.HasPrefix(out, "high\nmedium\nlow\nsystem\n:4\n") {
		t.Errorf("tier completion: %q", out)
	}
	f := newFixture(t)
	out, _, _ = runMain(t, nil, "__complete", "overview", "--config", f.config, "--env", "")
	if !strings.HasPrefix(out, "dev\nlocal\nprod-en\nprod-ru\nstaging\n:4\n") {
		t.Errorf("--env completion: %q", out)
	}
}

// TestJSONEverywhere: every command that prints takes --json and prints
// one JSON value of the documented shape on stdout.
func TestJSONEverywhere(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	keys := func(raw string) string {
		var m map[string]json.RawMessage
		if err := json.Unmarshal([]byte(raw), &m); err != nil {
			return "not a JSON object: " + err.Error()
		}
		return strings.Join(sortedKeys(m), ",")
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"overview", "--env", "prod-ru", "--config", f.config}, "environments"},
		{[]string{"jobs", "list", "--env", "prod-ru", "--status", "failed", "--config", f.config}, "environment,jobs,nextCursor,total"},
		{[]string{"jobs", "get", "job_cccccccccccccccccccccccccc", "--env", "prod-ru", "--config", f.config}, "attempts,createdAt,error,finishedAt,id,items,maxAttempts,owner,params,phase,phases,progress,result,scheduleAt,startedAt,status,tier,type,updatedAt,wait"},
		{[]string{"jobs", "orphans", "--env", "prod-ru", "--config", f.config}, "environment,orphans"},
		{[]string{"jobs", "restart", "job_aaaaaaaaaaaaaaaaaaaaaaaaaa", "--env", "prod-ru", "--config", f.config}, "environment,restarted,skipped"},
		{[]string{"jobs", "stop", "job_aaaaaaaaaaaaaaaaaaaaaaaaaa", "--env", "prod-ru", "--config", f.config}, "environment,skipped,stopped"},
		{[]string{"dlq", "peek", "low", "--env", "prod-ru", "--config", f.config}, "messages"},
		{[]string{"dlq", "redrive", "low", "--env", "prod-ru", "--config", f.config}, "environment,moved,tier"},
		{[]string{"tier", "pause", "low", "--env", "prod-ru", "--config", f.config}, "paused,tier"},
		{[]string{"breaker", "list", "--env", "prod-ru", "--config", f.config}, "breakers"},
		{[]string{"breaker", "reset", "host:www.deviantart.com", "--env", "prod-ru", "--config", f.config}, "key,state"},
		{[]string{"token", "--sub", "u1"}, "expiresAt,plan,role,sub,token"},
		{[]string{"version"}, "go,modified,note,revision,time,version"},
	} {
		env := map[string]string{"CONVEYOR_JWT_SECRET": "s3cret-s3cret-s3cret-s3cret-s3cret"}
		out, stderr, code := runMain(t, env, append(tc.args, "--json")...)
		if code != 0 {
			t.Errorf("%v: exit %d: %s", tc.args, code, stderr)
		}
		if got := keys(out); got != tc.want {
			t.Errorf("%v --json: keys %s, want %s\n%s", tc.args, got, tc.want, out)
		}
	}
	// The list's page: the owner of each job, the total from X-Total-Count.
	out, _, _ := runMain(t, nil, "jobs", "list", "--env", "prod-ru", "--json", "--config", f.config)
	var page struct {
		Jobs []struct {
			ID, Owner string
		}
		NextCursor *string
		Total      *int
	}
	if err := json.Unmarshal([]byte(out), &page); err != nil || len(page.Jobs) != 1 || page.Jobs[0].Owner != "u1" || page.Total == nil || *page.Total != 3 || page.NextCursor == nil || *page.NextCursor != "c2" {
		t.Errorf("jobs list --json: %v %s", err, out)
	}
}

func TestInspectorCommands(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	var all bytes.Buffer
	for _, args := range [][]string{
		{"jobs", "list", "--env", "prod-ru", "--status", "failed", "--tier", "low", "--owner", "u1", "--type", "publish", "--error-code", "attempts_exhausted", "--created-from", "2026-01-01T00:00:00Z", "--created-to", "2026-01-03T00:00:00Z", "--limit", "1", "--cursor", "c1"},
		{"jobs", "get", "job_cccccccccccccccccccccccccc", "--env", "prod-ru"},
		{"jobs", "orphans", "--env", "prod-ru"},
	} {
		out, stderr, code := runMain(t, nil, append(args, "--config", f.config)...)
		if code != 0 {
			t.Errorf("%v: exit %d: %s", args, code, stderr)
		}
		all.WriteString("$ conveyor " + strings.Join(args, " ") + "\n" + out)
	}
	golden(t, "inspector", all.String())
	want := []string{
		"GET /v1/admin/jobs?createdFrom=2026-01-01T00%3A00%3A00Z&createdTo=2026-01-03T00%3A00%3A00Z&cursor=c1&errorCode=attempts_exhausted&limit=1&owner=u1&status=failed&tier=low&type=publish ",
		"GET /v1/admin/jobs/job_cccccccccccccccccccccccccc ",
		"GET /v1/admin/orphans ",
	}
	if diff := cmp.Diff(want, f.envs["prod-ru"].requests); diff != "" {
		t.Errorf("requests (-want +got)\n%s", diff)
	}

	// An unknown job where the inspector exists: said so, exit 1.
	_, stderr, code := runMain(t, nil, "jobs", "get", "job_zzzzzzzzzzzzzzzzzzzzzzzzzz", "--env", "prod-ru", "--config", f.config)
	if code != exitFailure || stderr != "conveyor: prod-ru: no job job_zzzzzzzzzzzzzzzzzzzzzzzzzz\n" {
		t.Errorf("unknown job: %d %q", code, stderr)
	}
	// An API without the inspector (404 on its routes): a clear error, exit 1.
	for _, args := range [][]string{{"jobs", "list"}, {"jobs", "get", "job_cccccccccccccccccccccccccc"}, {"jobs", "orphans"}} {
		stdout, stderr, code := runMain(t, f.getenv, append(args, "--env", "prod-en", "--config", f.config)...)
		if code != exitFailure || stdout != "" || !strings.Contains(stderr, "prod-en: the API does not serve the job inspector") {
			t.Errorf("%v without an inspector: exit %d, stdout %q, stderr %q", args, code, stdout, stderr)
		}
	}
}

// TestProgressOnlyOnATerminal: the bar redraws itself with \r on a
// terminal, and writes nothing when stderr is a pipe or a file.
// TestJobsStopByFilterFollowsTheOperation: when the API runs a large
// filter as an operation (202), the bulk command follows it until it has
// finished — a bar on stderr on a terminal — and prints it as it
// finished (--json: the operation); skipped jobs make it partial.
// `operations get` reads it again, and --wait follows a running one.
func TestJobsStopByFilterFollowsTheOperation(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	env := f.envs["prod-ru"]
	env.matching, env.syncMax = 100, 5

	var out, errOut bytes.Buffer
	err := testCLI(f.getenv, &out, &errOut, true).run(context.Background(), []string{"jobs", "stop", "--env", "prod-ru", "--status", "queued", "--json", "--config", f.config})
	if exitCode(err) != exitCode(errPartial) {
		t.Errorf("exit: %v, want partial (2 skipped)", err)
	}
	var got map[string]any
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatalf("--json: %v: %s", err, out.String())
	}
	if got["environment"] != "prod-ru" || got["id"] != "op_01hzzzzzzzzzzzzzzzzzzzzzzz" || got["status"] != "succeeded" || got["done"] != 98.0 || got["matched"] != 100.0 ||
		got["progress"] != 100.0 || got["skipped"].(map[string]any)["job is running"] != 2.0 {
		t.Errorf("--json: %s", out.String())
	}
	bar := errOut.String()
	for _, step := range []string{"stop op_01hzzzzzzzzzzzzzzzzzzzzzzz [", "] 0/100   0%", "] 40/100  40%", "] 80/100  80%", "] 100/100 100%\n"} {
		if !strings.Contains(bar, step) {
			t.Errorf("stderr %q lacks %q", bar, step)
		}
	}
	if strings.Contains(out.String(), "\r") {
		t.Errorf("\\r on stdout: %q", out.String())
	}

	stdout, _, err := f.run(t, "operations", "get", "op_01hzzzzzzzzzzzzzzzzzzzzzzz", "--env", "prod-ru")
	if exitCode(err) != exitCode(errPartial) || !strings.Contains(stdout, "prod-ru: operation op_01hzzzzzzzzzzzzzzzzzzzzzzz (stop status=queued): succeeded, 100%: 100 matched, 98 stopped, 2 skipped\n  skipped 2: job is running\n") {
		t.Errorf("operations get: %v %q", err, stdout)
	}
	if _, _, err := f.run(t, "operations", "get", "op_01hyyyyyyyyyyyyyyyyyyyyyyy", "--env", "prod-ru"); err == nil || !strings.Contains(err.Error(), "no operation") {
		t.Errorf("operations get (unknown): %v", err)
	}

	env.matching = 50
	stdout, _, err = f.run(t, "jobs", "restart", "--env", "prod-ru", "--status", "failed")
	if exitCode(err) != exitCode(errPartial) || !strings.HasPrefix(stdout, "prod-ru: operation op_01hzzzzzzzzzzzzzzzzzzzzzzz (restart status=failed): succeeded, 100%: 50 matched, 48 restarted, 2 skipped") {
		t.Errorf("restart: %v %q", err, stdout)
	}
	env.mu.Lock()
	env.op["status"], env.op["done"] = "running", 0
	env.mu.Unlock()
	stdout, _, err = f.run(t, "operations", "get", "op_01hzzzzzzzzzzzzzzzzzzzzzzz", "--env", "prod-ru", "--wait", "--json")
	if exitCode(err) != exitCode(errPartial) || !strings.Contains(stdout, `"status": "succeeded"`) {
		t.Errorf("operations get --wait: %v %q", err, stdout)
	}
}

func TestProgressOnlyOnATerminal(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	for _, tty := range []bool{false, true} {
		var out, errOut bytes.Buffer
		ids := []string{"job_aaaaaaaaaaaaaaaaaaaaaaaaaa", "job_bbbbbbbbbbbbbbbbbbbbbbbbbb"}
		code := testCLI(f.getenv, &out, &errOut, tty).main(context.Background(), append([]string{"jobs", "restart", "--env", "prod-ru", "--config", f.config}, ids...))
		if code != 0 {
			t.Fatalf("tty=%t: exit %d: %s", tty, code, errOut.String())
		}
		var want string
		if tty {
			want = "\rrestart [..............................] 0/2   0%\rrestart [##############################] 2/2 100%\n"
		}
		if errOut.String() != want {
			t.Errorf("tty=%t: stderr %q, want %q", tty, errOut.String(), want)
		}
		if strings.Contains(out.String(), "\r") {
			t.Errorf("tty=%t: \\r on stdout: %q", tty, out.String())
		}
	}
	// The redrive of a whole DLQ, piped: no bar, no \r anywhere.
	var out, errOut bytes.Buffer
	code := testCLI(nil, &out, &errOut, false).main(context.Background(), []string{"dlq", "redrive", "low", "--env", "prod-ru", "--batch", "1", "--config", f.config})
	if code != 0 || errOut.Len() != 0 || strings.Contains(out.String(), "\r") {
		t.Errorf("redrive piped: exit %d, stderr %q, stdout %q", code, errOut.String(), out.String())
	}
}

func TestExitCodes(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	for _, tc := range []struct {
		args []string
		want int
	}{
		{[]string{"overview", "--env", "prod-ru,prod-en"}, exitOK},
		{[]string{"overview"}, exitFailure},                                                           // some environments fail
		{[]string{"tier", "pause", "urgent", "--env", "prod-ru"}, exitFailure},                        // the API refuses
		{[]string{"jobs", "stop", "job_aaaaaaaaaaaaaaaaaaaaaaaaa7", "--env", "prod-ru"}, exitFailure}, // skipped
		{[]string{"jobs", "stop", "job_x", "--env", "dev"}, exitFailure},                              // no token
		{[]string{"overview", "--env", "prod-us"}, exitUsage},                                         // unknown environment
		{[]string{"jobs", "stop", "job_x"}, exitUsage},                                                // several environments, none named
	} {
		_, stderr, code := runMain(t, f.getenv, append(tc.args, "--config", f.config)...)
		if code != tc.want {
			t.Errorf("%v: exit %d, want %d (stderr %q)", tc.args, code, tc.want, stderr)
		}
	}
}

// portRE hides the ports of test servers in golden output.
var portRE = regexp.MustCompile(`127\.0\.0\.1:\d+`)

// TestAnEnvironmentsStreamURLIsItsStreamsOrigin: an environment that names
// its streamUrl (the stack output StreamUrl) gets its event streams from
// there, not from the API's url, where they are not served in AWS.
func TestAnEnvironmentsStreamURLIsItsStreamsOrigin(t *testing.T) {
	t.Parallel()
	c := testCLI(nil, io.Discard, io.Discard, false)
	tg := c.resolve("staging", envConfig{URL: "https://api.example/", Token: "x", StreamURL: "https://abc.lambda-url.eu-central-1.on.aws/"})
	if tg.err != nil || tg.url != "https://api.example" || tg.streamURL != "https://abc.lambda-url.eu-central-1.on.aws" {
		t.Errorf("resolved %+v, want the API at its url and the streams at streamUrl", tg)
	}
	if tg := c.resolve("staging", envConfig{URL: "https://api.example", Token: "x"}); tg.streamURL != "" {
		t.Errorf("without streamUrl: streams at %q, want the API's origin", tg.streamURL)
	}
}
