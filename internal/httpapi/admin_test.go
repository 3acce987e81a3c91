package httpapi_test

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/google/go-cmp/cmp"

	"github.com/conveyor/conveyor/internal/admin"
	"github.com/conveyor/conveyor/internal/aws/store"
	"github.com/conveyor/conveyor/internal/breaker"
	"github.com/conveyor/conveyor/internal/ids"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/publish"
	"github.com/conveyor/conveyor/localstack/awstest"
	"github.com/conveyor/conveyor/localstack/simulator"
	"github.com/conveyor/conveyor/localstack/stack"
)

// adminBundle is a stack without its own pollers, the admin routes served
// beside it (awstest.ServeAdmin), and (when asked) tier pollers that honour the
// pause flags.
type adminBundle struct {
	*awstest.Bundle
	svc      *admin.Service
	srv      *awstest.AdminServer
	adminURL string
	admin    string // admin token
	service  string // service token
	hooks    *hooks
}

// hooks lets a test block the publisher at a crash point.
type hooks struct {
	mu sync.Mutex
	at map[string]func() // job id + point → what to do there
}

func (h *hooks) set(jobID, point string, fn func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.at[jobID+"|"+point] = fn
}

func (h *hooks) crash(point string, j *job.Job) error {
	h.mu.Lock()
	fn := h.at[j.ID+"|"+point]
	delete(h.at, j.ID+"|"+point)
	h.mu.Unlock()
	if fn != nil {
		fn()
	}
	return nil
}

func setupAdmin(t *testing.T, env map[string]string, pollers bool) *adminBundle {
	t.Helper()
	h := &hooks{at: map[string]func(){}}
	b := awstest.Setup(t, env, stack.Options{DisablePollers: true, Crash: h.crash})
	srv := awstest.ServeAdmin(t, b.Stack)
	if pollers {
		srv.RunPollers(t)
	}
	return &adminBundle{Bundle: b, svc: srv.Service, srv: srv, adminURL: srv.URL, hooks: h,
		admin: b.Token("op-admin", "admin", ""), service: b.Token("mon-service", "service", "")}
}

// call sends a request to the admin routes.
func (ab *adminBundle) call(method, path, token string, body any) awstest.Response {
	ab.T.Helper()
	return ab.CallAt(ab.adminURL, method, path, token, body)
}

// submit connects a user of plan and submits a job of n items.
func (ab *adminBundle) submit(user, plan string, n int) (token, id string) {
	ab.T.Helper()
	tok := ab.Token(user, "user", plan)
	ab.Connect(tok)
	var items []any
	for i := range n {
		items = append(items, map[string]any{"uploadId": ab.Upload(tok, awstest.PNG(ab.T, 8+i))})
	}
	r := ab.Must(ab.Call("POST", "/v1/jobs", tok, map[string]any{"items": items, "params": map[string]any{"title": user + " " + plan}}), 201)
	return tok, r.Body["id"].(string)
}

// overviewPoll is how often a test waiting on the overview reads it: one
// read is about 200 queries (awstest.EventuallyEvery).
const overviewPoll = 250 * time.Millisecond

// waitOverview waits until the overview, read as the admin, satisfies cond.
func (ab *adminBundle) waitOverview(cond func(ov awstest.Response) bool, format string, args ...any) {
	ab.T.Helper()
	ab.EventuallyEvery(overviewPoll, func() bool { return cond(ab.call("GET", "/v1/admin/overview", ab.admin, nil)) }, format, args...)
}

func tierOf(ov awstest.Response, tier string) map[string]any {
	tiers, _ := ov.Body["tiers"].(map[string]any)
	m, _ := tiers[tier].(map[string]any)
	return m
}

func TestAdminRoles(t *testing.T) {
	t.Parallel()
	ab := setupAdmin(t, map[string]string{"CONVEYOR_STUCK_AFTER": "1s"}, false)
	user := ab.Token("u-nosy", "user", "enterprise")
	_, queuedJob := ab.submit("u-roles", "free", 1)
	someJob := "job_aaaaaaaaaaaaaaaaaaaaaaaaaa"
	item := "itm_aaaaaaaaaaaaaaaaaaaaaaaaaa"
	ids := map[string]any{"jobIds": []string{someJob}}

	reads := []struct{ method, path string }{
		{"GET", "/v1/admin/overview"},
		{"GET", "/v1/admin/dlq/low"},
		{"GET", "/v1/admin/dlq/high?limit=5"},
		{"GET", "/v1/admin/breakers"},
		{"GET", "/v1/admin/stats?hours=24"},
	}
	writes := []struct {
		method, path string
		body         any
		status       int
	}{
		{"POST", "/v1/admin/jobs/restart", ids, 200},
		{"POST", "/v1/admin/jobs/stop", ids, 200},
		{"POST", "/v1/admin/jobs/" + someJob + "/items/" + item + "/restart", nil, 404},
		{"POST", "/v1/admin/dlq/medium/redrive", nil, 202},
		{"POST", "/v1/admin/dlq/medium/redrive", ids, 202},
		{"POST", "/v1/admin/tiers/medium/pause", nil, 200},
		{"POST", "/v1/admin/tiers/medium/resume", nil, 200},
		{"POST", "/v1/admin/breakers/host:example.com/reset", nil, 200},
	}
	// The breaker the admin resets (a key without one is 404).
	if err := ab.Stack.App.Breaker.Record(context.Background(), breaker.RateLimited, time.Minute, "host:example.com"); err != nil {
		t.Fatal(err)
	}
	for _, rd := range reads {
		t.Run("read "+rd.path, func(t *testing.T) {
			if r := ab.call(rd.method, rd.path, user, nil); r.Status != 403 || r.ErrorCode() != "forbidden" {
				t.Errorf("user: %d %s", r.Status, r.Raw)
			}
			if r := ab.call(rd.method, rd.path, "", nil); r.Status != 401 {
				t.Errorf("no token: %d %s", r.Status, r.Raw)
			}
			for _, tok := range []string{ab.service, ab.admin} {
				if r := ab.call(rd.method, rd.path, tok, nil); r.Status != 200 {
					t.Errorf("%d %s", r.Status, r.Raw)
				}
			}
		})
	}
	for _, w := range writes {
		t.Run("write "+w.path, func(t *testing.T) {
			for name, tok := range map[string]string{"user": user, "service": ab.service} {
				if r := ab.call(w.method, w.path, tok, w.body); r.Status != 403 {
					t.Errorf("%s: %d %s", name, r.Status, r.Raw)
				}
			}
			if r := ab.call(w.method, w.path, ab.admin, w.body); r.Status != w.status {
				t.Errorf("admin: %d, want %d: %s", r.Status, w.status, r.Raw)
			}
		})
	}

	// The overview's shape, and a queued job nobody takes is an orphan —
	// unless its tier is paused.
	ov := ab.Must(ab.call("GET", "/v1/admin/overview", ab.service, nil), 200)
	if ov.Body["environment"] != "local" {
		t.Errorf("environment: %s", ov.Raw)
	}
	for _, tier := range []string{"high", "medium", "low", "system"} {
		m := tierOf(ov, tier)
		for _, k := range []string{"waiting", "inFlight", "delayed", "dlq", "paused"} {
			if _, ok := m[k]; !ok {
				t.Errorf("tiers.%s.%s missing: %s", tier, k, ov.Raw)
			}
		}
	}
	jobs, _ := ov.Body["jobs"].(map[string]any)
	for _, st := range []string{"scheduled", "queued", "running", "succeeded", "failed", "cancelled"} {
		if _, ok := jobs[st]; !ok {
			t.Errorf("jobs.%s missing: %s", st, ov.Raw)
		}
	}
	if jobs["queued"] != 1.0 || tierOf(ov, "low")["waiting"] != 1.0 {
		t.Errorf("the queued job is not counted: %s", ov.Raw)
	}
	ab.waitOverview(func(ov awstest.Response) bool { return ov.Body["orphans"] == 1.0 }, "job %s counted as an orphan", queuedJob)
	ab.Must(ab.call("POST", "/v1/admin/tiers/low/pause", ab.admin, nil), 200)
	ov = ab.Must(ab.call("GET", "/v1/admin/overview", ab.admin, nil), 200)
	if ov.Body["orphans"] != 0.0 || tierOf(ov, "low")["paused"] != true {
		t.Errorf("a paused tier's waiting job is not an orphan: %s", ov.Raw)
	}
}

func TestAdminBadInput(t *testing.T) {
	t.Parallel()
	ab := setupAdmin(t, nil, false)
	_, id := ab.submit("u-bad", "free", 1)
	tests := []struct {
		name         string
		method, path string
		body         any
		status       int
		field        string
	}{
		{"unknown tier peek", "GET", "/v1/admin/dlq/urgent", nil, 404, ""},
		{"unknown tier pause", "POST", "/v1/admin/tiers/urgent/pause", nil, 404, ""},
		{"unknown tier redrive", "POST", "/v1/admin/dlq/urgent/redrive", nil, 404, ""},
		{"limit zero", "GET", "/v1/admin/dlq/low?limit=0", nil, 400, "limit"},
		{"limit too big", "GET", "/v1/admin/dlq/low?limit=101", nil, 400, "limit"},
		{"limit not a number", "GET", "/v1/admin/dlq/low?limit=ten", nil, 400, "limit"},
		{"hours zero", "GET", "/v1/admin/stats?hours=0", nil, 400, "hours"},
		{"hours too many", "GET", "/v1/admin/stats?hours=169", nil, 400, "hours"},
		{"restart without body", "POST", "/v1/admin/jobs/restart", nil, 415, ""},
		{"restart empty jobIds", "POST", "/v1/admin/jobs/restart", map[string]any{"jobIds": []string{}}, 400, "jobIds"},
		{"restart no jobIds", "POST", "/v1/admin/jobs/restart", map[string]any{}, 400, "jobIds"},
		{"restart ids and a filter", "POST", "/v1/admin/jobs/restart", map[string]any{"jobIds": []string{id}, "filter": map[string]any{"status": "failed"}}, 400, "filter"},
		{"restart a limit with ids", "POST", "/v1/admin/jobs/restart", map[string]any{"jobIds": []string{id}, "limit": 5}, 400, "jobIds"},
		{"restart a filter without status", "POST", "/v1/admin/jobs/restart", map[string]any{"filter": map[string]any{"tier": "low"}}, 400, "filter.status"},
		{"restart a filter of running jobs", "POST", "/v1/admin/jobs/restart", map[string]any{"filter": map[string]any{"status": "running"}}, 400, "filter.status"},
		{"stop a filter of failed jobs", "POST", "/v1/admin/jobs/stop", map[string]any{"filter": map[string]any{"status": "failed"}}, 400, "filter.status"},
		{"stop a filter of an unknown status", "POST", "/v1/admin/jobs/stop", map[string]any{"filter": map[string]any{"status": "done"}}, 400, "filter.status"},
		{"stop a filter of an unknown tier", "POST", "/v1/admin/jobs/stop", map[string]any{"filter": map[string]any{"status": "queued", "tier": "urgent"}}, 400, "filter.tier"},
		{"stop a filter with an unknown member", "POST", "/v1/admin/jobs/stop", map[string]any{"filter": map[string]any{"status": "queued", "colour": "red"}}, 400, "filter.colour"},
		{"stop a filter's limit zero", "POST", "/v1/admin/jobs/stop", map[string]any{"filter": map[string]any{"status": "queued"}, "limit": 0}, 400, "limit"},
		{"stop a filter's limit too big", "POST", "/v1/admin/jobs/stop", map[string]any{"filter": map[string]any{"status": "queued"}, "limit": 101}, 400, "limit"},
		{"restart too many", "POST", "/v1/admin/jobs/restart", map[string]any{"jobIds": make([]string, 101)}, 400, "jobIds"},
		{"stop jobIds not a list", "POST", "/v1/admin/jobs/stop", map[string]any{"jobIds": id}, 400, ""},
		{"stop null job ids", "POST", "/v1/admin/jobs/stop", map[string]any{"jobIds": []any{nil, nil}}, 400, "jobIds[0]"},
		{"restart a null among ids", "POST", "/v1/admin/jobs/restart", map[string]any{"jobIds": []any{id, nil}}, 400, "jobIds[1]"},
		{"stop unknown field", "POST", "/v1/admin/jobs/stop", map[string]any{"jobIds": []string{id}, "force": true}, 400, ""},
		{"stop not JSON", "POST", "/v1/admin/jobs/stop", "{nope", 400, ""},
		{"redrive empty jobIds", "POST", "/v1/admin/dlq/low/redrive", map[string]any{"jobIds": []string{}}, 400, "jobIds"},
		{"redrive junk id", "POST", "/v1/admin/dlq/low/redrive", map[string]any{"jobIds": []string{id, "../etc"}}, 400, "jobIds[1]"},
		{"stop ids and dryRun false", "POST", "/v1/admin/jobs/stop", map[string]any{"jobIds": []string{id}, "dryRun": false}, 400, "jobIds"},
		{"redrive negative max", "POST", "/v1/admin/dlq/low/redrive", map[string]any{"max": -1}, 400, "max"},
		{"item of an unknown job", "POST", "/v1/admin/jobs/job_aaaaaaaaaaaaaaaaaaaaaaaaaa/items/itm_aaaaaaaaaaaaaaaaaaaaaaaaaa/restart", nil, 404, ""},
		{"unknown item", "POST", "/v1/admin/jobs/" + id + "/items/itm_aaaaaaaaaaaaaaaaaaaaaaaaaa/restart", nil, 404, ""},
		{"junk item", "POST", "/v1/admin/jobs/" + id + "/items/nope/restart", nil, 404, ""},
		{"item of an active job", "POST", "/v1/admin/jobs/" + id + "/items/" + ab.firstItem(id) + "/restart", nil, 409, ""},
		{"breaker key too long", "POST", "/v1/admin/breakers/" + strings.Repeat("k", 300) + "/reset", nil, 400, "key"},
		{"breaker key no breaker has", "POST", "/v1/admin/breakers/host:nowhere.example/reset", nil, 404, ""},
		{"wrong method", "DELETE", "/v1/admin/overview", nil, 405, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := ab.call(tt.method, tt.path, ab.admin, tt.body)
			if r.Status != tt.status {
				t.Fatalf("status %d, want %d: %s", r.Status, tt.status, r.Raw)
			}
			e, _ := r.Body["error"].(map[string]any)
			if e["code"] == nil || e["message"] == nil {
				t.Errorf("not the error contract: %s", r.Raw)
			}
			if tt.field != "" && e["field"] != tt.field {
				t.Errorf("field %v, want %s", e["field"], tt.field)
			}
		})
	}
	// Bulk calls skip what they cannot do, with the reason; an entry that
	// is no job id is one of them.
	r := ab.Must(ab.call("POST", "/v1/admin/jobs/restart", ab.admin, map[string]any{"jobIds": []string{id, id, "job_aaaaaaaaaaaaaaaaaaaaaaaaaa", "../etc"}}), 200)
	if got := string(r.Raw); !strings.Contains(got, `"restarted":[]`) ||
		!strings.Contains(got, `{"id":"`+id+`","reason":"job is queued"}`) ||
		!strings.Contains(got, `{"id":"job_aaaaaaaaaaaaaaaaaaaaaaaaaa","reason":"not found"}`) ||
		!strings.Contains(got, `{"id":"../etc","reason":"not a job id"}`) || strings.Contains(got, "dryRun") {
		t.Errorf("restart of an active, an unknown and a malformed job: %s", got)
	}
}

// bulkResult is the answer of a bulk call.
type bulkResult struct {
	Restarted []string        `json:"restarted"`
	Stopped   []string        `json:"stopped"`
	Skipped   []admin.Skipped `json:"skipped"`
	DryRun    *bool           `json:"dryRun"`
	Matched   *int            `json:"matched"`
	Limit     *int            `json:"limit"`
	JobIDs    []string        `json:"jobIds"`
}

func (ab *adminBundle) bulk(path string, body any) bulkResult {
	ab.T.Helper()
	r := ab.Must(ab.call("POST", path, ab.admin, body), 200)
	var out bulkResult
	if err := json.Unmarshal(r.Raw, &out); err != nil {
		ab.T.Fatalf("%s: %v", r.Raw, err)
	}
	return out
}

// TestBulkSkipsOnlyTheBadIDs: a bulk stop or restart by id acts on every
// good id and skips each bad one with its reason — one that is no job id,
// an unknown one, one in the wrong state — instead of failing the batch.
func TestBulkSkipsOnlyTheBadIDs(t *testing.T) {
	t.Parallel()
	ab := setupAdmin(t, nil, false)
	_, a := ab.submit("u-bulk-ids", "free", 1)
	_, b := ab.submit("u-bulk-ids-2", "free", 1)
	unknown := "job_aaaaaaaaaaaaaaaaaaaaaaaaaa"
	got := ab.bulk("/v1/admin/jobs/stop", map[string]any{"jobIds": []string{a, "job_nonexistent", b, unknown, ""}})
	want := bulkResult{Stopped: []string{a, b}, Skipped: []admin.Skipped{
		{ID: "job_nonexistent", Reason: "not a job id"}, {ID: unknown, Reason: "not found"}, {ID: "", Reason: "not a job id"},
	}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("stop (-want +got):\n%s", diff)
	}
	got = ab.bulk("/v1/admin/jobs/restart", map[string]any{"jobIds": []string{"job_nonexistent", a, b}})
	want = bulkResult{Restarted: []string{a, b}, Skipped: []admin.Skipped{{ID: "job_nonexistent", Reason: "not a job id"}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("restart (-want +got):\n%s", diff)
	}
}

// TestBulkByFilter: a bulk stop or restart by filter takes its jobs from
// the inspector's indexes, at most its limit per call (newest first),
// counts every match, and changes nothing in a dry run; calling again
// goes on with the rest, since a job acted on leaves the filter's status.
func TestBulkByFilter(t *testing.T) {
	t.Parallel()
	ab := setupAdmin(t, nil, false)
	var mine []string
	for range 3 {
		_, id := ab.submit("u-bulk-filter", "free", 1)
		mine = append(mine, id)
	}
	_, other := ab.submit("u-bulk-bystander", "free", 1)
	slices.Reverse(mine) // newest first
	queued := map[string]any{"status": "queued", "owner": "u-bulk-filter", "tier": "low", "type": "publish"}
	yes, no := true, false
	n := func(v int) *int { return &v }

	dry := ab.bulk("/v1/admin/jobs/stop", map[string]any{"filter": queued, "dryRun": true})
	if diff := cmp.Diff(bulkResult{Stopped: []string{}, Skipped: []admin.Skipped{}, DryRun: &yes, Matched: n(3), Limit: n(admin.MaxBulk), JobIDs: mine}, dry); diff != "" {
		t.Errorf("dry run (-want +got):\n%s", diff)
	}
	for _, id := range append(slices.Clone(mine), other) {
		if j, err := ab.Stack.App.Store.GetJob(context.Background(), id); err != nil || j.Status != job.Queued {
			t.Fatalf("after a dry run, %s is %s (%v)", id, j.Status, err)
		}
	}
	first := ab.bulk("/v1/admin/jobs/stop", map[string]any{"filter": queued, "limit": 2})
	if diff := cmp.Diff(bulkResult{Stopped: mine[:2], Skipped: []admin.Skipped{}, DryRun: &no, Matched: n(3), Limit: n(2), JobIDs: mine[:2]}, first); diff != "" {
		t.Errorf("first call (-want +got):\n%s", diff)
	}
	second := ab.bulk("/v1/admin/jobs/stop", map[string]any{"filter": queued, "limit": 2})
	if diff := cmp.Diff(bulkResult{Stopped: mine[2:], Skipped: []admin.Skipped{}, DryRun: &no, Matched: n(1), Limit: n(2), JobIDs: mine[2:]}, second); diff != "" {
		t.Errorf("second call (-want +got):\n%s", diff)
	}
	if done := ab.bulk("/v1/admin/jobs/stop", map[string]any{"filter": queued}); *done.Matched != 0 || len(done.Stopped) != 0 {
		t.Errorf("third call: %+v, want nothing left", done)
	}
	if j, err := ab.Stack.App.Store.GetJob(context.Background(), other); err != nil || j.Status != job.Queued {
		t.Errorf("another owner's job is %s (%v), want queued", j.Status, err)
	}

	stopped := map[string]any{"status": "cancelled", "errorCode": admin.StopCode, "owner": "u-bulk-filter"}
	dry = ab.bulk("/v1/admin/jobs/restart", map[string]any{"filter": stopped, "dryRun": true, "limit": 1})
	if *dry.Matched != 3 || len(dry.JobIDs) != 1 || len(dry.Restarted) != 0 {
		t.Errorf("restart dry run: %+v", dry)
	}
	all := ab.bulk("/v1/admin/jobs/restart", map[string]any{"filter": stopped})
	if diff := cmp.Diff(mine, all.Restarted); diff != "" || *all.Matched != 3 {
		t.Errorf("restart by filter: matched %d (-want +got):\n%s", *all.Matched, diff)
	}
	for _, id := range mine {
		if j, err := ab.Stack.App.Store.GetJob(context.Background(), id); err != nil || j.Status != job.Queued {
			t.Errorf("restarted %s is %s (%v), want queued", id, j.Status, err)
		}
	}
}

func (ab *adminBundle) firstItem(id string) string {
	j, err := ab.Stack.App.Store.GetJob(context.Background(), id)
	if err != nil {
		ab.T.Fatal(err)
	}
	return j.Items[0].ID
}

func TestPausingATierHoldsItsJobsWhileOthersFlow(t *testing.T) {
	t.Parallel()
	ab := setupAdmin(t, nil, true)
	r := ab.Must(ab.call("POST", "/v1/admin/tiers/low/pause", ab.admin, nil), 200)
	if r.Body["tier"] != "low" || r.Body["paused"] != true {
		t.Fatalf("pause: %s", r.Raw)
	}
	ab.srv.WaitPaused(t, job.Low) // a receive already under way when the flag flipped ends

	lowTok, low := ab.submit("u-free", "free", 1)
	_, stopped := ab.submit("u-free-2", "free", 1)
	highTok, high := ab.submit("u-corp", "enterprise", 1)
	ab.WaitStatus(highTok, high, "succeeded")

	// Stopping a job whose message waits in the paused queue: the message
	// has no effect once the tier runs again.
	s := ab.Must(ab.call("POST", "/v1/admin/jobs/stop", ab.admin, map[string]any{"jobIds": []string{stopped}}), 200)
	if got := s.Body["stopped"]; len(got.([]any)) != 1 {
		t.Fatalf("stop: %s", s.Raw)
	}

	ov := ab.Must(ab.call("GET", "/v1/admin/overview", ab.service, nil), 200)
	if tierOf(ov, "low")["paused"] != true || tierOf(ov, "low")["waiting"] != 2.0 || tierOf(ov, "high")["paused"] != false {
		t.Errorf("overview while low is paused: %s", ov.Raw)
	}
	if j := ab.Call("GET", "/v1/jobs/"+low, lowTok, nil); j.Body["status"] != "queued" || j.Body["attempts"] != 0.0 {
		t.Fatalf("the paused tier's job moved: %s", j.Raw)
	}

	r = ab.Must(ab.call("POST", "/v1/admin/tiers/low/resume", ab.admin, nil), 200)
	if r.Body["paused"] != false {
		t.Fatalf("resume: %s", r.Raw)
	}
	ab.WaitStatus(lowTok, low, "succeeded")
	ab.waitOverview(func(ov awstest.Response) bool { return tierOf(ov, "low")["waiting"] == 0.0 }, "the low queue drained")
	j, err := ab.Stack.App.Store.GetJob(context.Background(), stopped)
	if err != nil {
		t.Fatal(err)
	}
	if j.Status != job.Cancelled || j.Error == nil || j.Error.Code != admin.StopCode || j.Attempts != 0 {
		t.Errorf("the stopped job ran after all: %+v", j)
	}
	if pubs := ab.Stack.Simulator.Publications(); len(pubs) != 2 {
		t.Errorf("publications = %d, want 2", len(pubs))
	}
}

func TestDeadLetteredJobIsRedrivenAndFinishes(t *testing.T) {
	t.Parallel()
	ab := setupAdmin(t, nil, true)
	ctx := context.Background()
	a := ab.Stack.App
	ab.Must(ab.call("POST", "/v1/admin/tiers/low/pause", ab.admin, nil), 200)
	ab.srv.WaitPaused(t, job.Low)
	tok, id := ab.submit("u-dlq", "free", 1)
	_, other := ab.submit("u-dlq-2", "free", 1)

	// A consumer that crashes on every delivery: receive, never delete,
	// until SQS moves the messages to the DLQ (maxReceiveCount).
	q := a.Config.QueueURLs[job.Low]
	dlq := a.Config.DLQURLs[job.Low]
	ab.Eventually(func() bool {
		got, err := a.Clients.SQS.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(q), MaxNumberOfMessages: 10})
		if err != nil {
			t.Fatal(err)
		}
		var back []sqstypes.ChangeMessageVisibilityBatchRequestEntry
		for i, m := range got.Messages {
			back = append(back, sqstypes.ChangeMessageVisibilityBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: m.ReceiptHandle})
		}
		if len(back) > 0 {
			if _, err := a.Clients.SQS.ChangeMessageVisibilityBatch(ctx, &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: aws.String(q), Entries: back}); err != nil {
				t.Fatal(err)
			}
		}
		dead, err := queueDepth(ctx, a.Clients.SQS, dlq)
		if err != nil {
			t.Fatal(err)
		}
		left, err := queueDepth(ctx, a.Clients.SQS, q)
		if err != nil {
			t.Fatal(err)
		}
		return dead == 2 && left == 0
	}, "both messages dead-lettered")
	// The overview, as the service role reads it, counts them there.
	if ov := ab.Must(ab.call("GET", "/v1/admin/overview", ab.service, nil), 200); tierOf(ov, "low")["dlq"] != 2.0 || tierOf(ov, "low")["waiting"] != 0.0 {
		t.Fatalf("the overview after both messages were dead-lettered: %s", ov.Raw)
	}
	// Recovery later gave up on the job: it failed, stuck.
	if _, err := a.Store.UpdateJob(ctx, id, func(j *job.Job) error {
		j.Error = &job.Error{Code: "stuck", Message: "no progress", Retryable: true}
		return j.Apply(job.Fail, time.Now())
	}); err != nil {
		t.Fatal(err)
	}

	peek := ab.Must(ab.call("GET", "/v1/admin/dlq/low?limit=10", ab.service, nil), 200)
	msgs, _ := peek.Body["messages"].([]any)
	if len(msgs) != 2 {
		t.Fatalf("peek: %s", peek.Raw)
	}
	seen := map[string]map[string]any{}
	for _, m := range msgs {
		mm := m.(map[string]any)
		seen[mm["jobId"].(string)] = mm
	}
	if m := seen[id]; m == nil || m["sentAt"] == nil || m["error"].(map[string]any)["code"] != "stuck" || m["status"] != "failed" {
		t.Errorf("peeked message of %s: %v", id, m)
	}
	// Peeking consumed nothing.
	again := ab.Must(ab.call("GET", "/v1/admin/dlq/low?limit=1", ab.admin, nil), 200)
	if n := len(again.Body["messages"].([]any)); n != 1 {
		t.Errorf("a second peek saw %d messages: %s", n, again.Raw)
	}

	ab.Must(ab.call("POST", "/v1/admin/tiers/low/resume", ab.admin, nil), 200)
	r := ab.Must(ab.call("POST", "/v1/admin/dlq/low/redrive", ab.admin, map[string]any{"jobIds": []string{id}}), 202)
	if r.Body["moved"] != 1.0 {
		t.Fatalf("redrive of one job: %s", r.Raw)
	}
	done := ab.WaitStatus(tok, id, "succeeded")
	if res, _ := done.Body["result"].(map[string]any); res["deviationId"] == nil {
		t.Errorf("no result: %s", done.Raw)
	}
	ov := ab.Must(ab.call("GET", "/v1/admin/overview", ab.admin, nil), 200)
	if tierOf(ov, "low")["dlq"] != 1.0 {
		t.Errorf("the other message left the DLQ: %s", ov.Raw)
	}
	// The rest, without a selection.
	r = ab.Must(ab.call("POST", "/v1/admin/dlq/low/redrive", ab.admin, nil), 202)
	if r.Body["moved"] != 1.0 {
		t.Fatalf("redrive of the rest: %s", r.Raw)
	}
	ab.Eventually(func() bool {
		j, err := a.Store.GetJob(ctx, other)
		return err == nil && j.Status == job.Succeeded
	}, "job %s finished after the redrive", other)
	if n, _ := queueDepth(ctx, a.Clients.SQS, dlq); n != 0 {
		t.Errorf("DLQ depth %d after redriving everything", n)
	}
}

// queueDepth is how many messages the queue at url holds, visible or in flight.
func queueDepth(ctx context.Context, c *sqs.Client, url string) (int, error) {
	out, err := c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url), AttributeNames: []sqstypes.QueueAttributeName{
		sqstypes.QueueAttributeNameApproximateNumberOfMessages, sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible}})
	if err != nil {
		return 0, err
	}
	visible, _ := strconv.Atoi(out.Attributes["ApproximateNumberOfMessages"])
	held, _ := strconv.Atoi(out.Attributes["ApproximateNumberOfMessagesNotVisible"])
	return visible + held, nil
}

func TestStopThenRestartKeepsOutputs(t *testing.T) {
	t.Parallel()
	// The run is held in a hook while the operator stops it: its heartbeat
	// keeps writing the job, and the stop's read and write must fit
	// between two beats, as they do on AWS (30 s beats, ~10 ms requests),
	// not between 200 ms beats on a loaded emulator.
	ab := setupAdmin(t, map[string]string{"CONVEYOR_HEARTBEAT_INTERVAL": "1s"}, true)
	ab.Must(ab.call("POST", "/v1/admin/tiers/medium/pause", ab.admin, nil), 200)
	ab.srv.WaitPaused(t, job.Medium)
	tok, id := ab.submit("u-stop", "pro", 2)

	// Hold the worker right after the first item's output is stored.
	reached, release := make(chan struct{}), make(chan struct{})
	ab.hooks.set(id, publish.AfterItem, func() { close(reached); <-release })
	ab.Must(ab.call("POST", "/v1/admin/tiers/medium/resume", ab.admin, nil), 200)
	select {
	case <-reached:
	case <-time.After(20 * time.Second):
		t.Fatal("the worker never published the first item")
	}
	r := ab.Must(ab.call("POST", "/v1/admin/jobs/stop", ab.admin, map[string]any{"jobIds": []string{id}}), 200)
	close(release)
	if got := r.Body["stopped"].([]any); len(got) != 1 || got[0] != id {
		t.Fatalf("stop: %s", r.Raw)
	}
	stopped := ab.WaitStatus(tok, id, "cancelled")
	if e, _ := stopped.Body["error"].(map[string]any); e["code"] != "stopped" {
		t.Errorf("stopped job's error: %s", stopped.Raw)
	}
	items := stopped.Body["items"].([]any)
	first := items[0].(map[string]any)
	out, _ := first["output"].(map[string]any)
	if first["status"] != "published" || out["deviationId"] == nil {
		t.Fatalf("the first item's output was not kept: %s", stopped.Raw)
	}
	// Stopping it again is skipped: it is finished.
	again := ab.Must(ab.call("POST", "/v1/admin/jobs/stop", ab.admin, map[string]any{"jobIds": []string{id}}), 200)
	if !strings.Contains(string(again.Raw), `"reason":"job is cancelled"`) {
		t.Errorf("second stop: %s", again.Raw)
	}
	// The worker lets go of the stopped job and its message is gone.
	ab.waitOverview(func(ov awstest.Response) bool {
		m := tierOf(ov, "medium")
		return m["waiting"] == 0.0 && m["inFlight"] == 0.0
	}, "the stopped job's message went away")

	r = ab.Must(ab.call("POST", "/v1/admin/jobs/restart", ab.admin, map[string]any{"jobIds": []string{id}}), 200)
	if got := r.Body["restarted"].([]any); len(got) != 1 {
		t.Fatalf("restart: %s", r.Raw)
	}
	done := ab.WaitStatus(tok, id, "succeeded")
	items = done.Body["items"].([]any)
	if got := items[0].(map[string]any)["output"].(map[string]any)["deviationId"]; got != out["deviationId"] {
		t.Errorf("first item's output changed: %v → %v", out["deviationId"], got)
	}
	if items[1].(map[string]any)["status"] != "published" {
		t.Errorf("second item: %s", done.Raw)
	}
	if pubs := ab.Stack.Simulator.Publications(); len(pubs) != 2 {
		t.Errorf("publications = %d, want 2 (one per item, none twice)", len(pubs))
	}
}

func TestRestartItem(t *testing.T) {
	t.Parallel()
	ab := setupAdmin(t, nil, true)
	ab.Must(ab.call("POST", "/v1/admin/tiers/high/pause", ab.admin, nil), 200)
	ab.srv.WaitPaused(t, job.High)
	tok, id := ab.submit("u-item", "corporate", 2)
	// The API refuses the second publication for good (a 400), once.
	var once sync.Once
	ab.hooks.set(id, publish.AfterItem, func() {
		once.Do(func() {
			ab.Stack.Simulator.AddFault(simulator.Fault{Path: "/api/v1/oauth2/stash/publish", Status: 400, Count: 1})
		})
	})
	ab.Must(ab.call("POST", "/v1/admin/tiers/high/resume", ab.admin, nil), 200)
	failed := ab.WaitStatus(tok, id, "failed")
	items := failed.Body["items"].([]any)
	first, second := items[0].(map[string]any), items[1].(map[string]any)
	if first["status"] != "published" || second["status"] != "failed" {
		t.Fatalf("failed job: %s", failed.Raw)
	}
	r := ab.call("POST", "/v1/admin/jobs/"+id+"/items/"+first["id"].(string)+"/restart", ab.admin, nil)
	if r.Status != 409 || r.ErrorCode() != "item_published" {
		t.Errorf("restart of a published item: %d %s", r.Status, r.Raw)
	}
	r = ab.Must(ab.call("POST", "/v1/admin/jobs/"+id+"/items/"+second["id"].(string)+"/restart", ab.admin, nil), 200)
	if r.Body["status"] != "queued" {
		t.Errorf("restart of the failed item: %s", r.Raw)
	}
	done := ab.WaitStatus(tok, id, "succeeded")
	items = done.Body["items"].([]any)
	if items[0].(map[string]any)["output"].(map[string]any)["deviationId"] != first["output"].(map[string]any)["deviationId"] {
		t.Errorf("the published item's output changed: %s", done.Raw)
	}
	if items[1].(map[string]any)["status"] != "published" {
		t.Errorf("the restarted item: %s", done.Raw)
	}
}

// putJob stores a job of owner in tier, queued at at, then applies change
// (nil: none) through the store, as the workers do.
func putJob(t *testing.T, st *store.Store, owner string, tier job.Tier, at time.Time, change func(j *job.Job) error) job.Job {
	t.Helper()
	ctx := context.Background()
	j := job.Job{ID: ids.New(ids.Job), Type: publish.Type, Status: job.Queued, Tier: tier, Owner: owner, Hash: ids.New("h"),
		CreatedAt: at, UpdatedAt: at, QueuedAt: &at, MaxAttempts: 3, Phases: job.NewPhases(publish.Phases...)}
	if _, _, err := st.CreateJob(ctx, &j); err != nil {
		t.Fatal(err)
	}
	if change == nil {
		return j
	}
	j, err := st.UpdateJob(ctx, j.ID, change)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// finish runs j from queued to status at at.
func finish(status job.Status, at time.Time) func(j *job.Job) error {
	return func(j *job.Job) error {
		if status == job.Cancelled {
			return j.Apply(job.Cancel, at)
		}
		if err := j.Apply(job.Start, at); err != nil {
			return err
		}
		if status == job.Failed {
			j.Error = &job.Error{Code: "attempts_exhausted", Message: "x"}
			return j.Apply(job.Fail, at)
		}
		return j.Apply(job.Succeed, at)
	}
}

func TestStatsAndRecovery(t *testing.T) {
	t.Parallel()
	ab := setupAdmin(t, nil, false)
	ctx := context.Background()
	st := ab.Stack.App.Store
	now := time.Now().UTC()
	for _, c := range []struct {
		status job.Status
		at     time.Time
	}{
		{job.Succeeded, now}, {job.Succeeded, now}, {job.Succeeded, now}, {job.Failed, now},
		{job.Succeeded, now.Add(-2 * time.Hour)}, {job.Failed, now.Add(-30 * time.Hour)}, {job.Cancelled, now},
	} {
		putJob(t, st, "u-stats", "low", c.at.Add(-time.Minute), finish(c.status, c.at))
	}
	r := ab.Must(ab.call("GET", "/v1/admin/stats?hours=3", ab.service, nil), 200)
	hours := r.Body["hours"].([]any)
	if len(hours) != 3 || r.Body["succeeded"] != 4.0 || r.Body["failed"] != 1.0 || r.Body["cancelled"] != 1.0 {
		t.Fatalf("stats of 3 hours: %s", r.Raw)
	}
	last := hours[2].(map[string]any)
	if last["hour"] != now.Truncate(time.Hour).Format(time.RFC3339) || last["succeeded"] != 3.0 || last["failed"] != 1.0 || last["cancelled"] != 1.0 {
		t.Errorf("the current hour: %v", last)
	}
	if hours[0].(map[string]any)["succeeded"] != 1.0 {
		t.Errorf("two hours ago: %v", hours[0])
	}
	if err := st.RecordRecovery(ctx, store.RecoveryRun{Orphans: 3, Requeued: 2, FailedStuck: 1}); err != nil {
		t.Fatal(err)
	}
	ov := ab.Must(ab.call("GET", "/v1/admin/overview", ab.admin, nil), 200)
	stats := ov.Body["stats"].(map[string]any)
	rec, _ := ov.Body["recovery"].(map[string]any)
	if stats["succeeded"] != 4.0 || stats["failed"] != 1.0 || stats["cancelled"] != 1.0 || rec["orphans"] != 3.0 || rec["requeued"] != 2.0 {
		t.Errorf("overview: %s", ov.Raw)
	}
	if h, _ := stats["hours"].([]any); len(h) != admin.StatsHoursDefault {
		t.Errorf("overview: %d hours of stats, want %d", len(h), admin.StatsHoursDefault)
	}
}

// The overview's delayed jobs are those waiting for a time (scheduleAt,
// retryAt), per tier; a re-sent job is not delayed; its jobs per status
// are the active ones; a cancel through the API is counted in its hour.
func TestOverviewDelayedAndCancelled(t *testing.T) {
	t.Parallel()
	ab := setupAdmin(t, nil, false)
	st := ab.Stack.App.Store
	now := time.Now().UTC()
	later := now.Add(time.Hour)
	// Scheduled for later: delayed in high.
	putJob(t, st, "u-ov", "high", now, func(j *job.Job) error {
		j.Status, j.ScheduleAt, j.Phase = job.Scheduled, &later, "scheduled"
		return nil
	})
	// Scheduled in the past and not yet released: due, not delayed.
	past := now.Add(-time.Minute)
	putJob(t, st, "u-ov", "high", now, func(j *job.Job) error {
		j.Status, j.ScheduleAt = job.Scheduled, &past
		return nil
	})
	// Backing off in the queue after a temporary error: delayed in low.
	putJob(t, st, "u-ov", "low", now, func(j *job.Job) error {
		if err := j.Apply(job.Start, now); err != nil {
			return err
		}
		return j.RetryLater(&job.Error{Code: "upstream_5xx"}, later, now)
	})
	// Parked in the table until later: delayed in medium.
	putJob(t, st, "u-ov", "medium", now, func(j *job.Job) error { return j.Park("circuit_open", later, now) })
	// Re-sent by recovery (its next check is later): waiting in the queue, not delayed.
	putJob(t, st, "u-ov", "medium", now, func(j *job.Job) error { return j.Resend(time.Hour, now) })
	// Running.
	putJob(t, st, "u-ov", "low", now, func(j *job.Job) error { return j.Apply(job.Start, now) })
	// Cancelled by its user through the API.
	tok, id := ab.submit("u-cancel", "free", 1)
	ab.Must(ab.Call("POST", "/v1/jobs/"+id+"/cancel", tok, nil), 200)

	ov := ab.Must(ab.call("GET", "/v1/admin/overview", ab.service, nil), 200)
	for tier, want := range map[string]float64{"high": 1, "medium": 1, "low": 1, "system": 0} {
		if got := tierOf(ov, tier)["delayed"]; got != want {
			t.Errorf("%s delayed = %v, want %v", tier, got, want)
		}
	}
	wantJobs := map[string]any{"scheduled": 2.0, "queued": 3.0, "running": 1.0, "succeeded": 0.0, "failed": 0.0, "cancelled": 1.0}
	if diff := cmp.Diff(wantJobs, ov.Body["jobs"]); diff != "" {
		t.Errorf("jobs per status (-want +got):\n%s\n%s", diff, ov.Raw)
	}
	stats := ov.Body["stats"].(map[string]any)
	hours := stats["hours"].([]any)
	last := hours[len(hours)-1].(map[string]any)
	if stats["cancelled"] != 1.0 || last["cancelled"] != 1.0 || stats["succeeded"] != 0.0 {
		t.Errorf("stats: %v", stats)
	}
}

// The inspector: search across two users with cursors and X-Total-Count,
// any job with its owner and events, orphans with their reason; a user
// token gets 403 on each of its routes.
func TestInspector(t *testing.T) {
	t.Parallel()
	ab := setupAdmin(t, map[string]string{"CONVEYOR_STUCK_AFTER": "10m"}, false)
	st := ab.Stack.App.Store
	now := time.Now().UTC()
	annTok, annJob := ab.submit("u-ann", "free", 1)
	_, bobJob := ab.submit("u-bob", "enterprise", 1)
	old := now.Add(-time.Hour)
	lost := putJob(t, st, "u-bob", "medium", old, nil)
	dead := putJob(t, st, "u-ann", "high", old, func(j *job.Job) error {
		_, err := j.Claim("worker-1", old.Add(time.Minute), old)
		return err
	})
	failed := putJob(t, st, "u-ann", "low", old, finish(job.Failed, old.Add(time.Minute)))

	for _, path := range []string{"/v1/admin/jobs", "/v1/admin/jobs/" + annJob, "/v1/admin/orphans"} {
		if r := ab.call("GET", path, annTok, nil); r.Status != 403 || r.ErrorCode() != "forbidden" {
			t.Errorf("user on %s: %d %s", path, r.Status, r.Raw)
		}
		ab.Must(ab.call("GET", path, ab.service, nil), 200)
	}

	// Everything, two at a time, newest first; the count on every page.
	var seen []string
	path := "/v1/admin/jobs?limit=2"
	for range 5 {
		r := ab.Must(ab.call("GET", path, ab.admin, nil), 200)
		if r.Header.Get("X-Total-Count") != "5" {
			t.Errorf("X-Total-Count = %q, want 5", r.Header.Get("X-Total-Count"))
		}
		for _, j := range r.Body["jobs"].([]any) {
			m := j.(map[string]any)
			if m["owner"] != "u-ann" && m["owner"] != "u-bob" {
				t.Errorf("a job without its owner: %v", m)
			}
			seen = append(seen, m["id"].(string))
		}
		next, _ := r.Body["nextCursor"].(string)
		if next == "" {
			break
		}
		path = "/v1/admin/jobs?limit=2&cursor=" + next
	}
	if len(seen) != 5 {
		t.Errorf("walked %d jobs, want 5: %v", len(seen), seen)
	}
	for q, want := range map[string][]string{
		"owner=u-bob":                  {bobJob, lost.ID},
		"owner=u-ann&status=queued":    {annJob},
		"status=failed":                {failed.ID},
		"errorCode=attempts_exhausted": {failed.ID},
		"tier=high":                    {bobJob, dead.ID},
		"type=publish&tier=medium":     {lost.ID},
		"createdTo=" + now.Add(-time.Minute).Format(time.RFC3339Nano): {lost.ID, dead.ID, failed.ID},
	} {
		r := ab.Must(ab.call("GET", "/v1/admin/jobs?"+q, ab.service, nil), 200)
		var got []string
		for _, j := range r.Body["jobs"].([]any) {
			got = append(got, j.(map[string]any)["id"].(string))
		}
		slices.Sort(got)
		slices.Sort(want)
		if diff := cmp.Diff(want, got); diff != "" || r.Header.Get("X-Total-Count") != strconv.Itoa(len(want)) {
			t.Errorf("%s: count %s, ids (-want +got):\n%s", q, r.Header.Get("X-Total-Count"), diff)
		}
	}
	// limit=0: the count alone.
	if r := ab.Must(ab.call("GET", "/v1/admin/jobs?owner=u-ann&limit=0", ab.admin, nil), 200); r.Header.Get("X-Total-Count") != "3" || len(r.Body["jobs"].([]any)) != 0 {
		t.Errorf("limit=0: %s %s", r.Header.Get("X-Total-Count"), r.Raw)
	}
	// Bad filters: 400. Well-formed but unusable (a cursor of another
	// search, a window that ends before it starts): 422.
	first := ab.Must(ab.call("GET", "/v1/admin/jobs?limit=1", ab.admin, nil), 200)
	for q, want := range map[string]int{
		"owner=u-ann&cursor=" + first.Body["nextCursor"].(string): 422, "status=lost": 400, "tier=gold": 400, "limit=201": 400, "limit=x": 400,
		"cursor=a%2Bb": 400, "createdFrom=yesterday": 400, "createdFrom=2026-01-02T00:00:00Z&createdTo=2026-01-01T00:00:00Z": 422,
	} {
		if r := ab.call("GET", "/v1/admin/jobs?"+q, ab.admin, nil); r.Status != want {
			t.Errorf("%s: %d %s, want %d", q, r.Status, r.Raw, want)
		}
	}

	// Any user's job, with its owner and events.
	r := ab.Must(ab.call("GET", "/v1/admin/jobs/"+failed.ID, ab.service, nil), 200)
	evs, _ := r.Body["events"].([]any)
	var types []string
	for _, e := range evs {
		types = append(types, e.(map[string]any)["type"].(string))
	}
	if r.Body["owner"] != "u-ann" || r.Body["status"] != "failed" || !slices.Equal(types, []string{job.EventStarted, job.EventFailed}) {
		t.Errorf("inspected job: %s", r.Raw)
	}
	for _, id := range []string{"job_aaaaaaaaaaaaaaaaaaaaaaaaaa", "nope"} {
		if r := ab.call("GET", "/v1/admin/jobs/"+id, ab.admin, nil); r.Status != 404 {
			t.Errorf("%s: %d %s", id, r.Status, r.Raw)
		}
	}

	// Orphans: the lost message and the dead worker, with their reasons,
	// as many as the overview counts.
	r = ab.Must(ab.call("GET", "/v1/admin/orphans", ab.admin, nil), 200)
	got := map[string]string{}
	for _, o := range r.Body["orphans"].([]any) {
		m := o.(map[string]any)
		got[m["jobId"].(string)] = m["reason"].(string) + " " + m["owner"].(string) + " " + m["tier"].(string) + " " + m["status"].(string)
		if since, err := time.Parse(time.RFC3339Nano, m["since"].(string)); err != nil || since.Sub(old).Abs() > time.Millisecond {
			t.Errorf("orphan %v: since %v, want %v", m, m["since"], old)
		}
	}
	want := map[string]string{lost.ID: "not_received u-bob medium queued", dead.ID: "no_heartbeat u-ann high running"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("orphans (-want +got):\n%s", diff)
	}
	if ov := ab.Must(ab.call("GET", "/v1/admin/overview", ab.admin, nil), 200); ov.Body["orphans"] != 2.0 {
		t.Errorf("overview orphans = %v, want 2", ov.Body["orphans"])
	}
	// A paused tier's queued jobs wait; they are not orphans.
	ab.Must(ab.call("POST", "/v1/admin/tiers/medium/pause", ab.admin, nil), 200)
	r = ab.Must(ab.call("GET", "/v1/admin/orphans", ab.admin, nil), 200)
	if os := r.Body["orphans"].([]any); len(os) != 1 || os[0].(map[string]any)["jobId"] != dead.ID {
		t.Errorf("orphans with medium paused: %s", r.Raw)
	}
	if ov := ab.Must(ab.call("GET", "/v1/admin/overview", ab.admin, nil), 200); ov.Body["orphans"] != 1.0 {
		t.Errorf("overview orphans with medium paused = %v, want 1", ov.Body["orphans"])
	}
}
