package iamcheck_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/conveyor/conveyor/internal/aws/awsenv"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/resources"
	"github.com/conveyor/conveyor/localstack/awstest"
	"github.com/conveyor/conveyor/localstack/iamcheck"
	"github.com/conveyor/conveyor/localstack/lambdaruntime"
	"github.com/conveyor/conveyor/localstack/simulator"
	"github.com/conveyor/conveyor/localstack/stack"
)

func TestMain(m *testing.M) { awstest.Main(m) }

// VarTemplates names the directory of the synthesized templates
// (Conveyor-<env>.template.json) that TestIAMConformance checks against;
// `make iam` synthesizes them and sets it. Unset, the test is skipped: a
// synthesis takes the CDK app and half a minute.
const VarTemplates = "CONVEYOR_IAM_TEMPLATES"

// VarModules is the node_modules holding the pinned iam-simulate (`make
// iam` installs it into .cache/iam-simulate).
const VarModules = "IAM_SIMULATE_MODULES"

// TestIAMConformance runs every function as its own binary through a
// scenario that takes each of them, and every route group, through its
// work, with each function recording the AWS accesses its requests need;
// then it holds every access against that function's role in each cloud
// environment's synthesized template (placed in the local account and
// names) with a real IAM evaluator, and fails naming function, action and
// resource for each one the role does not allow. The other way, every
// action a role grants is used by some request or listed with its reason
// in infra/iam/unexercised.yaml, which must stay exact. And statically:
// every SDK operation a function's main can reach (iamcheck.Reach), made
// by the scenario or not, is allowed by its role on some resource it may
// name, or listed with its reason in infra/iam/reachable.yaml, which must
// stay exact too.
func TestIAMConformance(t *testing.T) {
	templates := os.Getenv(VarTemplates)
	if templates == "" {
		t.Skipf("%s is not set: `make iam` synthesizes the templates and runs this test", VarTemplates)
	}
	root, err := lambdaruntime.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	ev := iamcheck.Evaluator{Script: filepath.Join(root, "infra", "iam", "simulate.mjs"), Modules: os.Getenv(VarModules)}
	if ev.Modules == "" {
		ev.Modules = filepath.Join(root, ".cache", "iam-simulate", "node_modules")
	}
	allow, err := iamcheck.ReadAllowList(filepath.Join(root, "infra", "iam", "unexercised.yaml"))
	if err != nil {
		t.Fatal(err)
	}

	// The static side: every SDK operation each function's main can reach,
	// whether the scenario takes it there or not (its local stand-ins not
	// entered). One load and one graph for every function, built before the
	// scenario's stack runs (it would share the CPU with it).
	reachable, err := iamcheck.ReadAllowList(filepath.Join(root, "infra", "iam", "reachable.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	reach := reachAll(t, root, resources.Named(job.Local, "").Functions)

	// CONVEYOR_IAM_CALLS keeps the logs in a directory of one's choice;
	// with CONVEYOR_IAM_REUSE=1 too, the scenario is not run again and the
	// logs there are checked (a quicker loop while changing grants).
	logs := os.Getenv("CONVEYOR_IAM_CALLS")
	if logs == "" {
		logs = t.TempDir()
	}
	var run scenarioRun
	if os.Getenv("CONVEYOR_IAM_REUSE") == "1" {
		raw, err := os.ReadFile(filepath.Join(logs, "run.json"))
		if err != nil {
			t.Fatalf("CONVEYOR_IAM_REUSE=1 needs a previous run's logs in %s: %v", logs, err)
		}
		if err := json.Unmarshal(raw, &run); err != nil {
			t.Fatal(err)
		}
	} else {
		t0 := time.Now()
		run = runScenario(t, logs)
		t.Logf("scenario: %v", time.Since(t0).Round(time.Millisecond))
		raw, _ := json.Marshal(run)
		if err := os.WriteFile(filepath.Join(logs, "run.json"), raw, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	calls, err := iamcheck.ReadCalls(logs)
	if err != nil {
		t.Fatal(err)
	}
	local := resources.Named(job.Local, run.Prefix)
	byFn := map[string]int{}
	for _, c := range calls {
		byFn[c.Function]++
	}
	for _, fn := range local.Functions {
		if byFn[fn] == 0 {
			t.Errorf("function %s recorded no AWS request: the scenario does not exercise it", fn)
		}
	}
	t.Logf("%d distinct accesses recorded: %v", len(calls), byFn)

	for _, env := range job.CloudEnvs {
		t.Run(string(env), func(t *testing.T) {
			tmpl, err := iamcheck.LoadTemplate(filepath.Join(templates, "Conveyor-"+string(env)+".template.json"), iamcheck.Mapping{
				Cloud: resources.For(env), Local: local, Account: lambdaruntime.AccountID, Region: awsenv.DefaultRegion,
				KMSKeyARN: "arn:aws:kms:" + awsenv.DefaultRegion + ":" + lambdaruntime.AccountID + ":key/" + run.KMSKeyID, LocalEnv: run.Env,
			})
			if err != nil {
				t.Fatal(err)
			}
			for fn, r := range tmpl.Roles {
				if len(r.Managed) > 0 {
					t.Errorf("%s's role has managed policies %v, whose actions the check cannot see: grant inline", fn, r.Managed)
				}
			}
			t1 := time.Now()
			denied, err := iamcheck.Denied(ev, tmpl, lambdaruntime.AccountID, calls)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("evaluated in %v", time.Since(t1).Round(time.Millisecond))
			for _, f := range denied {
				t.Errorf("DENIED %s", f)
			}
			for _, g := range iamcheck.Unscoped(tmpl) {
				t.Errorf("UNSCOPED %s: %s is granted without a %s condition: scope it to the purposes the function seals or opens", g.Function, g.Action, iamcheck.PurposeKey)
			}
			missing, stale, listed := iamcheck.Unexercised(tmpl, calls, local.Functions, allow.For(string(env)))
			for _, g := range missing {
				t.Errorf("UNEXERCISED %s: %s is granted but no request used it; exercise it or list it with its reason in infra/iam/unexercised.yaml", g.Function, g.Action)
			}
			for _, g := range stale {
				t.Errorf("STALE infra/iam/unexercised.yaml lists %s: %s, which is not a granted-and-unused action", g.Function, g.Action)
			}
			t2 := time.Now()
			found, vouched, err := iamcheck.ReachableDenied(ev, tmpl, lambdaruntime.AccountID, reach.Operations, calls)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("reachable actions evaluated in %v", time.Since(t2).Round(time.Millisecond))
			if env == job.Staging {
				var lines []string
				for _, g := range vouched {
					lines = append(lines, fmt.Sprintf("%-9s %s", g.Function, g.Action))
				}
				t.Logf("reachable, unrecorded, allowed (%d):\n%s", len(lines), strings.Join(lines, "\n"))
			}
			unlisted, staleReach, listedReach := reachable.For(string(env)).Unreasoned(found, local.Functions)
			for _, u := range unlisted {
				t.Errorf("REACHABLE-DENIED %s\n  grant it, or list it with why it is never made in AWS in infra/iam/reachable.yaml", u)
			}
			for _, g := range staleReach {
				t.Errorf("STALE infra/iam/reachable.yaml lists %s: %s, which is not a reachable, unrecorded action its role denies", g.Function, g.Action)
			}
			if env == job.Staging {
				var lines []string
				for g, reason := range listedReach {
					lines = append(lines, fmt.Sprintf("%-9s %-32s %s", g.Function, g.Action, firstSentence(reason)))
				}
				sort.Strings(lines)
				t.Logf("reachable, denied, listed (%d):\n%s", len(lines), strings.Join(lines, "\n"))
			}
			if env == job.Staging {
				var lines []string
				for g, reason := range listed {
					lines = append(lines, fmt.Sprintf("%-9s %-32s %s", g.Function, g.Action, firstSentence(reason)))
				}
				sort.Strings(lines)
				t.Logf("granted, unexercised, listed (%d):\n%s", len(lines), strings.Join(lines, "\n"))
				// Of those, the ones no code of the function reaches either:
				// made by Lambda with the role (logs, traces, event sources,
				// destinations), or grants that nothing needs.
				needs := map[iamcheck.Grant]bool{}
				for _, o := range reach.Operations {
					for _, a := range o.Actions {
						needs[iamcheck.Grant{Function: o.Function, Action: a}] = true
					}
				}
				lines = nil
				for g := range listed {
					if base, _, _ := strings.Cut(g.Action, " (purpose "); !needs[iamcheck.Grant{Function: g.Function, Action: base}] {
						lines = append(lines, fmt.Sprintf("%-9s %s", g.Function, g.Action))
					}
				}
				sort.Strings(lines)
				t.Logf("granted, unexercised, reached by no code of the function (%d):\n%s", len(lines), strings.Join(lines, "\n"))
			}
		})
	}
}

// reachAll is Reach over every deployed function, checked for what the
// analysis needs to be complete: each function has operations, and each
// configured stand-in is met (a stand-in renamed or gone would otherwise
// leave its replacement unchecked, or its exclusion dead).
func reachAll(t *testing.T, root string, functions []string) *iamcheck.Reachability {
	t.Helper()
	t0 := time.Now()
	reach, err := iamcheck.Reach(iamcheck.FunctionsReach(root))
	if err != nil {
		t.Fatal(err)
	}
	perFn := map[string]int{}
	for _, o := range reach.Operations {
		perFn[o.Function]++
	}
	t.Logf("reachable SDK operations, by function: %v, in %v (load %v, build %v, analyse %v)", perFn,
		time.Since(t0).Round(time.Millisecond), reach.Load.Round(time.Millisecond), reach.Build.Round(time.Millisecond), reach.Analyse.Round(time.Millisecond))
	for _, fn := range functions {
		if perFn[fn] == 0 {
			t.Errorf("function %s reaches no SDK operation: the static analysis lost its handler", fn)
		}
	}
	for _, s := range iamcheck.FunctionStandIns {
		met := false
		for _, m := range reach.StandIns {
			met = met || slices.Contains(m, s)
		}
		if !met {
			t.Errorf("stand-in %s is not met by any function's graph: update iamcheck.FunctionStandIns", s)
		}
	}
	return reach
}

func firstSentence(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if i := strings.Index(s, ". "); i > 0 {
		return s[:i+1]
	}
	return s
}

// receiver is a webhook endpoint on loopback that counts deliveries; the
// first delivery to /flaky is answered 503 (the system function retries).
type receiver struct {
	mu      sync.Mutex
	got     []string
	flakied bool
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	_, _ = io.Copy(io.Discard, req.Body)
	r.mu.Lock()
	defer r.mu.Unlock()
	if req.URL.Path == "/flaky" && !r.flakied {
		r.flakied = true
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	r.got = append(r.got, req.Header.Get("X-Conveyor-Event"))
	w.WriteHeader(http.StatusNoContent)
}

func (r *receiver) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.got)
}

// scenarioRun is what the check needs of the stack a scenario ran on.
type scenarioRun struct {
	// Prefix names the local resources (resources.Named).
	Prefix string
	// KMSKeyID is the local key's id.
	KMSKeyID string
	// Env is the configuration the functions were given.
	Env map[string]string
}

// runScenario takes every function and route group through its work on a
// stack of the functions' binaries recording into logs, and closes it.
func runScenario(t *testing.T, logs string) scenarioRun {
	t.Helper()
	var out bytes.Buffer
	var outMu sync.Mutex
	b := awstest.Setup(t, map[string]string{
		"CONVEYOR_SCHEDULE_INTERVAL": "300ms", "CONVEYOR_RECOVERY_INTERVAL": "300ms", "CONVEYOR_RETENTION_INTERVAL": "300ms", "CONVEYOR_STREAM_PING": "1s",
		// A stream ends at its lifetime, which is what releases its slot (a
		// function URL lets a streaming invocation run on after its client
		// goes): after the first renewal (a third of the 60 s lease).
		"CONVEYOR_STREAM_LIFETIME": "25s",
		// Finished jobs go stale (retention: their media deleted) soon.
		"CONVEYOR_STALE_AFTER": "4s", "CONVEYOR_DELETE_AFTER": "1h",
		// A bulk action by filter over more than one job runs as an
		// operation (the system function's chunks).
		"CONVEYOR_BULK_SYNC_MAX": "1",
	}, stack.Options{Binaries: true, Bootstraps: awstest.Bootstraps(t), CallLog: logs,
		FunctionOutput: writerFunc(func(p []byte) (int, error) { outMu.Lock(); defer outMu.Unlock(); return out.Write(p) })})
	t.Cleanup(func() {
		if t.Failed() {
			outMu.Lock()
			tail := out.Bytes()
			if len(tail) > 6000 {
				tail = tail[len(tail)-6000:]
			}
			t.Logf("the functions' output, last lines:\n%s", tail)
			outMu.Unlock()
		}
	})
	s := b.Stack
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	user, op := b.Token("u-iam", "user", "pro"), b.Token("op-iam", "admin", "")

	// Streams: the user's, a job's and the operators' (stream function).
	frames := awstest.ReadSSE(openStream(t, ctx, s.StreamURL+"/v1/events", user))
	adminFrames := awstest.ReadSSE(openStream(t, ctx, s.StreamURL+"/v1/admin/events", op))
	go drain(frames)
	go drain(adminFrames)

	// Webhooks: the secret (sealed on first use, opened), rotated; an
	// endpoint subscribed to the finishing events (the relay reads and
	// rebuilds the owner's endpoints' summary).
	b.Must(b.Call("GET", "/v1/webhooks/secret", user, nil), 200)
	b.Must(b.Call("POST", "/v1/webhooks/secret/rotate", user, nil), 200)
	hooks := &receiver{}
	srv := httptest.NewServer(hooks)
	defer srv.Close()
	b.Must(b.Call("POST", "/v1/webhooks", user, map[string]any{"url": srv.URL + "/endpoint",
		"events": []string{job.EventSucceeded, job.EventFailed, job.EventCancelled, job.EventStale}}), 201)
	b.Must(b.Call("GET", "/v1/webhooks", user, nil), 200)

	// Account connection (the tokens sealed).
	b.Connect(user)

	// Uploads: signed, PUT, confirmed by the S3 event; and one confirmed on
	// demand before its PUT landed (the object is missing: 422), then after.
	up := b.Upload(user, awstest.PNG(t, 6))
	png := awstest.PNG(t, 7)
	signed := b.Must(b.Call("POST", "/v1/uploads/sign", user, map[string]any{"filename": "early.png", "contentType": "image/png", "size": len(png)}), 201)
	early := signed.Body["uploadId"].(string)
	if r := b.Call("POST", "/v1/uploads/"+early+"/confirm", user, nil); r.Status != http.StatusUnprocessableEntity {
		t.Errorf("confirming an upload before its PUT: %d %s, want 422", r.Status, r.Raw)
	}
	putSigned(t, signed, png)
	b.Eventually(func() bool {
		r := b.Call("POST", "/v1/uploads/"+early+"/confirm", user, nil)
		return r.Status == 200 && r.Body["status"] == "confirmed"
	}, "upload %s confirmed on demand", early)
	b.Must(b.Call("GET", "/v1/uploads/"+up, user, nil), 200)

	// S3 delivers events at least once and late: an ObjectCreated event for
	// a key whose object is gone by the time the confirm function reads it.
	gone := b.Must(b.Call("POST", "/v1/uploads/sign", user, map[string]any{"filename": "gone.png", "contentType": "image/png", "size": len(png)}), 201)
	var ev events.S3Event
	ev.Records = []events.S3EventRecord{{EventVersion: "2.1", EventSource: "aws:s3", AWSRegion: awsenv.DefaultRegion, EventTime: time.Now().UTC(),
		EventName: "ObjectCreated:Put", S3: events.S3Entity{Bucket: events.S3Bucket{Name: s.Provisioned.Definition.Bucket.Name},
			Object: events.S3Object{Key: gone.Body["key"].(string), Size: int64(len(png))}}}}
	payload, _ := json.Marshal(ev)
	if _, err := s.Functions.Invokers[resources.FuncConfirm].Invoke(ctx, payload); err != nil {
		t.Logf("the confirm function on an event for a missing object: %v", err)
	}

	// A recurring schedule: made, read, paused, resumed; a tick fired at
	// the recovery function; deleted.
	sc := b.Must(b.Call("POST", "/v1/schedules", user, map[string]any{"name": "every minute", "rate": "1m", "timezone": "UTC",
		"job": map[string]any{"type": "publish", "items": []any{map[string]any{"uploadId": up}}, "params": map[string]any{"title": "Tick"}}}), 201)
	scID := sc.Body["id"].(string)
	// An http template's header values are sealed apart from it (schedules)
	// and opened at its tick (recovery).
	hsc := b.Must(b.Call("POST", "/v1/schedules", user, map[string]any{"name": "http every minute", "rate": "1m", "timezone": "UTC",
		"job": map[string]any{"type": "http", "params": map[string]any{"method": "POST", "url": srv.URL + "/http", "body": "{}",
			"headers": map[string]any{"X-Conveyor-Test": "iam"}}}}), 201)
	b.Must(b.Call("GET", "/v1/schedules", user, nil), 200)
	b.Must(b.Call("POST", "/v1/schedules/"+scID+"/pause", user, nil), 200)
	b.Must(b.Call("POST", "/v1/schedules/"+scID+"/resume", user, nil), 200)
	if _, err := s.Schedules.RunOnce(ctx, time.Now().Add(2*time.Minute)); err != nil {
		t.Fatalf("firing the schedules: %v", err)
	}
	for _, id := range []string{scID, hsc.Body["id"].(string)} {
		b.Eventually(func() bool {
			r := b.Call("GET", "/v1/schedules/"+id, user, nil)
			runs, _ := r.Body["lastRuns"].([]any)
			return len(runs) > 0
		}, "schedule %s's tick submitted a job", id)
		b.Must(b.Call("DELETE", "/v1/schedules/"+id, user, nil), 204)
	}

	// A job published through the simulator, with a job webhook; its
	// finishing event goes through the relay to the bus and to the system
	// tier, whose function delivers it signed.
	submit := func(title, upload string, extra map[string]any) string {
		body := map[string]any{"type": "publish", "items": []any{map[string]any{"uploadId": upload}}, "params": map[string]any{"title": title}}
		for k, v := range extra {
			body[k] = v
		}
		r := b.Call("POST", "/v1/jobs", user, body)
		if r.Status != 201 && r.Status != 200 {
			t.Fatalf("POST /v1/jobs %q: %d %s", title, r.Status, r.Raw)
		}
		return r.Body["id"].(string)
	}
	// (One 503 first: the publisher retries with backoff.)
	s.Simulator.AddFault(simulator.Fault{Path: "/api/v1/oauth2/stash/publish", Status: 503, Count: 1})
	ok := submit("Published", up, map[string]any{"webhookUrl": srv.URL + "/job"})
	go drain(awstest.ReadSSE(openStream(t, ctx, s.StreamURL+"/v1/jobs/"+ok+"/events", user)))
	b.WaitStatus(user, ok, "succeeded")
	b.Must(b.Call("GET", "/v1/jobs?limit=10", user, nil), 200)
	b.Must(b.Call("GET", "/v1/jobs?status=succeeded&limit=0", user, nil), 200)
	b.Eventually(func() bool { return hooks.count() >= 2 }, "the job's webhook and the endpoint's delivered")

	// A job whose media is gone by the time the publisher reads it (its
	// object deleted behind the upload record's back): S3 answers the
	// GetObject of a missing key 404 — the job fails as expired media, not
	// retried — only to a caller that may list the bucket.
	expiredUp := b.Upload(user, awstest.PNG(t, 8))
	eu := b.Must(b.Call("GET", "/v1/uploads/"+expiredUp, user, nil), 200)
	s3c := s3.NewFromConfig(s.App.Clients.Config, func(o *s3.Options) { o.UsePathStyle = true })
	if _, err := s3c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(s.Provisioned.Definition.Bucket.Name),
		Key: aws.String(eu.Body["key"].(string))}); err != nil {
		t.Fatalf("deleting upload %s's object: %v", expiredUp, err)
	}
	b.WaitStatus(user, submit("Expired", expiredUp, nil), "failed")

	// A user with no webhook endpoint (free plan: the low tier): the relay
	// finds no summary of theirs and builds it from the endpoint items.
	other := b.Token("u-iam-free", "user", "free")
	b.Connect(other)
	otherUp := b.Upload(other, awstest.PNG(t, 5))
	or := b.Call("POST", "/v1/jobs", other, map[string]any{"type": "publish", "items": []any{map[string]any{"uploadId": otherUp}}, "params": map[string]any{"title": "Free"},
		// A first delivery for a user with no secret yet (sealed by the
		// system function), answered 503 once (retried).
		"webhookUrl": srv.URL + "/flaky"})
	if or.Status != 201 {
		t.Fatalf("POST /v1/jobs as a free user: %d %s", or.Status, or.Raw)
	}
	b.WaitStatus(other, or.Body["id"].(string), "succeeded")
	b.Eventually(func() bool {
		hooks.mu.Lock()
		defer hooks.mu.Unlock()
		return hooks.flakied
	}, "the free user's job webhook tried")

	// The http kind: one request, delivered by the publisher.
	hr := b.Call("POST", "/v1/jobs", user, map[string]any{"type": "http", "params": map[string]any{"method": "POST", "url": srv.URL + "/http", "body": "{}",
		"headers": map[string]any{"X-Conveyor-Test": "iam"}}})
	if hr.Status != 201 {
		t.Fatalf("POST /v1/jobs http: %d %s", hr.Status, hr.Raw)
	}
	b.WaitStatus(user, hr.Body["id"].(string), "succeeded")

	// A job the external API refuses (400: failed at once), retried by its
	// owner, failed again, restarted by an operator.
	fault := s.Simulator.AddFault(simulator.Fault{Path: "/api/v1/oauth2/stash/submit", Status: 400, Count: 2})
	bad := submit("Refused", early, nil)
	b.WaitStatus(user, bad, "failed")
	b.Must(b.Call("POST", "/v1/jobs/"+bad+"/retry", user, nil), 200)
	b.WaitStatus(user, bad, "failed")
	b.Eventually(func() bool {
		for _, f := range s.Simulator.Faults() {
			if f.ID == fault.ID {
				return false
			}
		}
		return true
	}, "the fault spent")
	b.Must(b.Call("POST", "/v1/admin/jobs/restart", op, map[string]any{"jobIds": []string{bad}}), 200)
	b.WaitStatus(user, bad, "succeeded")

	// Jobs scheduled ahead: one cancelled by its owner, one stopped by an
	// operator; one released by recovery's schedule. They name an upload of
	// their own: the first one's jobs went stale 4 s after they finished
	// (CONVEYOR_STALE_AFTER) and its media with them, however long the
	// steps above took.
	later, fresh := time.Now().Add(time.Hour).UTC().Format(time.RFC3339), b.Upload(user, awstest.PNG(t, 7))
	cancelled := submit("Cancelled", fresh, map[string]any{"scheduleAt": later})
	b.Must(b.Call("POST", "/v1/jobs/"+cancelled+"/cancel", user, nil), 200)
	stopped := submit("Stopped", fresh, map[string]any{"scheduleAt": later, "params": map[string]any{"title": "Stopped", "description": "x"}})
	b.Must(b.Call("POST", "/v1/admin/jobs/stop", op, map[string]any{"jobIds": []string{stopped}}), 200)
	// Both restarted by filter: past the sync max, an operation the system
	// function works off (the inspector's index read, the jobs written,
	// their messages sent to their tier).
	bulk := b.Must(b.Call("POST", "/v1/admin/jobs/restart", op, map[string]any{"filter": map[string]any{"status": "cancelled", "owner": "u-iam"}}), 202)
	opID, _ := bulk.Body["id"].(string)
	b.Eventually(func() bool {
		return b.Must(b.Call("GET", "/v1/admin/operations/"+opID, op, nil), 200).Body["status"] == "succeeded"
	}, "the bulk restart's operation %s succeeded", opID)
	soon := submit("Released", fresh, map[string]any{"scheduleAt": time.Now().Add(2 * time.Second).UTC().Format(time.RFC3339)})
	b.WaitStatus(user, soon, "succeeded")
	j := b.Must(b.Call("GET", "/v1/admin/jobs/"+soon, op, nil), 200)
	if items, _ := j.Body["items"].([]any); len(items) > 0 {
		item := items[0].(map[string]any)["id"].(string)
		// A finished item cannot be restarted (409); the route still reads it.
		b.Call("POST", "/v1/admin/jobs/"+soon+"/items/"+item+"/restart", op, nil)
	}

	// The operators' reads: overview, stats, the inspector, orphans,
	// breakers (one reset).
	for _, p := range []string{"/v1/admin/overview", "/v1/admin/stats?hours=24", "/v1/admin/jobs?status=succeeded&limit=5",
		"/v1/admin/jobs?owner=u-iam&limit=5", "/v1/admin/orphans", "/v1/admin/breakers"} {
		b.Must(b.Call("GET", p, op, nil), 200)
	}
	br := b.Must(b.Call("GET", "/v1/admin/breakers", op, nil), 200)
	key := "host:example.com"
	if list, _ := br.Body["breakers"].([]any); len(list) > 0 {
		if k, _ := list[0].(map[string]any)["key"].(string); k != "" {
			key = k
		}
	}
	b.Call("POST", "/v1/admin/breakers/"+key+"/reset", op, nil)

	// Pause and resume a tier.
	b.Must(b.Call("POST", "/v1/admin/tiers/low/pause", op, nil), 200)
	b.Must(b.Call("POST", "/v1/admin/tiers/low/resume", op, nil), 200)

	// A message in a DLQ (put there by the test: a job's own path there is
	// ten receives), peeked and redriven to its queue.
	dlq := s.Provisioned.DLQURLs[job.Medium]
	if _, err := s.App.Clients.SQS.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(dlq), MessageBody: aws.String(`{"kind":"publish","jobId":"` + ok + `"}`),
		MessageGroupId: aws.String(ok), MessageDeduplicationId: aws.String("iam-" + ok)}); err != nil {
		t.Fatal(err)
	}
	b.Must(b.Call("GET", "/v1/admin/dlq/medium?limit=5", op, nil), 200)
	b.Must(b.Call("POST", "/v1/admin/dlq/medium/redrive", op, map[string]any{}), 202)

	// Retention: the jobs go stale, and their job.stale goes through the
	// relay; an upload no job may still run is deleted (recovery).
	b.WaitStatus(user, ok, "stale")
	b.Eventually(func() bool {
		return b.Call("GET", "/v1/uploads/"+otherUp, other, nil).Body["status"] == "expired"
	}, "the free user's upload expired once its only job went stale")
	b.Eventually(func() bool {
		hooks.mu.Lock()
		defer hooks.mu.Unlock()
		for _, e := range hooks.got {
			if e == job.EventStale {
				return true
			}
		}
		return false
	}, "job.stale delivered to the endpoint")

	b.Must(b.Call("DELETE", "/v1/webhooks/"+firstEndpoint(b, user), user, nil), 204)
	// An open stream renews its slot every third of the lease (20 s), and
	// releases it when it ends at its lifetime (25 s): wait for both, then
	// end the streams.
	b.Eventually(func() bool {
		raw, _ := os.ReadFile(filepath.Join(logs, resources.FuncStream+".jsonl"))
		return bytes.Contains(raw, []byte(`"action":"dynamodb:UpdateItem"`)) && bytes.Contains(raw, []byte(`"action":"dynamodb:DeleteItem"`))
	}, "the stream function renewing its slot and releasing it")
	cancel()
	time.Sleep(2 * time.Second)
	s.Close()
	return scenarioRun{Prefix: s.Provisioned.Definition.Prefix, KMSKeyID: s.Provisioned.KMSKeyID, Env: s.Env()}
}

func firstEndpoint(b *awstest.Bundle, token string) string {
	r := b.Must(b.Call("GET", "/v1/webhooks", token, nil), 200)
	list, _ := r.Body["webhooks"].([]any)
	if len(list) == 0 {
		b.T.Fatalf("GET /v1/webhooks: no endpoint: %s", r.Raw)
	}
	return list[0].(map[string]any)["id"].(string)
}

// putSigned PUTs data to a signed upload URL with its signed headers.
func putSigned(t *testing.T, signed awstest.Response, data []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPut, signed.Body["url"].(string), bytes.NewReader(data))
	if h, ok := signed.Body["headers"].(map[string]any); ok {
		for k, v := range h {
			req.Header.Set(k, fmt.Sprint(v))
		}
	}
	req.ContentLength = int64(len(data))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("presigned PUT: %s", resp.Status)
	}
}

func openStream(t *testing.T, ctx context.Context, url, token string) io.ReadCloser {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Fatalf("GET %s: %s %s", url, resp.Status, body)
	}
	return resp.Body
}

func drain(ch <-chan awstest.SSEFrame) {
	for range ch {
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
