package apiclient_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/conveyor/conveyor/internal/accounts"
	"github.com/conveyor/conveyor/internal/admin"
	"github.com/conveyor/conveyor/internal/apiclient"
	"github.com/conveyor/conveyor/internal/breaker"
	"github.com/conveyor/conveyor/internal/invalid"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/publish"
	"github.com/conveyor/conveyor/internal/schedule"
	"github.com/conveyor/conveyor/internal/submission"
	"github.com/conveyor/conveyor/internal/uploads"
	"github.com/conveyor/conveyor/internal/webhook"
	"github.com/conveyor/conveyor/localstack/awstest"
	"github.com/conveyor/conveyor/localstack/simulator"
	"github.com/conveyor/conveyor/localstack/stack"
)

func TestMain(m *testing.M) { awstest.Main(m) }

// bundle is one test's stack and a connected user with a confirmed upload.
type bundle struct {
	*awstest.Bundle
	user     *apiclient.Client
	uploadID string
}

func setup(t *testing.T, sub, plan string) *bundle {
	t.Helper()
	b := awstest.Setup(t, nil, stack.Options{})
	user := b.Client(b.Token(sub, "user", plan))
	ctx := context.Background()
	if err := user.Connect(ctx, accounts.ConnectRequest{Provider: "deviantart", RefreshToken: "rt-" + sub}); err != nil {
		t.Fatalf("Connect: %v", err)
	}
	up, err := user.Upload(ctx, "cat.png", "image/png", simulator.PNG(12))
	if err != nil {
		t.Fatalf("Upload: %v", err)
	}
	if up.Status != uploads.Confirmed || up.ContentType != "image/png" || up.Size != int64(len(simulator.PNG(12))) {
		t.Fatalf("Upload = %+v, want a confirmed image/png of the bytes sent", up)
	}
	return &bundle{Bundle: b, user: user, uploadID: up.ID}
}

// A job's life through the typed calls: submitted (201, then 200 with the
// same job for the same request), published, listed with its count, and a
// transition the job no longer allows mapped to a 409 *APIError.
func TestJobLifecycle(t *testing.T) {
	t.Parallel()
	b := setup(t, "u-client-life", "pro")
	ctx := context.Background()
	req := apiclient.PublishRequest(publish.Params{Title: "A cat", Tags: []string{"cat"}}, b.uploadID)

	j, created, err := b.user.SubmitJob(ctx, req)
	if err != nil || !created {
		t.Fatalf("SubmitJob = created %t, %v; want a new job", created, err)
	}
	if j.Tier != "medium" || j.Status != job.Queued || len(j.Items) != 1 || j.Items[0].UploadID != b.uploadID {
		t.Errorf("new job: tier %s status %s items %+v", j.Tier, j.Status, j.Items)
	}
	again, created, err := b.user.SubmitJob(ctx, req)
	if err != nil || created || again.ID != j.ID {
		t.Errorf("same request again = %s created %t, %v; want %s, not created", again.ID, created, err, j.ID)
	}

	wctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	done, err := b.user.WaitJob(wctx, j.ID, 50*time.Millisecond, func(j job.Job) bool { return j.Status.Finished() })
	if err != nil {
		t.Fatalf("WaitJob: %v", err)
	}
	if done.Status != job.Succeeded || done.Items[0].Output == nil || done.Items[0].Output.DeviationID == "" {
		t.Fatalf("finished job: status %s items %+v", done.Status, done.Items)
	}
	got, err := b.user.GetJob(ctx, j.ID)
	if err != nil || got.ID != j.ID || got.Status != job.Succeeded {
		t.Errorf("GetJob = %s %s, %v", got.ID, got.Status, err)
	}

	page, err := b.user.ListJobs(ctx, submission.ListRequest{Status: "succeeded"})
	if err != nil {
		t.Fatalf("ListJobs: %v", err)
	}
	if page.Total != 1 || len(page.Jobs) != 1 || page.Jobs[0].ID != j.ID || page.NextCursor != "" {
		t.Errorf("ListJobs = total %d, %d jobs, cursor %q", page.Total, len(page.Jobs), page.NextCursor)
	}
	zero := 0
	count, err := b.user.ListJobs(ctx, submission.ListRequest{Limit: &zero})
	if err != nil || count.Total != 1 || len(count.Jobs) != 0 {
		t.Errorf("ListJobs(limit 0) = total %d, %d jobs, %v; want the count alone", count.Total, len(count.Jobs), err)
	}

	_, err = b.user.CancelJob(ctx, j.ID)
	var ae *apiclient.APIError
	if !errors.As(err, &ae) || ae.Status != http.StatusConflict || ae.Code != "invalid_transition" || ae.Method != http.MethodPost {
		t.Errorf("CancelJob of a finished job = %v, want a 409 invalid_transition *APIError", err)
	}
	if _, err := b.user.RetryJob(ctx, j.ID); apiclient.StatusOf(err) != http.StatusConflict {
		t.Errorf("RetryJob of a succeeded job = %v, want 409", err)
	}
}

// Bad input is a *APIError carrying the contract's code, the field at
// fault (also as the services' *invalid.FieldError) and the request id; an
// unknown or another user's id is a 404; a user token on an admin route a
// 403.
func TestErrorsAreAPIErrors(t *testing.T) {
	t.Parallel()
	b := setup(t, "u-client-errors", "free")
	ctx := context.Background()

	_, _, err := b.user.SubmitJob(ctx, apiclient.PublishRequest(publish.Params{Title: ""}, b.uploadID))
	var ae *apiclient.APIError
	if !errors.As(err, &ae) {
		t.Fatalf("SubmitJob without a title = %v, want *APIError", err)
	}
	if ae.Status != http.StatusBadRequest || ae.Code != "invalid_request" || ae.Field != "params.title" || ae.RequestID == "" || ae.Path != "/v1/jobs" {
		t.Errorf("APIError = %+v", *ae)
	}
	if fe, ok := invalid.As(err); !ok || fe.Field != "params.title" || fe.Message == "" || strings.HasPrefix(fe.Message, "params.title") {
		t.Errorf("invalid.As = %+v, %t; want the field and its message", fe, ok)
	}
	if ae.Temporary() || ae.RetryAfter != 0 {
		t.Errorf("a 400 is Temporary %t with RetryAfter %s", ae.Temporary(), ae.RetryAfter)
	}
	if want := "400 invalid_request: " + ae.Message; err.Error() != want {
		t.Errorf("Error() = %q, want %q", err.Error(), want)
	}

	other := b.Client(b.Token("u-client-other", "user", "pro"))
	if _, err := other.GetUpload(ctx, b.uploadID); !apiclient.IsNotFound(err) {
		t.Errorf("another user's upload = %v, want 404", err)
	}
	if _, err := b.user.GetJob(ctx, "job_nosuchjob"); !apiclient.IsNotFound(err) {
		t.Errorf("unknown job = %v, want 404", err)
	}
	if _, err := b.user.Overview(ctx); apiclient.StatusOf(err) != http.StatusForbidden {
		t.Errorf("Overview with a user token = %v, want 403", err)
	}
	if _, err := b.Client("").GetJob(ctx, "job_x"); apiclient.StatusOf(err) != http.StatusUnauthorized {
		t.Errorf("no token = %v, want 401", err)
	}

	// The raw way in: what the typed calls never send, the answer as it came.
	r, err := b.user.Do(ctx, http.MethodPost, "/v1/jobs", `{"items": [`, nil)
	if err != nil {
		t.Fatalf("Do: %v", err)
	}
	if r.Status != http.StatusBadRequest || r.Err().(*apiclient.APIError).Code != "invalid_json" {
		t.Errorf("malformed body: %d %s", r.Status, r.Body)
	}
	r, err = b.user.Do(ctx, http.MethodPost, "/v1/jobs", `{}`, http.Header{"Content-Type": {"text/plain"}})
	if err != nil || r.Status != http.StatusUnsupportedMediaType {
		t.Errorf("text/plain body = %v %v, want 415", r, err)
	}
}

// The event streams: a snapshot first; beyond the user's open streams a
// 429 whose Retry-After the *APIError carries; cancelling the context ends
// an open stream and fails a call before it is sent.
func TestStreamsRetryAfterAndCancel(t *testing.T) {
	t.Parallel()
	b := setup(t, "u-client-streams", "pro")
	// A job that stays scheduled: a finished job's stream ends after its
	// snapshot, and its slot with it.
	req := apiclient.PublishRequest(publish.Params{Title: "streamed"}, b.uploadID)
	later := time.Now().Add(time.Hour)
	req.ScheduleAt = &later
	j, _, err := b.user.SubmitJob(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var open []*apiclient.Stream
	for i := range b.Stack.Config.StreamMaxPerUser {
		s, err := b.user.Events(ctx, apiclient.StreamRequest{JobID: j.ID})
		if err != nil {
			t.Fatalf("stream %d: %v", i, err)
		}
		open = append(open, s)
	}
	first, err := open[0].Next()
	if err != nil || first.Type != "snapshot" || !strings.Contains(first.Data, j.ID) {
		t.Fatalf("first event = %+v, %v; want the job's snapshot", first, err)
	}

	_, err = b.user.Events(ctx, apiclient.StreamRequest{})
	var ae *apiclient.APIError
	if !errors.As(err, &ae) || ae.Status != http.StatusTooManyRequests || ae.Code != "too_many_streams" || ae.RetryAfter != 5*time.Second || !ae.Temporary() {
		t.Fatalf("one stream too many = %v (%+v), want 429 too_many_streams with Retry-After 5s", err, ae)
	}

	cancel()
	for i, s := range open {
		var err error
		for err == nil { // pings and events until the cancelled context ends the body
			_, err = s.Next()
		}
		if err == io.EOF {
			t.Errorf("stream %d ended cleanly after the cancel, want the context's error", i)
		}
		s.Close()
	}
	_, err = b.user.GetJob(ctx, j.ID)
	if !errors.Is(err, context.Canceled) || apiclient.StatusOf(err) != 0 {
		t.Errorf("GetJob with a cancelled context = %v, want context.Canceled and no API status", err)
	}
	if _, err := b.user.WaitJob(ctx, j.ID, time.Millisecond, func(job.Job) bool { return false }); !errors.Is(err, context.Canceled) {
		t.Errorf("WaitJob with a cancelled context = %v", err)
	}
}

// The operator's calls with an admin token, the API's own types back.
func TestAdminCalls(t *testing.T) {
	t.Parallel()
	b := setup(t, "u-client-admin", "enterprise")
	ctx := context.Background()
	ops := b.Client(b.Token("ops", "admin", "enterprise"))
	j, _, err := b.user.SubmitJob(ctx, apiclient.PublishRequest(publish.Params{Title: "inspected"}, b.uploadID))
	if err != nil {
		t.Fatal(err)
	}

	ov, err := ops.Overview(ctx)
	if err != nil {
		t.Fatalf("Overview: %v", err)
	}
	tiers := make([]string, 0, len(ov.Tiers))
	for k := range ov.Tiers {
		tiers = append(tiers, k)
	}
	slices.Sort(tiers)
	if diff := cmp.Diff([]string{"high", "low", "medium", "system"}, tiers); diff != "" || ov.Environment != "local" {
		t.Errorf("Overview: environment %q, tiers (-want +got)\n%s", ov.Environment, diff)
	}

	st, err := ops.PauseTier(ctx, "low")
	if err != nil || st.Tier != "low" || !st.Paused {
		t.Errorf("PauseTier = %+v, %v", st, err)
	}
	if st, err = ops.ResumeTier(ctx, "low"); err != nil || st.Paused {
		t.Errorf("ResumeTier = %+v, %v", st, err)
	}
	if _, err := ops.PauseTier(ctx, "urgent"); apiclient.StatusOf(err) != http.StatusNotFound {
		t.Errorf("PauseTier(urgent) = %v, want 404 unknown_tier", err)
	}

	insp, err := ops.InspectJob(ctx, j.ID)
	if err != nil || insp.ID != j.ID || insp.Owner != "u-client-admin" || len(insp.Events) == 0 {
		t.Errorf("InspectJob = %s owner %q %d events, %v", insp.ID, insp.Owner, len(insp.Events), err)
	}
	page, err := ops.SearchJobs(ctx, admin.SearchRequest{Owner: "u-client-admin"})
	if err != nil || page.Total != 1 || len(page.Jobs) != 1 || page.Jobs[0].Owner != "u-client-admin" {
		t.Errorf("SearchJobs(owner) = total %d %+v, %v", page.Total, page.Jobs, err)
	}
	restarted, err := ops.RestartJobs(ctx, []string{unknownJob})
	if err != nil || len(restarted.Restarted) != 0 || len(restarted.Skipped) != 1 || restarted.Skipped[0].ID != unknownJob {
		t.Errorf("RestartJobs(unknown) = %+v, %v", restarted, err)
	}
	// (The job publishes meanwhile: no job of this owner is failed.)
	dry, op, err := ops.RestartMatching(ctx, apiclient.BulkFilter{Filter: admin.Filter{Status: "failed", Owner: "u-client-admin"}, DryRun: true})
	if err != nil || op != nil || dry.Selection == nil || !dry.DryRun || dry.Matched != 0 || dry.Limit != admin.MaxBulk || dry.JobIDs == nil || len(dry.Restarted) != 0 {
		t.Errorf("RestartMatching(dry run) = %+v %+v, %v", dry, dry.Selection, err)
	}
	if _, _, err := ops.RestartMatching(ctx, apiclient.BulkFilter{Filter: admin.Filter{Status: "queued"}}); apiclient.StatusOf(err) != http.StatusBadRequest {
		t.Errorf("RestartMatching(queued) = %v, want 400: a restart takes failed, cancelled or stale jobs", err)
	}
	if _, err := ops.StopJobs(ctx, []string{}); apiclient.StatusOf(err) != http.StatusBadRequest {
		t.Errorf("StopJobs(no ids) = %v, want 400", err)
	}
	msgs, err := ops.DLQPeek(ctx, "high", 5)
	if err != nil || len(msgs) != 0 {
		t.Errorf("DLQPeek(empty DLQ) = %v, %v", msgs, err)
	}
	moved, err := ops.DLQRedrive(ctx, "high", apiclient.RedriveRequest{})
	if err != nil || moved.Moved != 0 {
		t.Errorf("DLQRedrive(empty DLQ) = %+v, %v", moved, err)
	}
	if _, err := ops.DLQRedrive(ctx, "high", apiclient.RedriveRequest{JobIDs: []string{}}); apiclient.StatusOf(err) != http.StatusBadRequest {
		t.Errorf("DLQRedrive with an empty id list = %v, want 400 (never every message)", err)
	}
	if _, err := ops.Breakers(ctx); err != nil {
		t.Errorf("Breakers: %v", err)
	}
	if err := b.Stack.App.Breaker.Record(ctx, breaker.RateLimited, time.Minute, "host:example.com"); err != nil {
		t.Fatal(err)
	}
	if r, err := ops.ResetBreaker(ctx, "host:example.com"); err != nil || r.State != "closed" {
		t.Errorf("ResetBreaker = %+v, %v", r, err)
	}
	if _, err := ops.ResetBreaker(ctx, "host:example.com"); apiclient.StatusOf(err) != http.StatusNotFound {
		t.Errorf("ResetBreaker of a key no breaker has = %v, want 404", err)
	}
	if stats, err := ops.Stats(ctx, 2); err != nil || len(stats.Hours) != 2 {
		t.Errorf("Stats(2) = %+v, %v", stats, err)
	}
	if _, err := ops.Orphans(ctx); err != nil {
		t.Errorf("Orphans: %v", err)
	}
}

// Schedules and webhook endpoints: created, read, changed, deleted.
func TestSchedulesAndWebhooks(t *testing.T) {
	t.Parallel()
	b := setup(t, "u-client-sched", "standard")
	ctx := context.Background()

	sc, err := b.user.CreateSchedule(ctx, schedule.Request{Name: "hourly", Rate: "1h", Timezone: "Europe/Moscow",
		Job: apiclient.PublishRequest(publish.Params{Title: "tick"}, b.uploadID)})
	if err != nil || sc.Status != "active" || sc.NextRunAt == nil {
		t.Fatalf("CreateSchedule = %+v, %v", sc, err)
	}
	if p, err := b.user.PauseSchedule(ctx, sc.ID); err != nil || p.Status != "paused" {
		t.Errorf("PauseSchedule = %s, %v", p.Status, err)
	}
	if r, err := b.user.ResumeSchedule(ctx, sc.ID); err != nil || r.Status != "active" {
		t.Errorf("ResumeSchedule = %s, %v", r.Status, err)
	}
	if list, err := b.user.ListSchedules(ctx); err != nil || len(list) != 1 || list[0].ID != sc.ID {
		t.Errorf("ListSchedules = %+v, %v", list, err)
	}
	if err := b.user.DeleteSchedule(ctx, sc.ID); err != nil {
		t.Errorf("DeleteSchedule: %v", err)
	}
	if _, err := b.user.GetSchedule(ctx, sc.ID); !apiclient.IsNotFound(err) {
		t.Errorf("GetSchedule after delete = %v, want 404", err)
	}
	_, err = b.user.CreateSchedule(ctx, schedule.Request{Name: "bad", Cron: "every day", Job: apiclient.PublishRequest(publish.Params{Title: "x"}, b.uploadID)})
	if fe, ok := invalid.As(err); !ok || fe.Field == "" {
		t.Errorf("a bad cron = %v, want a field error", err)
	}

	sec, err := b.user.WebhookSecret(ctx)
	if err != nil || !strings.HasPrefix(sec.Secret, "whsec_") {
		t.Errorf("WebhookSecret = %q, %v", sec.Secret, err)
	}
	if rot, err := b.user.RotateWebhookSecret(ctx); err != nil || rot.Secret == sec.Secret || rot.PreviousExpiresAt == nil {
		t.Errorf("RotateWebhookSecret = %+v, %v", rot, err)
	}
	ep, err := b.user.CreateWebhook(ctx, webhook.CreateRequest{URL: "http://127.0.0.1:9/hook", Events: []string{"job.succeeded"}})
	if err != nil || !strings.HasPrefix(ep.ID, "whe_") {
		t.Fatalf("CreateWebhook = %+v, %v", ep, err)
	}
	if eps, err := b.user.ListWebhooks(ctx); err != nil || len(eps) != 1 || eps[0].URL != ep.URL {
		t.Errorf("ListWebhooks = %+v, %v", eps, err)
	}
	if err := b.user.DeleteWebhook(ctx, ep.ID); err != nil {
		t.Errorf("DeleteWebhook: %v", err)
	}
	if err := b.user.DeleteWebhook(ctx, ep.ID); !apiclient.IsNotFound(err) {
		t.Errorf("DeleteWebhook again = %v, want 404", err)
	}
}

// unknownJob is a well-formed job id no job has.
const unknownJob = "job_zzzzzzzzzzzzzzzzzzzzzzzzzz"
