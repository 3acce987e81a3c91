package httpapi_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/conveyor/conveyor/internal/httpapi"
	"github.com/conveyor/conveyor/localstack/awstest"
	"github.com/conveyor/conveyor/localstack/stack"
)

func TestSubmitPublishesThroughTheStack(t *testing.T) {
	t.Parallel()
	b := awstest.Setup(t, nil, stack.Options{})
	tok := b.Token("u-happy", "user", "pro")
	b.Connect(tok)
	up := b.Upload(tok, awstest.PNG(t, 16))
	r := b.Must(b.Call("POST", "/v1/jobs", tok, map[string]any{
		"type": "publish", "items": []any{map[string]any{"uploadId": up}}, "params": map[string]any{"title": "A cat", "tags": []string{"Cat", "cat "}},
	}), 201)
	id := r.Body["id"].(string)
	if got := r.Header.Get("Location"); got != "/v1/jobs/"+id {
		t.Errorf("Location = %q", got)
	}
	if r.Body["tier"] != "medium" || r.Body["status"] != "queued" {
		t.Errorf("new job: tier %v status %v", r.Body["tier"], r.Body["status"])
	}
	done := b.WaitStatus(tok, id, "succeeded")
	res, _ := done.Body["result"].(map[string]any)
	if res["deviationId"] == "" || res["deviationId"] == nil {
		t.Errorf("no deviationId in result: %s", done.Raw)
	}
	for _, p := range done.Body["phases"].([]any) {
		if p.(map[string]any)["status"] != "completed" {
			t.Errorf("phase not completed: %v", p)
		}
	}
	if pubs := b.Stack.Simulator.Publications(); len(pubs) != 1 {
		t.Errorf("publications = %d, want 1", len(pubs))
	}
}

func TestIdenticalSubmitsCreateOneJob(t *testing.T) {
	t.Parallel()
	b := awstest.Setup(t, nil, stack.Options{})
	tok := b.Token("u-idem", "user", "free")
	b.Connect(tok)
	up := b.Upload(tok, awstest.PNG(t, 8))
	body := map[string]any{"items": []any{map[string]any{"uploadId": up}}, "params": map[string]any{"title": "same", "tags": []string{"b", "a"}}, "scheduleAt": time.Now().Add(time.Hour).Format(time.RFC3339)}
	var wg sync.WaitGroup
	statuses := make([]int, 20)
	jobIDs := make([]string, 20)
	for i := range 20 {
		wg.Go(func() {
			r := b.Call("POST", "/v1/jobs", tok, body)
			statuses[i] = r.Status
			jobIDs[i], _ = r.Body["id"].(string)
		})
	}
	wg.Wait()
	created := 0
	for i, s := range statuses {
		switch s {
		case 201:
			created++
		case 200:
		default:
			t.Errorf("submit %d: status %d", i, s)
		}
		if jobIDs[i] != jobIDs[0] {
			t.Errorf("submit %d returned job %s, submit 0 returned %s", i, jobIDs[i], jobIDs[0])
		}
	}
	if created != 1 {
		t.Errorf("%d submits created a job, want exactly 1", created)
	}
	count := b.Call("GET", "/v1/jobs?limit=0", tok, nil)
	if got := count.Header.Get("X-Total-Count"); got != "1" {
		t.Errorf("X-Total-Count = %s, want 1", got)
	}
}

func TestDifferentSubmitsCreateManyJobs(t *testing.T) {
	t.Parallel()
	b := awstest.Setup(t, nil, stack.Options{})
	tok := b.Token("u-many", "user", "free")
	b.Connect(tok)
	up := b.Upload(tok, awstest.PNG(t, 8))
	later := time.Now().Add(time.Hour).Format(time.RFC3339)
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			r := b.Call("POST", "/v1/jobs", tok, map[string]any{"items": []any{map[string]any{"uploadId": up}}, "params": map[string]any{"title": fmt.Sprintf("title %d", i)}, "scheduleAt": later})
			if r.Status != 201 {
				t.Errorf("submit %d: %d %s", i, r.Status, r.Raw)
			}
		})
	}
	wg.Wait()
	r := b.Must(b.Call("GET", "/v1/jobs?status=scheduled&limit=7", tok, nil), 200)
	if got := r.Header.Get("X-Total-Count"); got != "20" {
		t.Errorf("X-Total-Count = %s, want 20", got)
	}
	seen := map[string]bool{}
	cursor := ""
	for pages := 0; ; pages++ {
		q := "/v1/jobs?status=scheduled&limit=7"
		if cursor != "" {
			q += "&cursor=" + cursor
		}
		r := b.Must(b.Call("GET", q, tok, nil), 200)
		for _, j := range r.Body["jobs"].([]any) {
			seen[j.(map[string]any)["id"].(string)] = true
		}
		next, _ := r.Body["nextCursor"].(string)
		if next == "" || pages > 5 {
			break
		}
		cursor = next
	}
	if len(seen) != 20 {
		t.Errorf("paged through %d jobs, want 20", len(seen))
	}
}

func TestContractErrors(t *testing.T) {
	t.Parallel()
	b := awstest.Setup(t, nil, stack.Options{})
	alice := b.Token("u-alice", "user", "free")
	bob := b.Token("u-bob", "user", "free")
	b.Connect(alice)
	up := b.Upload(alice, awstest.PNG(t, 8))
	job := b.Must(b.Call("POST", "/v1/jobs", alice, map[string]any{"items": []any{map[string]any{"uploadId": up}}, "params": map[string]any{"title": "mine"}, "scheduleAt": time.Now().Add(time.Hour).Format(time.RFC3339)}), 201)
	jobID := job.Body["id"].(string)
	pendingUpload := b.Must(b.Call("POST", "/v1/uploads/sign", alice, map[string]any{"filename": "x.png", "contentType": "image/png", "size": 10}), 201).Body["uploadId"].(string)
	expired, _ := httpapi.Mint(b.Stack.Config.JWTSecret, httpapi.Claims{Subject: "u-alice", Role: "user", Plan: "free", ExpiresAt: time.Now().Add(-time.Hour)})
	forged, _ := httpapi.Mint([]byte("not-the-secret"), httpapi.Claims{Subject: "u-alice", Role: "user", Plan: "free", ExpiresAt: time.Now().Add(time.Hour)})
	item := func(id string) []any { return []any{map[string]any{"uploadId": id}} }

	tests := []struct {
		name         string
		method, path string
		token        string
		body         any
		headers      []string
		status       int
		code         string
	}{
		{"no token", "GET", "/v1/jobs", "", nil, nil, 401, ""},
		{"expired token", "GET", "/v1/jobs", expired, nil, nil, 401, ""},
		{"forged token", "GET", "/v1/jobs", forged, nil, nil, 401, ""},
		{"not JSON", "POST", "/v1/jobs", alice, "{not json", nil, 400, ""},
		{"unknown field", "POST", "/v1/jobs", alice, map[string]any{"items": item(up), "params": map[string]any{"title": "t"}, "colour": "red"}, nil, 400, ""},
		{"wrong type", "POST", "/v1/jobs", alice, map[string]any{"items": "nope", "params": map[string]any{"title": "t"}}, nil, 400, ""},
		{"no items", "POST", "/v1/jobs", alice, map[string]any{"items": []any{}, "params": map[string]any{"title": "t"}}, nil, 400, ""},
		{"empty title", "POST", "/v1/jobs", alice, map[string]any{"items": item(up), "params": map[string]any{"title": "  "}}, nil, 400, ""},
		{"long title", "POST", "/v1/jobs", alice, map[string]any{"items": item(up), "params": map[string]any{"title": strings.Repeat("t", 201)}}, nil, 400, ""},
		{"bad webhook scheme", "POST", "/v1/jobs", alice, map[string]any{"items": item(up), "params": map[string]any{"title": "t"}, "webhookUrl": "ftp://example.com"}, nil, 400, ""},
		{"wrong content type", "POST", "/v1/jobs", alice, "{}", []string{"Content-Type", "text/plain"}, 415, ""},
		{"too large", "POST", "/v1/jobs", alice, `{"params":{"title":"` + strings.Repeat("x", 300<<10) + `"}}`, nil, 413, ""},
		{"upload not confirmed", "POST", "/v1/jobs", alice, map[string]any{"items": item(pendingUpload), "params": map[string]any{"title": "t"}}, nil, 422, "upload_not_confirmed"},
		{"someone else's upload", "POST", "/v1/jobs", bob, map[string]any{"items": item(up), "params": map[string]any{"title": "t"}}, nil, 422, ""},
		{"account not connected", "POST", "/v1/jobs", b.Token("u-lonely", "user", "free"), map[string]any{"items": item(up), "params": map[string]any{"title": "t"}}, nil, 422, ""},
		{"someone else's job", "GET", "/v1/jobs/" + jobID, bob, nil, nil, 404, ""},
		{"unknown job", "GET", "/v1/jobs/job_aaaaaaaaaaaaaaaaaaaaaaaaaa", alice, nil, nil, 404, ""},
		{"junk job id", "GET", "/v1/jobs/../../etc", alice, nil, nil, 404, ""},
		{"retry an active job", "POST", "/v1/jobs/" + jobID + "/retry", alice, nil, nil, 409, ""},
		{"cancel someone else's", "POST", "/v1/jobs/" + jobID + "/cancel", bob, nil, nil, 404, ""},
		{"bad limit", "GET", "/v1/jobs?limit=201", alice, nil, nil, 400, ""},
		{"bad status", "GET", "/v1/jobs?status=done", alice, nil, nil, 400, ""},
		{"bad cursor", "GET", "/v1/jobs?cursor=zz%21", alice, nil, nil, 400, ""},
		{"a cursor no list handed out", "GET", "/v1/jobs?cursor=zzz", alice, nil, nil, 422, ""},
		{"bad updatedSince", "GET", "/v1/jobs?updatedSince=yesterday", alice, nil, nil, 400, ""},
		{"sign bad type", "POST", "/v1/uploads/sign", alice, map[string]any{"filename": "a.exe", "contentType": "application/x-msdownload", "size": 10}, nil, 400, ""},
		{"sign too big", "POST", "/v1/uploads/sign", alice, map[string]any{"filename": "a.png", "contentType": "image/png", "size": 51 << 20}, nil, 400, ""},
		{"sign zero size", "POST", "/v1/uploads/sign", alice, map[string]any{"filename": "a.png", "contentType": "image/png", "size": 0}, nil, 400, ""},
		{"confirm before upload", "POST", "/v1/uploads/" + pendingUpload + "/confirm", alice, nil, nil, 422, ""},
		{"someone else's upload read", "GET", "/v1/uploads/" + up, bob, nil, nil, 404, ""},
		{"bad provider", "PUT", "/v1/account/connection", alice, map[string]any{"provider": "myspace", "refreshToken": "x"}, nil, 400, ""},
		{"unknown route", "GET", "/v1/nothing", alice, nil, nil, 404, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := b.Call(tt.method, tt.path, tt.token, tt.body, tt.headers...)
			if r.Status != tt.status {
				t.Fatalf("status %d, want %d: %s", r.Status, tt.status, r.Raw)
			}
			if r.ErrorCode() == "" {
				t.Errorf("no error code in %s", r.Raw)
			}
			if tt.code != "" && r.ErrorCode() != tt.code {
				t.Errorf("code %q, want %q", r.ErrorCode(), tt.code)
			}
			if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
				t.Errorf("Content-Type %q", ct)
			}
		})
	}

	// Cancel, then the 409s of finished jobs.
	c := b.Must(b.Call("POST", "/v1/jobs/"+jobID+"/cancel", alice, nil), 200)
	if c.Body["status"] != "cancelled" {
		t.Fatalf("cancel: %s", c.Raw)
	}
	if r := b.Call("POST", "/v1/jobs/"+jobID+"/cancel", alice, nil); r.Status != 409 {
		t.Errorf("second cancel: %d %s", r.Status, r.Raw)
	}
	if r := b.Call("POST", "/v1/jobs/"+jobID+"/retry", alice, nil); r.Status != 200 || r.Body["status"] != "queued" {
		t.Errorf("retry of a cancelled job: %d %s", r.Status, r.Raw)
	}
}
