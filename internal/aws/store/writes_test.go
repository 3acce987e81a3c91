package store_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/conveyor/conveyor/internal/aws/store"
	"github.com/conveyor/conveyor/internal/clock"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/resources"
	"github.com/conveyor/conveyor/internal/testfactory"
	"github.com/conveyor/conveyor/internal/uploads"
	"github.com/conveyor/conveyor/localstack/awstest"
)

// storeBundle is one test's store on its own provisioned table, read
// through a simulated clock.
type storeBundle struct {
	st  *store.Store
	clk *clock.Simulated
	// fresh is another instance's store on the same table (nothing cached).
	fresh func() *store.Store
}

func setupStore(t *testing.T) *storeBundle {
	t.Helper()
	env := awstest.Provision(t)
	clk := clock.NewSimulated(time.Now())
	fresh := func() *store.Store { return store.New(env.Clients.DynamoDB, env.Res.Definition.Table.Name, clk.Now) }
	return &storeBundle{st: fresh(), clk: clk, fresh: fresh}
}

func (b *storeBundle) get(t *testing.T, id string) job.Job {
	t.Helper()
	j, err := b.st.GetJob(context.Background(), id)
	if err != nil {
		t.Fatalf("reading job %s: %v", id, err)
	}
	return j
}

// TestClaimJob: a claim is written on the version it read; a second worker
// holding the same version loses with ErrConflict; a paused tier refuses
// the claim with ErrPaused and leaves the job as it was.
func TestClaimJob(t *testing.T) {
	t.Parallel()
	b := setupStore(t)
	ctx := context.Background()
	now := b.clk.Now()
	queued := testfactory.Job(t, b.st, testfactory.JobOpts{Tier: job.Medium, At: now})

	first, second := b.get(t, queued.ID), b.get(t, queued.ID)
	if _, err := first.Claim("worker-1", now.Add(time.Minute), now); err != nil {
		t.Fatal(err)
	}
	if err := b.st.ClaimJob(ctx, &first); err != nil {
		t.Fatalf("first claim: %v", err)
	}
	if _, err := second.Claim("worker-2", now.Add(time.Minute), now); err != nil {
		t.Fatal(err)
	}
	if err := b.st.ClaimJob(ctx, &second); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("second claim on the same version: err = %v, want ErrConflict", err)
	}
	if second.Version != queued.Version {
		t.Errorf("a lost claim moved the caller's version: %d, want %d", second.Version, queued.Version)
	}
	got := b.get(t, queued.ID)
	if diff := cmp.Diff(struct {
		Status   job.Status
		Attempts int
		Lease    string
		Version  int64
	}{job.Running, 1, "worker-1", queued.Version + 1}, struct {
		Status   job.Status
		Attempts int
		Lease    string
		Version  int64
	}{got.Status, got.Attempts, got.LeaseOwner, got.Version}); diff != "" {
		t.Errorf("stored claim (-want +got):\n%s", diff)
	}

	// A paused tier: the claim is refused, whatever the caller believes.
	if _, err := b.st.SetTierPaused(ctx, job.Low, true, "op"); err != nil {
		t.Fatal(err)
	}
	low := testfactory.Job(t, b.st, testfactory.JobOpts{Tier: job.Low, At: now})
	claim := b.get(t, low.ID)
	if _, err := claim.Claim("worker-1", now.Add(time.Minute), now); err != nil {
		t.Fatal(err)
	}
	if err := b.st.ClaimJob(ctx, &claim); !errors.Is(err, store.ErrPaused) {
		t.Fatalf("claim in a paused tier: err = %v, want ErrPaused", err)
	}
	if got := b.get(t, low.ID); got.Status != job.Queued || got.Attempts != 0 || got.Version != low.Version {
		t.Errorf("a refused claim changed the job: status %s, attempts %d, version %d", got.Status, got.Attempts, got.Version)
	}
	// The other tiers still claim, and a resumed tier claims again.
	if _, err := b.st.SetTierPaused(ctx, job.Low, false, "op"); err != nil {
		t.Fatal(err)
	}
	claim = b.get(t, low.ID)
	if _, err := claim.Claim("worker-1", now.Add(time.Minute), now); err != nil {
		t.Fatal(err)
	}
	if err := b.st.ClaimJob(ctx, &claim); err != nil {
		t.Fatalf("claim after resume: %v", err)
	}
}

// TestSnoozeRetryParkFinishCancel stores each named change of a claimed
// job and reads back the bookkeeping it carries; a write on a stale copy
// is refused with ErrConflict and changes nothing.
func TestSnoozeRetryParkFinishCancel(t *testing.T) {
	t.Parallel()
	b := setupStore(t)
	ctx := context.Background()
	now := b.clk.Now()
	claimed := func() job.Job {
		t.Helper()
		j := b.get(t, testfactory.Job(t, b.st, testfactory.JobOpts{Attempts: 2, At: now}).ID)
		if _, err := j.Claim("w", now.Add(time.Minute), now); err != nil {
			t.Fatal(err)
		}
		if err := b.st.ClaimJob(ctx, &j); err != nil {
			t.Fatal(err)
		}
		return j
	}
	until := now.Add(5 * time.Minute).UTC()

	t.Run("snooze gives the attempt back", func(t *testing.T) {
		j := claimed()
		if err := j.Snooze("circuit open", until, now); err != nil {
			t.Fatal(err)
		}
		if err := b.st.SaveJob(ctx, &j); err != nil {
			t.Fatal(err)
		}
		got := b.get(t, j.ID)
		if got.Status != job.Queued || got.Attempts != 2 || got.RetryAt == nil || !got.RetryAt.Equal(until) || got.Phase != "waiting" {
			t.Errorf("snoozed: status %s attempts %d retryAt %v phase %q; want queued, 2, %v, waiting", got.Status, got.Attempts, got.RetryAt, got.Phase, until)
		}
	})
	t.Run("retry later keeps the attempt and the error", func(t *testing.T) {
		j := claimed()
		if err := j.RetryLater(&job.Error{Code: "upstream_5xx", Message: "502", Retryable: true}, until, now); err != nil {
			t.Fatal(err)
		}
		if err := b.st.SaveJob(ctx, &j); err != nil {
			t.Fatal(err)
		}
		got := b.get(t, j.ID)
		if got.Status != job.Queued || got.Attempts != 3 || got.Error == nil || got.Error.Code != "upstream_5xx" || got.Phase != "retrying" {
			t.Errorf("retrying: status %s attempts %d error %+v phase %q", got.Status, got.Attempts, got.Error, got.Phase)
		}
	})
	t.Run("park waits in the table and is counted due", func(t *testing.T) {
		j := b.get(t, testfactory.Job(t, b.st, testfactory.JobOpts{At: now}).ID)
		if err := j.Park("paused", until, now); err != nil {
			t.Fatal(err)
		}
		if err := b.st.SaveJob(ctx, &j); err != nil {
			t.Fatal(err)
		}
		got := b.get(t, j.ID)
		if got.Waiting != "paused" || got.RetryAt == nil || !got.RetryAt.Equal(until) || got.Attempts != 0 {
			t.Errorf("parked: waiting %q retryAt %v attempts %d", got.Waiting, got.RetryAt, got.Attempts)
		}
	})
	t.Run("finish", func(t *testing.T) {
		j := claimed()
		if err := j.Apply(job.Succeed, now); err != nil {
			t.Fatal(err)
		}
		if err := b.st.SaveJob(ctx, &j); err != nil {
			t.Fatal(err)
		}
		if got := b.get(t, j.ID); got.Status != job.Succeeded || got.FinishedAt == nil {
			t.Errorf("finished: status %s finishedAt %v", got.Status, got.FinishedAt)
		}
	})
}

// TestCancelLosesToAConcurrentClaim: a cancel written on the copy read
// before a claim is refused; read again, it goes through; a finished job
// refuses a second cancel without a write.
func TestCancelLosesToAConcurrentClaim(t *testing.T) {
	t.Parallel()
	b := setupStore(t)
	ctx := context.Background()
	now := b.clk.Now()
	j := b.get(t, testfactory.Job(t, b.st, testfactory.JobOpts{At: now}).ID)
	stale := j
	if _, err := j.Claim("w", now.Add(time.Minute), now); err != nil {
		t.Fatal(err)
	}
	if err := b.st.ClaimJob(ctx, &j); err != nil {
		t.Fatal(err)
	}
	if err := stale.Apply(job.Cancel, now); err != nil {
		t.Fatal(err)
	}
	if err := b.st.SaveJob(ctx, &stale); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("cancel on a stale copy: err = %v, want ErrConflict", err)
	}
	if got := b.get(t, j.ID); got.Status != job.Running {
		t.Fatalf("a lost cancel changed the job: %s", got.Status)
	}
	// Read again and decide again: the cancel goes through.
	got, err := b.st.UpdateJob(ctx, j.ID, func(j *job.Job) error { return j.Apply(job.Cancel, now) })
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != job.Cancelled || b.get(t, j.ID).Status != job.Cancelled {
		t.Errorf("cancel after re-read: %s", got.Status)
	}
	// A finished job refuses the cancel: fn's error comes back, nothing is written.
	_, err = b.st.UpdateJob(ctx, j.ID, func(j *job.Job) error { return j.Apply(job.Cancel, now) })
	if !errors.Is(err, job.ErrTransition) {
		t.Errorf("second cancel: err = %v, want a transition error", err)
	}
}

// TestUpdateJobRetriesConflicts: concurrent read-modify-writes all land,
// none is lost to another's write.
func TestUpdateJobRetriesConflicts(t *testing.T) {
	t.Parallel()
	b := setupStore(t)
	j := testfactory.Job(t, b.st, testfactory.JobOpts{})
	const writers = 4
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for range writers {
		wg.Go(func() {
			_, err := b.st.UpdateJob(context.Background(), j.ID, func(j *job.Job) error { j.Enqueues++; return nil })
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("UpdateJob: %v", err)
		}
	}
	got := b.get(t, j.ID)
	if got.Enqueues != j.Enqueues+writers || got.Version != j.Version+writers {
		t.Errorf("enqueues %d version %d, want %d and %d", got.Enqueues, got.Version, j.Enqueues+writers, j.Version+writers)
	}
}

// TestCreateJobIdempotencyAndUploadReferences: an active job with the same
// owner and hash is returned instead of a new one; a finished one does not
// block; an upload that is not the owner's, not confirmed or unknown
// refuses the job with *UploadUnavailableError and nothing is written.
func TestCreateJobIdempotencyAndUploadReferences(t *testing.T) {
	t.Parallel()
	b := setupStore(t)
	ctx := context.Background()
	owner := testfactory.Owner()
	first := testfactory.Job(t, b.st, testfactory.JobOpts{Owner: owner, Hash: "same"})
	up := testfactory.Upload(t, b.st, testfactory.UploadOpts{Owner: owner})

	dup := testfactory.Build(testfactory.JobOpts{Owner: owner, Hash: "same", UploadIDs: []string{up.ID}})
	got, created, err := b.st.CreateJob(ctx, &dup)
	if err != nil || created || got.ID != first.ID {
		t.Fatalf("same hash while active: created=%v id=%s err=%v, want the first job %s", created, got.ID, err, first.ID)
	}
	if _, err := b.st.GetJob(ctx, dup.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the duplicate was stored: err = %v", err)
	}
	if _, err := b.st.UpdateJob(ctx, first.ID, func(j *job.Job) error { return j.Apply(job.Cancel, time.Now()) }); err != nil {
		t.Fatal(err)
	}
	again := testfactory.Build(testfactory.JobOpts{Owner: owner, Hash: "same", UploadIDs: []string{up.ID}})
	if got, created, err := b.st.CreateJob(ctx, &again); err != nil || !created || got.ID != again.ID {
		t.Fatalf("same hash after the first finished: created=%v err=%v", created, err)
	}
	if u, err := b.st.GetUpload(ctx, up.ID); err != nil || u.Refs != 1 {
		t.Errorf("upload refs = %d (err %v), want 1", u.Refs, err)
	}

	others := testfactory.Upload(t, b.st, testfactory.UploadOpts{})
	pending := testfactory.Upload(t, b.st, testfactory.UploadOpts{Owner: owner, Status: uploads.Pending})
	for name, id := range map[string]string{"another owner's": others.ID, "pending": pending.ID, "unknown": "upl_aaaaaaaaaaaaaaaaaaaaaaaaaa"} {
		j := testfactory.Build(testfactory.JobOpts{Owner: owner, UploadIDs: []string{up.ID, id}})
		_, _, err := b.st.CreateJob(ctx, &j)
		var gone *store.UploadUnavailableError
		if !errors.As(err, &gone) || gone.UploadID != id {
			t.Errorf("%s upload: err = %v, want UploadUnavailableError for %s", name, err, id)
		}
		if _, err := b.st.GetJob(ctx, j.ID); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("%s upload: the job was stored (err %v)", name, err)
		}
	}
	if u, _ := b.st.GetUpload(ctx, up.ID); u.Refs != 1 {
		t.Errorf("refused jobs took a reference: refs = %d, want 1", u.Refs)
	}
}

// TestAccountLease: one refresh lease at a time; it lapses at its time;
// rotated tokens are stored only over the version that was spent.
func TestAccountLease(t *testing.T) {
	t.Parallel()
	b := setupStore(t)
	ctx := context.Background()
	now := b.clk.Now()
	a := testfactory.Account(t, b.st, testfactory.AccountOpts{At: now})
	p := a.Provider

	if err := b.st.LeaseAccount(ctx, a.Owner, p, "w1", now, now.Add(time.Minute)); err != nil {
		t.Fatalf("first lease: %v", err)
	}
	if err := b.st.LeaseAccount(ctx, a.Owner, p, "w2", now.Add(30*time.Second), now.Add(2*time.Minute)); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("lease while held: err = %v, want ErrConflict", err)
	}
	if err := b.st.LeaseAccount(ctx, a.Owner, p, "w2", now.Add(61*time.Second), now.Add(2*time.Minute)); err != nil {
		t.Fatalf("lease after the first lapsed: %v", err)
	}
	// Releasing someone else's lease does nothing.
	if err := b.st.ReleaseAccount(ctx, a.Owner, p, "w1"); err != nil {
		t.Fatal(err)
	}
	if got, _ := b.st.GetAccount(ctx, a.Owner, p); got.LeaseOwner != "w2" {
		t.Errorf("lease owner after w1's release = %q, want w2", got.LeaseOwner)
	}
	if err := b.st.ReleaseAccount(ctx, a.Owner, p, "w2"); err != nil {
		t.Fatal(err)
	}
	if err := b.st.LeaseAccount(ctx, a.Owner, p, "w3", now.Add(62*time.Second), now.Add(3*time.Minute)); err != nil {
		t.Fatalf("lease after release: %v", err)
	}

	rotated := a
	rotated.Version = a.Version + 1
	if err := b.st.SaveRotated(ctx, rotated, a.Version, a.ConnectedAt); err != nil {
		t.Fatalf("rotate: %v", err)
	}
	got, err := b.st.GetAccount(ctx, a.Owner, p)
	if err != nil || got.Version != a.Version+1 || got.LeaseOwner != "" {
		t.Fatalf("after rotate: version %d lease %q err %v", got.Version, got.LeaseOwner, err)
	}
	// The same spent version again (a second refresher): refused.
	if err := b.st.SaveRotated(ctx, rotated, a.Version, a.ConnectedAt); !errors.Is(err, store.ErrConflict) {
		t.Errorf("second rotation of the same version: err = %v, want ErrConflict", err)
	}
	// A lease on an account nobody connected: refused.
	if err := b.st.LeaseAccount(ctx, testfactory.Owner(), p, "w", now, now.Add(time.Minute)); !errors.Is(err, store.ErrConflict) {
		t.Errorf("lease of a missing account: err = %v, want ErrConflict", err)
	}
}

// TestUploadSettles: an id is stored once; settling is idempotent and the
// first outcome stands.
func TestUploadSettles(t *testing.T) {
	t.Parallel()
	b := setupStore(t)
	ctx := context.Background()
	now := b.clk.Now()
	u := testfactory.Upload(t, b.st, testfactory.UploadOpts{Status: uploads.Pending, At: now})
	if err := b.st.PutUpload(ctx, uploads.Upload{ID: u.ID, Owner: "someone-else", Status: uploads.Pending, CreatedAt: now}); err == nil {
		t.Fatal("a second upload with the same id was stored")
	}
	first, err := b.st.SettleUpload(ctx, u.ID, uploads.Confirmed, "", job.Pin{}, now)
	if err != nil || first.Status != uploads.Confirmed {
		t.Fatalf("confirm: %+v, %v", first, err)
	}
	again, err := b.st.SettleUpload(ctx, u.ID, uploads.Rejected, "too late", job.Pin{}, now.Add(time.Second))
	if err != nil || again.Status != uploads.Confirmed || again.Reason != "" {
		t.Fatalf("a later rejection changed the outcome: %+v, %v", again, err)
	}
	// Past its use window, a confirmed upload reads expired.
	b.clk.Advance(resources.UploadUseWindow + time.Second)
	if got, err := b.st.GetUpload(ctx, u.ID); err != nil || got.StatusAt(b.clk.Now()) != uploads.Expired {
		t.Errorf("after the use window: %s, %v; want expired", got.StatusAt(b.clk.Now()), err)
	}
	if _, err := b.st.GetUpload(ctx, "upl_aaaaaaaaaaaaaaaaaaaaaaaaaa"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown upload: err = %v, want ErrNotFound", err)
	}
}

// TestGetJobAndAccount: one read returns the job and its owner's account;
// no account when the owner has none or the job is someone else's;
// ErrNotFound without the job.
func TestGetJobAndAccount(t *testing.T) {
	t.Parallel()
	b := setupStore(t)
	ctx := context.Background()
	now := b.clk.Now()
	a := testfactory.Account(t, b.st, testfactory.AccountOpts{At: now})
	j := testfactory.Job(t, b.st, testfactory.JobOpts{Owner: a.Owner, At: now})

	got, acct, err := b.st.GetJobAndAccount(ctx, j.ID, a.Owner, a.Provider, j.MediaRefs)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(b.get(t, j.ID), got); diff != "" {
		t.Errorf("job (-GetJob +GetJobAndAccount):\n%s", diff)
	}
	want, err := b.st.GetAccount(ctx, a.Owner, a.Provider)
	if err != nil {
		t.Fatal(err)
	}
	if acct == nil {
		t.Fatal("no account")
	}
	if diff := cmp.Diff(want, *acct); diff != "" {
		t.Errorf("account (-GetAccount +GetJobAndAccount):\n%s", diff)
	}

	lone := testfactory.Job(t, b.st, testfactory.JobOpts{At: now})
	if _, acct, err := b.st.GetJobAndAccount(ctx, lone.ID, lone.Owner, a.Provider, nil); err != nil || acct != nil {
		t.Errorf("owner without an account: account %v, err %v; want none, nil", acct, err)
	}
	if got, acct, err := b.st.GetJobAndAccount(ctx, lone.ID, a.Owner, a.Provider, nil); err != nil || acct != nil || got.ID != lone.ID {
		t.Errorf("another owner's job: job %q account %v err %v; want the job and no account", got.ID, acct, err)
	}
	if _, _, err := b.st.GetJobAndAccount(ctx, "job_missing", a.Owner, a.Provider, nil); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("missing job: err = %v, want ErrNotFound", err)
	}
}

// TestCreateJobChecksTheAccount: a job that needs its owner's connected
// account is created only if the owner has one, checked in the creating
// transaction; a refusal writes nothing, not even the upload references.
func TestCreateJobChecksTheAccount(t *testing.T) {
	t.Parallel()
	b := setupStore(t)
	ctx := context.Background()
	now := b.clk.Now()
	create := func(owner string) (job.Job, error) {
		up := testfactory.Upload(t, b.st, testfactory.UploadOpts{Owner: owner, At: now})
		j := submitted(testfactory.JobOpts{Owner: owner, UploadIDs: []string{up.ID}, At: now})
		j.NeedsAccount = testfactory.Provider
		_, _, err := b.st.CreateJob(ctx, &j)
		return j, err
	}

	lone := testfactory.Owner()
	j, err := create(lone)
	if !errors.Is(err, store.ErrNoAccount) {
		t.Fatalf("owner without an account: err = %v, want ErrNoAccount", err)
	}
	if _, err := b.st.GetJob(ctx, j.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("refused job was written (GetJob err = %v)", err)
	}
	if u, err := b.st.GetUpload(ctx, j.Items[0].UploadID); err != nil || u.Refs != 0 {
		t.Errorf("refused job took a reference: refs %d, err %v", u.Refs, err)
	}

	a := testfactory.Account(t, b.fresh(), testfactory.AccountOpts{At: now}) // connected through another instance
	if j, err := create(a.Owner); err != nil {
		t.Fatalf("owner with an account: %v", err)
	} else if got := b.get(t, j.ID); got.Items[0].Key != "" {
		t.Errorf("submission described the item (key %q): it reads no upload", got.Items[0].Key)
	}
	if _, err := create(a.Owner); err != nil {
		t.Fatalf("owner with an account, again: %v", err)
	}
}

// TestCreateJobRefusesUnusableUploads: the references the creating
// transaction takes are its check of the uploads: someone else's, a
// pending one and a missing one are each refused with the upload named.
func TestCreateJobRefusesUnusableUploads(t *testing.T) {
	t.Parallel()
	b := setupStore(t)
	ctx := context.Background()
	now := b.clk.Now()
	owner := testfactory.Owner()
	good := testfactory.Upload(t, b.st, testfactory.UploadOpts{Owner: owner, At: now})
	others := testfactory.Upload(t, b.st, testfactory.UploadOpts{At: now})
	pending := testfactory.Upload(t, b.st, testfactory.UploadOpts{Owner: owner, At: now, Status: uploads.Pending})
	for name, bad := range map[string]string{"someone else's": others.ID, "pending": pending.ID, "missing": "upl_missing"} {
		j := testfactory.Build(testfactory.JobOpts{Owner: owner, UploadIDs: []string{good.ID, bad}, At: now})
		_, _, err := b.st.CreateJob(ctx, &j)
		var gone *store.UploadUnavailableError
		if !errors.As(err, &gone) || gone.UploadID != bad {
			t.Errorf("%s upload: err = %v, want UploadUnavailableError for %s", name, err, bad)
		}
	}
	if u, err := b.st.GetUpload(ctx, good.ID); err != nil || u.Refs != 0 {
		t.Errorf("refused jobs took references on the good upload: refs %d, err %v", u.Refs, err)
	}
}

// TestWorkersReadDescribesItems: a job created without reading its uploads
// (items name only their upload) is described by the worker's one read of
// job, account and the uploads its message names; without the message's
// list (a message sent before it existed) the uploads are read apart; an
// upload record that is gone leaves its item undescribed.
func TestWorkersReadDescribesItems(t *testing.T) {
	t.Parallel()
	b := setupStore(t)
	ctx := context.Background()
	now := b.clk.Now()
	a := testfactory.Account(t, b.st, testfactory.AccountOpts{At: now})
	u1 := testfactory.Upload(t, b.st, testfactory.UploadOpts{Owner: a.Owner, At: now, Filename: "one.png"})
	u2 := testfactory.Upload(t, b.st, testfactory.UploadOpts{Owner: a.Owner, At: now, Filename: "two.png", ContentType: "image/jpeg", Size: 77})
	j := submitted(testfactory.JobOpts{Owner: a.Owner, UploadIDs: []string{u1.ID, u2.ID}, At: now})
	if _, _, err := b.st.CreateJob(ctx, &j); err != nil {
		t.Fatal(err)
	}
	want := func(t *testing.T, got job.Job) {
		t.Helper()
		for i, u := range []uploads.Upload{u1, u2} {
			it := got.Items[i]
			if it.Key != u.Key || it.ContentType != u.ContentType || it.Size != u.Size || it.Filename != u.Filename || it.Pin != u.Pin {
				t.Errorf("item %d: %+v; want it to describe upload %+v", i, it, u)
			}
		}
	}
	for name, uploads := range map[string][]string{"named by the message": j.MediaRefs, "read apart": nil, "one named": {u2.ID}} {
		t.Run(name, func(t *testing.T) {
			got, acct, err := b.st.GetJobAndAccount(ctx, j.ID, a.Owner, a.Provider, uploads)
			if err != nil || acct == nil {
				t.Fatalf("account %v, err %v", acct, err)
			}
			want(t, got)
		})
	}
	stored := b.get(t, j.ID)
	if err := b.st.DescribeItems(ctx, &stored); err != nil {
		t.Fatal(err)
	}
	want(t, stored)

	gone := submitted(testfactory.JobOpts{Owner: a.Owner, UploadIDs: []string{"upl_gone"}, At: now})
	if err := b.st.DescribeItems(ctx, &gone); err != nil || gone.Items[0].Key != "" {
		t.Errorf("upload record gone: key %q, err %v; want the item left undescribed", gone.Items[0].Key, err)
	}
}

// submitted builds a job as submission makes it: its items name their
// uploads and describe nothing.
func submitted(opts testfactory.JobOpts) job.Job {
	j := testfactory.Build(opts)
	for i, it := range j.Items {
		j.Items[i] = job.Item{ID: it.ID, UploadID: it.UploadID, Status: it.Status}
	}
	return j
}
