package stream_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/conveyor/conveyor/internal/aws/awsclient"
	"github.com/conveyor/conveyor/internal/ids"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/stream"
	"github.com/conveyor/conveyor/localstack/awstest"
	"github.com/conveyor/conveyor/localstack/stack"
)

// storedJob stores a scheduled job of owner (nothing will run it: the
// pollers are off) and returns its id.
func storedJob(t *testing.T, b *awstest.Bundle, owner string) string {
	t.Helper()
	now := time.Now()
	j := &job.Job{ID: ids.New(ids.Job), Owner: owner, Status: job.Scheduled, Tier: "low", CreatedAt: now, UpdatedAt: now, Hash: ids.New("h")}
	if _, _, err := b.Stack.App.Store.CreateJob(context.Background(), j); err != nil {
		t.Fatal(err)
	}
	return j.ID
}

// progress appends a job.progress event to a job, as a worker would.
func progress(t *testing.T, b *awstest.Bundle, id string) {
	t.Helper()
	if _, err := b.Stack.App.Store.UpdateJob(context.Background(), id, func(j *job.Job) error {
		now := time.Now()
		j.Progress, j.UpdatedAt = 50, now
		j.Emit(job.EventProgress, now, map[string]string{"progress": "50"})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

func reads(c *awsclient.Counter) int {
	return c.Get("DynamoDB.Query") + c.Get("DynamoDB.GetItem") + c.Get("DynamoDB.Scan") + c.Get("DynamoDB.BatchGetItem") + c.Get("DynamoDB.TransactGetItems")
}

// TestIdleStreamReadsAtMostOncePerPoll counts the DynamoDB reads (not
// time) of two idle streams, one job's and all of a user's, over at least
// 20 polls: at most one read per stream per poll, and a poll is at most a
// second apart, so an idle stream costs at most 60 reads a minute. A
// transition still reaches the client within the next poll.
func TestIdleStreamReadsAtMostOncePerPoll(t *testing.T) {
	t.Parallel()
	counter := awsclient.NewCounter()
	b := awstest.Setup(t, map[string]string{"CONVEYOR_STREAM_PING": "1h"}, stack.Options{Counter: counter, DisablePollers: true})
	if poll := b.Stack.Config.StreamPoll; poll != time.Second {
		t.Fatalf("default poll interval %s, want 1s", poll)
	}
	tok := b.Token("u-idle", "user", "pro")
	id := storedJob(t, b, "u-idle")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	jobCh, _ := open(t, ctx, b.Stack.StreamURL+"/v1/jobs/"+id+"/events", tok, "")
	allCh, _ := open(t, ctx, b.Stack.StreamURL+"/v1/events", tok, "")
	if f := next(t, jobCh, false); f.Event != "snapshot" {
		t.Fatalf("job stream: %+v", f)
	}
	if f := next(t, allCh, false); f.Event != "snapshot" {
		t.Fatalf("all stream: %+v", f)
	}
	srv := b.Stack.App.Streams
	b.Eventually(func() bool { return srv.Polls() >= 2 }, "both streams polling")
	r0, p0 := reads(counter), srv.Polls()
	b.Eventually(func() bool { return srv.Polls() >= p0+20 }, "20 more polls")
	r1, p1 := reads(counter), srv.Polls()
	// Each stream reads once, then waits for its poll: over the window a
	// stream may have made one read more than its polls.
	if dr, dp := int64(r1-r0), p1-p0; dr > dp+2 {
		t.Errorf("%d DynamoDB reads over %d polls of two idle streams: more than one read per stream per poll", dr, dp)
	} else {
		t.Logf("idle: %d reads over %d polls (%.2f per stream-poll, so ≤ %.0f per idle client per minute)", dr, dp, float64(dr)/float64(dp), 60*float64(dr)/float64(dp))
	}
	// A transition reaches both streams.
	progress(t, b, id)
	if f := next(t, jobCh, true); f.Event != job.EventProgress {
		t.Errorf("job stream: %+v, want job.progress", f)
	}
	if f := next(t, allCh, true); f.Event != job.EventProgress || !strings.HasPrefix(f.ID, id+":") {
		t.Errorf("all stream: %+v, want job.progress of %s", f, id)
	}
}

func status(t *testing.T, url, token string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body map[string]any
	if resp.StatusCode != 200 {
		raw, _ := io.ReadAll(resp.Body)
		_ = json.Unmarshal(raw, &body)
	}
	return resp.StatusCode, body
}

// TestStreamCapPerUser: with a cap of 2, a user's third stream gets a 429
// JSON error — from this instance and from another one sharing the table
// — while another user streams; closing a stream frees its slot.
func TestStreamCapPerUser(t *testing.T) {
	t.Parallel()
	b := awstest.Setup(t, map[string]string{"CONVEYOR_STREAM_MAX_PER_USER": "2"}, stack.Options{DisablePollers: true})
	tok := b.Token("u-cap", "user", "pro")
	url := b.Stack.StreamURL + "/v1/events"
	ctx1, cancel1 := context.WithCancel(context.Background())
	defer cancel1()
	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	ch1, r1 := open(t, ctx1, url, tok, "")
	_, r2 := open(t, ctx2, url, tok, "")
	if r1.StatusCode != 200 || r2.StatusCode != 200 {
		t.Fatalf("two streams: %d, %d", r1.StatusCode, r2.StatusCode)
	}
	code, body := status(t, url, tok)
	if e, _ := body["error"].(map[string]any); code != 429 || e["code"] != "too_many_streams" {
		t.Fatalf("third stream: %d %v, want 429 too_many_streams", code, body)
	}
	// Another instance of the stream function counts the same slots.
	app := b.Stack.App
	other, err := stream.New(stream.Config{Store: app.Store, Slots: app.Store, MaxPerUser: 2, PingInterval: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Open(context.Background(), stream.Request{Caller: "u-cap"}); err != stream.ErrTooMany {
		t.Errorf("another instance opened a third stream: %v", err)
	}
	if code, _ := status(t, b.Stack.StreamURL+"/v1/jobs/"+storedJob(t, b, "u-cap")+"/events", tok); code != 429 {
		t.Errorf("a job stream beyond the cap: %d, want 429", code)
	}
	// Another user is not affected.
	ctx3, cancel3 := context.WithCancel(context.Background())
	defer cancel3()
	if _, r := open(t, ctx3, url, b.Token("u-cap-other", "user", "pro"), ""); r.StatusCode != 200 {
		t.Errorf("another user's stream: %d", r.StatusCode)
	}
	// Closing one frees its slot.
	next(t, ch1, false)
	cancel1()
	b.Eventually(func() bool {
		sess, err := other.Open(context.Background(), stream.Request{Caller: "u-cap"})
		if err != nil {
			return false
		}
		sess.Close()
		return true
	}, "a slot to free after a client left")
}

// TestAdminStreams: an admin streams any user's job and every user's
// events; a service token may read them; a user token gets 403.
func TestAdminStreams(t *testing.T) {
	t.Parallel()
	b := awstest.Setup(t, nil, stack.Options{DisablePollers: true})
	admin := b.Token("ops", "admin", "enterprise")
	svc := b.Token("monitor", "service", "enterprise")
	user := b.Token("u-a", "user", "pro")
	idA, idB := storedJob(t, b, "u-a"), storedJob(t, b, "u-b")
	for _, path := range []string{"/v1/admin/events", "/v1/admin/jobs/" + idA + "/events"} {
		if code, body := status(t, b.Stack.StreamURL+path, user); code != 403 {
			t.Errorf("user on %s: %d %v, want 403", path, code, body)
		}
	}
	if code, _ := status(t, b.Stack.StreamURL+"/v1/admin/jobs/job_aaaaaaaaaaaaaaaaaaaaaaaaaa/events", admin); code != 404 {
		t.Errorf("admin on an unknown job: %d, want 404", code)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	jobCh, resp := open(t, ctx, b.Stack.StreamURL+"/v1/admin/jobs/"+idB+"/events", admin, "")
	if resp.StatusCode != 200 {
		t.Fatalf("admin on u-b's job: %d", resp.StatusCode)
	}
	if f := next(t, jobCh, false); f.Event != "snapshot" || !strings.Contains(f.Data, idB) {
		t.Fatalf("admin job stream: %+v", f)
	}
	feed, resp := open(t, ctx, b.Stack.StreamURL+"/v1/admin/events", svc, "")
	if resp.StatusCode != 200 {
		t.Fatalf("service on the feed: %d", resp.StatusCode)
	}
	if f := next(t, feed, false); f.Event != "snapshot" {
		t.Fatalf("feed: %+v", f)
	}
	progress(t, b, idA)
	progress(t, b, idB)
	if f := next(t, jobCh, true); f.Event != job.EventProgress || f.ID != "1" {
		t.Errorf("admin job stream: %+v", f)
	}
	got := map[string]bool{}
	for len(got) < 2 {
		f := next(t, feed, true)
		if f.Event == job.EventProgress {
			got[strings.Split(f.ID, ":")[0]] = true
		}
	}
	if !got[idA] || !got[idB] {
		t.Errorf("the feed carried %v, want both users' jobs", got)
	}
}
