package recovery_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/conveyor/conveyor/internal/aws/store"
	"github.com/conveyor/conveyor/internal/ids"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/resources"
	"github.com/conveyor/conveyor/internal/uploads"
	"github.com/conveyor/conveyor/internal/worker"
	"github.com/conveyor/conveyor/localstack/awstest"
)

// submitUpload submits a publish job naming uploadID (extra fields merged
// into the body) with a token valid at the test clock, and returns the
// response.
func (b *bundle) submitUpload(uploadID string, extra map[string]any) awstest.Response {
	b.T.Helper()
	body := map[string]any{
		"type":   "publish",
		"items":  []any{map[string]any{"uploadId": uploadID}},
		"params": map[string]any{"title": "shared " + ids.New("x")},
	}
	for k, v := range extra {
		body[k] = v
	}
	return b.Call("POST", "/v1/jobs", b.freshToken(), body)
}

// objectExists reports whether the upload's object is still in S3.
func (b *bundle) objectExists(key string) bool {
	b.T.Helper()
	_, err := b.Stack.App.Bucket.Head(context.Background(), key)
	return err == nil
}

func (b *bundle) uploadStatus(id string) string {
	b.T.Helper()
	r := b.Must(b.Call("GET", "/v1/uploads/"+id, b.freshToken(), nil), 200)
	s, _ := r.Body["status"].(string)
	return s
}

// Job A and scheduled job B share an upload. A going stale must not take
// B's media; once B is stale too the object goes, the upload reads expired
// and a new job naming it is refused.
func TestRetentionKeepsSharedMediaUntilTheLastJobGoes(t *testing.T) {
	t.Parallel()
	b := setupEnv(t, map[string]string{"CONVEYOR_STALE_AFTER": "1h", "CONVEYOR_DELETE_AFTER": "2h"})
	ctx := context.Background()
	rec := b.Stack.App.Recoverer
	up := b.Upload(b.tok, awstest.PNG(t, 6))

	a := b.Must(b.submitUpload(up, nil), 201).Body["id"].(string)
	b.drain(job.Medium)
	if v, err := b.Stack.App.Publisher.Run(ctx, worker.Delivery{JobID: a}); err != nil || !v.Done {
		t.Fatalf("job A: %+v %v", v, err)
	}
	key := b.job(a).Items[0].Key
	at := b.clk.Now().Add(3 * time.Hour).Truncate(time.Second)
	jobB := b.Must(b.submitUpload(up, map[string]any{"scheduleAt": at.Format(time.RFC3339)}), 201).Body["id"].(string)

	// A goes stale; B still needs the object.
	b.clk.Advance(61 * time.Minute)
	if res, err := rec.Retain(ctx, nil); err != nil || res.Staled != 1 {
		t.Fatalf("first stale run = %+v, %v; want A staled", res, err)
	}
	if j := b.job(a); j.Status != job.Stale {
		t.Fatalf("job A is %s, want stale", j.Status)
	}
	if !b.objectExists(key) {
		t.Fatal("A going stale deleted the object that scheduled job B still needs")
	}
	if s := b.uploadStatus(up); s != "confirmed" {
		t.Errorf("upload reads %q while B refers to it, want confirmed", s)
	}

	// B runs at its time and publishes.
	b.clk.Advance(2*time.Hour + time.Minute)
	if res, err := rec.ReleaseScheduled(ctx, nil); err != nil || res.Released != 1 {
		t.Fatalf("release = %+v, %v", res, err)
	}
	b.drain(job.Medium)
	if v, err := b.Stack.App.Publisher.Run(ctx, worker.Delivery{JobID: jobB}); err != nil || !v.Done {
		t.Fatalf("job B: %+v %v", v, err)
	}
	if j := b.job(jobB); j.Status != job.Succeeded {
		t.Fatalf("job B is %s (%+v), want succeeded", j.Status, j.Error)
	}

	// B goes stale: the last reference is gone, so is the media.
	b.clk.Advance(61 * time.Minute)
	res, err := rec.Retain(ctx, nil)
	if err != nil || res.Staled != 1 {
		t.Fatalf("second stale run = %+v, %v; want B staled", res, err)
	}
	if b.objectExists(key) {
		t.Error("the object outlived its last job")
	}
	if s := b.uploadStatus(up); s != "expired" {
		t.Errorf("upload reads %q after its object was deleted, want expired", s)
	}
	r := b.submitUpload(up, nil)
	if r.Status != 422 || r.ErrorCode() != "upload_expired" {
		t.Errorf("submit naming an expired upload: %d %s, want 422 upload_expired", r.Status, r.Raw)
	}
}

// A submission racing the expiry of an upload whose last reference just
// went either keeps the object (its reference came first) or gets 422 (the
// expiry came first): never a job accepted on a deleted object.
func TestSubmitRacingTheLastReleaseNeverGetsDeletedMedia(t *testing.T) {
	t.Parallel()
	b := setupEnv(t, map[string]string{"CONVEYOR_STALE_AFTER": "1h", "CONVEYOR_DELETE_AFTER": "2h"})
	ctx := context.Background()
	app := b.Stack.App
	const n = 6
	var ups, keys []string
	for range n {
		up := b.Upload(b.tok, awstest.PNG(t, 4))
		id := b.Must(b.submitUpload(up, nil), 201).Body["id"].(string)
		if v, err := app.Publisher.Run(ctx, worker.Delivery{JobID: id}); err != nil || !v.Done {
			t.Fatalf("run: %+v %v", v, err)
		}
		// The stale stage alone: the last reference goes, the upload is due.
		j, err := app.Store.GetJob(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := app.Store.StaleJob(ctx, j, b.clk.Now(), func(j *job.Job) error { return j.Apply(job.Expire, b.clk.Now()) }); err != nil {
			t.Fatal(err)
		}
		ups, keys = append(ups, up), append(keys, b.job(id).Items[0].Key)
	}
	b.drain(job.Medium)
	tok := b.freshToken()
	status := make([]int, n)
	var wg sync.WaitGroup
	submit := func(i int) {
		r := b.Call("POST", "/v1/jobs", tok, map[string]any{"type": "publish",
			"items": []any{map[string]any{"uploadId": ups[i]}}, "params": map[string]any{"title": "racer"}})
		status[i] = r.Status
	}
	sweep := func(i int) { // what the retention sweep does with a due upload
		u, ok, err := app.Store.ExpireUpload(ctx, ups[i], b.clk.Now(), time.Hour)
		if err != nil || !ok {
			return
		}
		if err := app.Bucket.Delete(ctx, u.Key); err != nil {
			t.Error(err)
		}
	}
	for i := range n {
		if i%2 == 0 { // the reference first, then the sweep
			wg.Go(func() { submit(i); sweep(i) })
			continue
		}
		wg.Go(func() { submit(i) }) // both at once
		wg.Go(func() { sweep(i) })
	}
	wg.Wait()
	for i := range n {
		u, err := app.Store.GetUpload(ctx, ups[i])
		if err != nil {
			t.Fatal(err)
		}
		switch status[i] {
		case 201:
			if u.Status != "confirmed" || u.Refs != 1 || !b.objectExists(keys[i]) {
				t.Errorf("upload %d: job accepted, but the upload is %s with %d refs, object exists %v", i, u.Status, u.Refs, b.objectExists(keys[i]))
			}
		case 422:
			if u.Status != "expired" || b.objectExists(keys[i]) {
				t.Errorf("upload %d: submit refused, but the upload is %s, object exists %v", i, u.Status, b.objectExists(keys[i]))
			}
		default:
			t.Errorf("upload %d: submit answered %d", i, status[i])
		}
	}
	t.Logf("submit outcomes %v", status)
}

// The reference is taken under a condition on the upload record, not only
// checked on an earlier read: a job built from a stale read of an upload
// that expired meanwhile is not stored.
func TestCreateJobRefusesAnUploadThatExpiredAfterItWasRead(t *testing.T) {
	t.Parallel()
	b := setupEnv(t, map[string]string{"CONVEYOR_STALE_AFTER": "1h", "CONVEYOR_DELETE_AFTER": "2h"})
	ctx := context.Background()
	up := b.Upload(b.tok, awstest.PNG(t, 4))
	read, err := b.Stack.App.Store.GetUpload(ctx, up)
	if err != nil {
		t.Fatal(err)
	}
	a := b.Must(b.submitUpload(up, nil), 201).Body["id"].(string)
	if v, err := b.Stack.App.Publisher.Run(ctx, worker.Delivery{JobID: a}); err != nil || !v.Done {
		t.Fatalf("run: %+v %v", v, err)
	}
	b.clk.Advance(61 * time.Minute)
	if res, err := b.Stack.App.Recoverer.Retain(ctx, nil); err != nil || res.Staled != 1 || res.MediaExpired != 1 {
		t.Fatalf("run = %+v, %v; want A staled and its upload expired", res, err)
	}
	now := b.clk.Now()
	j := job.Job{ID: ids.New(ids.Job), Type: "publish", Status: job.Queued, Tier: "medium", Owner: read.Owner,
		Hash: ids.New("h"), CreatedAt: now, UpdatedAt: now, QueuedAt: &now, MaxAttempts: 3,
		Items: []job.Item{{ID: ids.New(ids.Item), UploadID: up, Status: job.ItemPending, Key: read.Key}}}
	_, _, err = b.Stack.App.Store.CreateJob(ctx, &j)
	var gone *store.UploadUnavailableError
	if !errors.As(err, &gone) || gone.UploadID != up {
		t.Fatalf("CreateJob = %v, want an UploadUnavailableError for %s", err, up)
	}
	if _, err := b.Stack.App.Store.GetJob(ctx, j.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the refused job was stored: %v", err)
	}
}

// An object that vanished anyway (the bucket lifecycle) fails the job at
// once with media_expired, instead of retrying until its attempts run out.
func TestVanishedObjectFailsWithMediaExpired(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	id := b.submit(nil)
	up, err := b.Stack.App.Store.GetUpload(ctx, b.job(id).Items[0].UploadID) // a new job's items name their upload only
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Stack.App.Bucket.Delete(ctx, up.Key); err != nil {
		t.Fatal(err)
	}
	v, err := b.Stack.App.Publisher.Run(ctx, worker.Delivery{JobID: id})
	if err != nil || !v.Done {
		t.Fatalf("run = %+v, %v; want done", v, err)
	}
	j := b.job(id)
	if j.Status != job.Failed || j.Error == nil || j.Error.Code != "media_expired" || j.Error.Retryable || j.Attempts != 1 {
		t.Fatalf("job = %s attempts %d error %+v; want failed once with a permanent media_expired", j.Status, j.Attempts, j.Error)
	}
}

// An upload never confirmed, or rejected, goes with its object once its
// presigned URL can put none and the margin after it passed: the
// retention sweep expires it and deletes the object, as it does a
// confirmed upload no job needs (the bucket's lifecycle, 409 days, is only
// the backstop). A confirmed upload beside them stays.
func TestUnconfirmedAndRejectedUploadsGoWithTheirObjects(t *testing.T) {
	t.Parallel()
	b := setupEnv(t, nil)
	ctx := context.Background()
	c := b.Client(b.freshToken())
	kept := b.Upload(b.tok, awstest.PNG(t, 4))

	// Rejected: the bytes are no PNG; its object is in the bucket.
	junk := []byte("this is no image at all")
	rejected, err := c.SignUpload(ctx, uploads.SignRequest{Filename: "junk.png", ContentType: "image/png", Size: int64(len(junk))})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.PutObject(ctx, rejected, junk); err != nil {
		t.Fatal(err)
	}
	b.Eventually(func() bool { return b.uploadStatus(rejected.UploadID) == "rejected" }, "the junk upload rejected by the S3 event")
	// Pending: signed, never put.
	pending, err := c.SignUpload(ctx, uploads.SignRequest{Filename: "never.png", ContentType: "image/png", Size: 10})
	if err != nil {
		t.Fatal(err)
	}
	rejectedKey := func() string {
		u, err := b.Stack.App.Store.GetUpload(ctx, rejected.UploadID)
		if err != nil {
			t.Fatal(err)
		}
		return u.Key
	}()
	if !b.objectExists(rejectedKey) {
		t.Fatal("the rejected upload's object is not in the bucket")
	}

	// Before its presigned URL and the margin passed, nothing goes.
	b.clk.Advance(time.Hour)
	if _, err := b.Stack.App.Recoverer.Retain(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if !b.objectExists(rejectedKey) {
		t.Fatal("the rejected upload's object went while its presigned URL could still put one")
	}

	b.clk.Advance(resources.PendingUploadMargin)
	res, err := b.Stack.App.Recoverer.Retain(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if b.objectExists(rejectedKey) {
		t.Error("the rejected upload's object outlived its presigned URL and the margin")
	}
	for _, id := range []string{rejected.UploadID, pending.UploadID} {
		if s := b.uploadStatus(id); s != "expired" {
			t.Errorf("upload %s reads %q, want expired", id, s)
		}
	}
	if s := b.uploadStatus(kept); s != "confirmed" {
		t.Errorf("the confirmed upload reads %q, want confirmed (inside its use window)", s)
	}
	t.Logf("retention run: %d uploads expired", res.MediaExpired)
}
