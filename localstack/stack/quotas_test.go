package stack_test

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/conveyor/conveyor/internal/config"
	"github.com/conveyor/conveyor/localstack/awstest"
	"github.com/conveyor/conveyor/localstack/stack"
)

// TestAnOwnerAtItsActiveJobsQuotaIsRefusedUntilOneFinishes: an owner
// with an active-jobs quota of 2 (CONVEYOR_OWNER_ACTIVE_JOB_QUOTAS) gets
// 201 for two jobs and 429 quota_exceeded for the third, with Retry-After
// and error.limit naming activeJobs and its value; another owner's job is
// 201 in the same second; once one of the first owner's jobs finishes
// (cancelled), it creates again.
func TestAnOwnerAtItsActiveJobsQuotaIsRefusedUntilOneFinishes(t *testing.T) {
	t.Parallel()
	b := awstest.Setup(t, map[string]string{config.VarOwnerActiveJobQuotas: "u-full=2"}, stack.Options{})
	full, other := b.Token("u-full", "user", "free"), b.Token("u-other", "user", "free")
	// Jobs a week ahead: scheduled (active), run by no one during the test.
	at := time.Now().Add(7 * 24 * time.Hour).UTC().Format(time.RFC3339)
	jobOf := func(owner string, n int) map[string]any {
		return map[string]any{"type": "http", "scheduleAt": at,
			"params": map[string]any{"method": "POST", "url": "https://hooks.example.com/" + owner, "body": fmt.Sprint("request ", n)}}
	}
	var ids []string
	for i := range 2 {
		r := b.Call("POST", "/v1/jobs", full, jobOf("full", i))
		if r.Status != 201 {
			t.Fatalf("job %d under the quota: %d %s", i, r.Status, r.Raw)
		}
		ids = append(ids, r.Body["id"].(string))
	}
	r := b.Call("POST", "/v1/jobs", full, jobOf("full", 2))
	e, _ := r.Body["error"].(map[string]any)
	limit, _ := e["limit"].(map[string]any)
	secs, err := strconv.Atoi(r.Header.Get("Retry-After"))
	if r.Status != 429 || err != nil || secs < 1 || e["code"] != "quota_exceeded" || e["message"] == "" ||
		limit["name"] != "activeJobs" || limit["value"] != float64(2) {
		t.Fatalf("over the quota: %d, Retry-After %q: %s", r.Status, r.Header.Get("Retry-After"), r.Raw)
	}
	if r := b.Call("POST", "/v1/jobs", other, jobOf("other", 0)); r.Status != 201 {
		t.Fatalf("another owner's job in the same second: %d %s", r.Status, r.Raw)
	}
	if r := b.Call("POST", "/v1/jobs/"+ids[0]+"/cancel", full, nil); r.Status != 200 {
		t.Fatalf("cancelling: %d %s", r.Status, r.Raw)
	}
	if r := b.Call("POST", "/v1/jobs", full, jobOf("full", 3)); r.Status != 201 {
		t.Fatalf("a job after one finished: %d %s", r.Status, r.Raw)
	}
}
