package httpkind_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/conveyor/conveyor/internal/aws/store"
	"github.com/conveyor/conveyor/internal/breaker"
	"github.com/conveyor/conveyor/localstack/awstest"
	"github.com/conveyor/conveyor/localstack/simulator"
	"github.com/conveyor/conveyor/localstack/stack"
)

func submitPublish(b *awstest.Bundle, tok, title string) string {
	b.T.Helper()
	up := b.Upload(tok, awstest.PNG(b.T, 4))
	r := b.Must(b.Call("POST", "/v1/jobs", tok, map[string]any{"items": []any{map[string]any{"uploadId": up}}, "params": map[string]any{"title": title}}), 201)
	return r.Body["id"].(string)
}

func fired(sim *simulator.Server) int {
	n := 0
	for _, f := range sim.Faults() {
		n += f.Fired
	}
	return n
}

// TestFailingHTTPJobsLeaveThePublishingCircuitClosed: eight http jobs of
// one user against the publishing API's own host, failing with 503s and
// with timeouts, neither open the publishing circuit nor slow another
// user's publish job.
func TestFailingHTTPJobsLeaveThePublishingCircuitClosed(t *testing.T) {
	t.Parallel()
	// The user's own circuit of the host records every failure and never
	// opens (a threshold above the failures): opened, it would hold the
	// last jobs for a 30 s cooldown per probe, and the test waits for all
	// eight to fail. What is judged is the publishing circuit's record.
	b := awstest.Setup(t, map[string]string{"CONVEYOR_BREAKER_COOLDOWN": "30s", "CONVEYOR_BREAKER_THRESHOLD": "50"}, stack.Options{})
	sim := b.Stack.Simulator
	// Only the http jobs' paths fail; the publishing API's paths serve.
	sim.AddFault(simulator.Fault{Path: "/hook-503", Status: 503})
	sim.AddFault(simulator.Fault{Path: "/hook-slow", LatencyMs: 3000})
	attacker := b.Token("u-http-noisy", "user", "free")
	for i := range 8 {
		path, timeout := "/hook-503", 1000
		if i%2 == 1 {
			path, timeout = "/hook-slow", 400
		}
		submitHTTP(b, attacker, map[string]any{"url": fmt.Sprintf("%s%s/%d", b.Stack.SimulatorURL, path, i), "timeoutMs": timeout})
	}
	b.Eventually(func() bool { return fired(sim) >= 8 }, "the eight http jobs reached the simulator's host")
	ctx := context.Background()
	publishing := breaker.Key("host", strings.TrimPrefix(b.Stack.SimulatorURL, "http://"))
	time.Sleep(500 * time.Millisecond) // the last outcomes are recorded right after their calls
	noPublishingRecord := func(when string) {
		t.Helper()
		recs, err := b.Stack.App.Breaker.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			if r.Key == publishing {
				t.Errorf("the publishing circuit %s has a record %s: %+v", r.Key, when, r)
			}
		}
	}
	noPublishingRecord("after the http jobs' failures")
	victim := b.Token("u-publisher", "user", "pro")
	b.Connect(victim)
	start := time.Now()
	id := submitPublish(b, victim, "unaffected")
	r := b.WaitStatus(victim, id, "succeeded")
	// Its time is logged, not judged (the machine's load decides it): what
	// shows the circuit stayed closed is the job's one attempt, never
	// parked, and the publishing circuit still without a record.
	t.Logf("another user's publish job took %s after eight failing http jobs to the API's host", time.Since(start).Round(time.Millisecond))
	if r.Body["attempts"].(float64) != 1 {
		t.Errorf("attempts = %v, want 1", r.Body["attempts"])
	}
	as := b.Must(b.Call("GET", "/v1/jobs/"+id+"/attempts", victim, nil), 200).Body["attempts"].([]any)
	if len(as) != 1 || as[0].(map[string]any)["outcome"] != "succeeded" {
		t.Errorf("the publish job's runs = %v, want one that succeeded (no wait for a circuit)", as)
	}
	noPublishingRecord("after another user's publish job")
}

// TestOneUsersFailuresDoNotOpenAnothersCircuit: one user's failing calls
// open that user's circuit of a host and no one else's: another user's
// job to the same host goes through at once.
func TestOneUsersFailuresDoNotOpenAnothersCircuit(t *testing.T) {
	t.Parallel()
	b := awstest.Setup(t, map[string]string{"CONVEYOR_BREAKER_COOLDOWN": "60s", "CONVEYOR_BREAKER_THRESHOLD": "5"}, stack.Options{})
	var mu sync.Mutex
	bad, good := 0, 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if strings.HasPrefix(r.URL.Path, "/bad") {
			bad++
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		good++
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(srv.Close)
	noisy := b.Token("u-noisy-owner", "user", "free")
	for i := range 6 {
		submitHTTP(b, noisy, map[string]any{"url": fmt.Sprintf("%s/bad/%d", srv.URL, i), "timeoutMs": 2000})
	}
	// Five failures open the circuit: a sixth call may wait out the
	// cooldown (a minute), so the test waits for five.
	b.Eventually(func() bool { mu.Lock(); defer mu.Unlock(); return bad >= 5 }, "the noisy user's failures")
	// The noisy user's circuit of the host is open: its next job waits.
	host := strings.TrimPrefix(srv.URL, "http://")
	b.Eventually(func() bool {
		r := b.Must(b.Call("POST", "/v1/jobs", noisy, map[string]any{"type": "http", "params": map[string]any{"url": srv.URL + "/bad/probe-" + fmt.Sprint(time.Now().UnixNano())}}), 201)
		id := r.Body["id"].(string)
		var open bool
		b.Eventually(func() bool {
			g := b.Must(b.Call("GET", "/v1/jobs/"+id, noisy, nil), 200)
			ph := g.Body["phases"].([]any)[0].(map[string]any)
			open = ph["message"] == "circuit open; waiting"
			return open || g.Body["error"] != nil
		}, "the noisy user's job ran")
		return open
	}, "the noisy user's circuit of %s opened", host)
	quiet := b.Token("u-quiet-owner", "user", "pro")
	id := submitHTTP(b, quiet, map[string]any{"url": srv.URL + "/fine", "timeoutMs": 2000})
	r := b.WaitStatus(quiet, id, "succeeded")
	as := b.Must(b.Call("GET", "/v1/jobs/"+id+"/attempts", quiet, nil), 200).Body["attempts"].([]any)
	if len(as) != 1 || as[0].(map[string]any)["outcome"] != "succeeded" {
		t.Errorf("the other user's job's runs = %v, want one that succeeded (no wait for a circuit that is not theirs)", as)
	}
	if r.Body["attempts"].(float64) != 1 || r.Body["error"] != nil {
		t.Errorf("the other user's job: attempts %v, error %v; want 1 and none", r.Body["attempts"], r.Body["error"])
	}
}

// TestCyclingHostsCreatesAtMostTheCapOfRecords: a user sending to many
// hosts (ports here) holds at most CONVEYOR_HTTP_BREAKERS_PER_USER host
// records plus one shared, none in the partition every instance reads.
func TestCyclingHostsCreatesAtMostTheCapOfRecords(t *testing.T) {
	t.Parallel()
	const hosts, limit = 24, 5
	// A high threshold: no circuit opens, so every job fails at its one
	// attempt and records its failure.
	b := awstest.Setup(t, map[string]string{"CONVEYOR_MAX_ATTEMPTS": "1", "CONVEYOR_BREAKER_THRESHOLD": "1000",
		"CONVEYOR_HTTP_BREAKERS_PER_USER": fmt.Sprint(limit)}, stack.Options{})
	tok := b.Token("u-cycler", "user", "free")
	var ids []string
	for range hosts {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusBadGateway) }))
		t.Cleanup(srv.Close)
		ids = append(ids, submitHTTP(b, tok, map[string]any{"url": srv.URL + "/x", "timeoutMs": 2000}))
	}
	for _, id := range ids {
		b.WaitStatus(tok, id, "failed")
	}
	ctx := context.Background()
	recs, err := b.Stack.App.Breaker.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	global := 0
	for _, r := range recs {
		if strings.HasPrefix(r.Key, "host:127.0.0.1:") {
			global++
		}
	}
	own := ownerRecords(t, b, "u-cycler")
	t.Logf("%d hosts: %d records in the shared partition, %d in the user's own", hosts, global, own)
	if global != 0 {
		t.Errorf("%d of the user's hosts have records in the partition every instance reads", global)
	}
	if global+own > limit+1 {
		t.Errorf("%d breaker records for one user, want at most %d (the cap and one shared)", global+own, limit+1)
	}
}

// ownerRecords counts owner's target circuit records.
func ownerRecords(t *testing.T, b *awstest.Bundle, owner string) int {
	t.Helper()
	recs, err := b.Stack.App.Breaker.Targets(0).List(context.Background(), owner)
	if err != nil {
		t.Fatal(err)
	}
	return len(recs)
}

// TestAlways429EndsAfterTheMaxSnoozes: a target that always answers 429
// no longer keeps its job alive forever: it fails waits_exhausted after
// CONVEYOR_HTTP_MAX_SNOOZES waits, or max_age_exceeded once it is older
// than CONVEYOR_HTTP_MAX_AGE.
func TestAlways429EndsAfterTheMaxSnoozes(t *testing.T) {
	t.Parallel()
	b := awstest.Setup(t, map[string]string{"CONVEYOR_HTTP_MAX_SNOOZES": "3", "CONVEYOR_BREAKER_COOLDOWN": "1s"}, stack.Options{})
	tok := b.Token("u-429", "user", "standard")
	tg := newTarget(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusTooManyRequests) })
	id := submitHTTP(b, tok, map[string]any{"url": tg.srv.URL + "/limited", "timeoutMs": 2000})
	r := b.WaitStatus(tok, id, "failed")
	e := r.Body["error"].(map[string]any)
	if e["code"] != "waits_exhausted" || !strings.Contains(e["message"].(string), "429") {
		t.Errorf("error = %v, want waits_exhausted naming the 429", e)
	}
	if calls, _ := tg.count(); calls != 4 {
		t.Errorf("the target was called %d times, want 4 (three waits, then the give-up)", calls)
	}

	aged := awstest.Setup(t, map[string]string{"CONVEYOR_HTTP_MAX_AGE": "3s", "CONVEYOR_BREAKER_COOLDOWN": "1s"}, stack.Options{})
	tok = aged.Token("u-429-age", "user", "standard")
	slow := newTarget(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusTooManyRequests)
	})
	id = submitHTTP(aged, tok, map[string]any{"url": slow.srv.URL + "/limited", "timeoutMs": 2000})
	r = aged.WaitStatus(tok, id, "failed")
	if e := r.Body["error"].(map[string]any); e["code"] != "max_age_exceeded" {
		t.Errorf("error = %v, want max_age_exceeded", e)
	}
}

// TestHTTPJobSecretsStayOutOfEverything: header values are sealed in the
// table item and appear in no API response, event, log line or stored
// item; a transport error's text carries no query string.
func TestHTTPJobSecretsStayOutOfEverything(t *testing.T) {
	t.Parallel()
	const headerSecret, querySecret = "hv-s3cr3t-4f9a7c", "qs-s3cr3t-b81e2d"
	logs := &awstest.Buffer{}
	b := awstest.Setup(t, map[string]string{"CONVEYOR_MAX_ATTEMPTS": "2"}, stack.Options{Logger: slog.New(slog.NewJSONHandler(logs, nil))})
	tok := b.Token("u-secrets", "user", "pro")
	var mu sync.Mutex
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Header.Get("Authorization"))
		n := len(got)
		mu.Unlock()
		if n == 1 {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(srv.Close)
	created := b.Must(b.Call("POST", "/v1/jobs", tok, map[string]any{"type": "http", "params": map[string]any{
		"url": srv.URL + "/hook", "timeoutMs": 2000, "headers": map[string]string{"authorization": "Bearer " + headerSecret}}}), 201)
	id := created.Body["id"].(string)
	done := b.WaitStatus(tok, id, "succeeded")
	mu.Lock()
	if len(got) != 2 || got[1] != "Bearer "+headerSecret {
		t.Errorf("the target got Authorization %q, want the sealed value sent", got)
	}
	mu.Unlock()
	hdrs := done.Body["params"].(map[string]any)["headers"].(map[string]any)
	if hdrs["Authorization"] != "[redacted]" {
		t.Errorf("params.headers = %v, want the name with its value redacted", hdrs)
	}

	// A transport error (nothing listens) with a secret in the query.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	l.Close()
	failing := submitHTTP(b, tok, map[string]any{"url": "http://" + closed + "/cb?token=" + querySecret + "&x=1", "timeoutMs": 2000})
	failed := b.WaitStatus(tok, failing, "failed")
	msg := failed.Body["error"].(map[string]any)["message"].(string)
	if !strings.Contains(msg, closed) || strings.Contains(msg, querySecret) {
		t.Errorf("transport error %q: want the target named and no query string", msg)
	}
	// The URL is the user's own input and is shown as given (params.url);
	// no error text and no log line carries its query string.
	texts := []string{msg}
	for _, ph := range failed.Body["phases"].([]any) {
		if e, _ := ph.(map[string]any)["error"].(map[string]any); e != nil {
			texts = append(texts, e["message"].(string))
		}
	}
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, querySecret) {
			texts = append(texts, line)
		}
	}
	for _, txt := range texts {
		if strings.Contains(txt, querySecret) {
			t.Errorf("an error text or log line carries the query string: %s", txt)
		}
	}

	// Everything a user, an operator or a consumer can see.
	var seen []string
	admin := b.Token("ops", "admin", "")
	for _, jid := range []string{id, failing} {
		seen = append(seen, string(b.Must(b.Call("GET", "/v1/jobs/"+jid, tok, nil), 200).Raw))
		// The inspector's view: the job with its events.
		seen = append(seen, string(b.Must(b.Call("GET", "/v1/admin/jobs/"+jid, admin, nil), 200).Raw))
	}
	seen = append(seen, string(b.Must(b.Call("GET", "/v1/jobs?limit=10", tok, nil), 200).Raw))
	seen = append(seen, string(b.Must(b.Call("GET", "/v1/admin/jobs?owner=u-secrets", admin, nil), 200).Raw))
	seen = append(seen, logs.String())
	// Every stored item: the job, its events (what the relay puts on the
	// bus and its archive, the admin feed and SSE read), the rest.
	items := scanTable(t, b)
	seen = append(seen, items...)
	for i, s := range seen {
		if strings.Contains(s, headerSecret) {
			t.Errorf("a header value appears in output %d: %.300s", i, s[max(0, strings.Index(s, headerSecret)-200):])
		}
	}
	sealed := false
	for _, it := range items {
		if strings.Contains(it, `"sealed"`) && strings.Contains(it, id) {
			sealed = true
		}
	}
	if !sealed {
		t.Errorf("the job's item holds no sealed headers")
	}
	if events := strings.Count(strings.Join(items, "\n"), `"sk":"EVT#`); events < 4 {
		t.Errorf("%d event items scanned, want the jobs' events among what is checked", events)
	}
}

// scanTable returns every item of the stack's table, rendered, a compact
// job item with its jobZ expanded.
func scanTable(t *testing.T, b *awstest.Bundle) []string {
	t.Helper()
	db := b.Stack.App.Clients.DynamoDB
	var out []string
	in := &dynamodb.ScanInput{TableName: aws.String(b.Stack.Config.Table)}
	for {
		res, err := db.Scan(context.Background(), in)
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range res.Items {
			// A compact job's phases, items and params are in jobZ.
			it, err := store.ExpandJobItem(it)
			if err != nil {
				t.Fatal(err)
			}
			var m map[string]any
			if err := attributevalue.UnmarshalMap(it, &m); err != nil {
				t.Fatal(err)
			}
			raw, err := json.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, string(raw))
		}
		if len(res.LastEvaluatedKey) == 0 {
			return out
		}
		in.ExclusiveStartKey = res.LastEvaluatedKey
	}
}
