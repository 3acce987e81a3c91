// Package testfactory creates jobs, uploads and connected accounts straight
// in the store, the way River's testfactory creates rows: a test of a
// service (recovery, the publisher, the store itself) gets the exact
// records it needs — a job RUNNING with a stale heartbeat, a job on its
// last attempt, a scheduled job — without going through POST /v1/jobs.
//
// Every record goes through the store's own writes (CreateJob, PutUpload,
// SettleUpload, PutAccount), so it is stored exactly as the product stores
// it, with its keys, indexes and upload references. Options left zero take
// the defaults their comments state.
package testfactory

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	"github.com/conveyor/conveyor/internal/accounts"
	"github.com/conveyor/conveyor/internal/aws/sealer"
	"github.com/conveyor/conveyor/internal/aws/store"
	"github.com/conveyor/conveyor/internal/config"
	"github.com/conveyor/conveyor/internal/envelope"
	"github.com/conveyor/conveyor/internal/ids"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/publish"
	"github.com/conveyor/conveyor/internal/uploads"
)

// Provider is the provider of the accounts Account connects.
const Provider = accounts.Provider

// MaxAttemptsDefault is a job's MaxAttempts when JobOpts leaves it zero:
// the product's default.
var MaxAttemptsDefault = config.Lookup(config.VarMaxAttempts).Default.(int)

// Owner returns a fresh user id, so that parallel tests never share an
// owner's records.
func Owner() string { return "u-" + random(6) }

// UploadOpts describe an upload to create.
type UploadOpts struct {
	// Owner defaults to a fresh Owner().
	Owner string
	// Status defaults to uploads.Confirmed; uploads.Pending leaves
	// it unsettled, uploads.Rejected settles it rejected.
	Status uploads.Status
	// At is when it was created (and settled); defaults to time.Now().
	At time.Time
	// ContentType defaults to image/png, Size to 1024, Filename to
	// "<id>.png".
	ContentType string
	Size        int64
	Filename    string
}

// Upload creates an upload in st and returns it as stored. Its key names
// the object uploads/<owner>/<id>/<filename>, which the factory does not write: a test
// that streams the media puts the object itself.
func Upload(t testing.TB, st *store.Store, opts UploadOpts) uploads.Upload {
	t.Helper()
	ctx := context.Background()
	defaults(&opts.Owner, &opts.At)
	if opts.Status == "" {
		opts.Status = uploads.Confirmed
	}
	if opts.ContentType == "" {
		opts.ContentType = "image/png"
	}
	if opts.Size == 0 {
		opts.Size = 1024
	}
	id := ids.New(ids.Upload)
	if opts.Filename == "" {
		opts.Filename = id + ".png"
	}
	u := uploads.Upload{
		ID: id, Owner: opts.Owner, Status: uploads.Pending,
		Key:      "uploads/" + opts.Owner + "/" + id + "/" + opts.Filename,
		Filename: opts.Filename, Size: opts.Size, ContentType: opts.ContentType,
		CreatedAt: opts.At.UTC(),
	}
	if err := st.PutUpload(ctx, u); err != nil {
		t.Fatalf("testfactory: storing upload: %v", err)
	}
	if opts.Status == uploads.Pending {
		got, err := st.GetUpload(ctx, id)
		if err != nil {
			t.Fatalf("testfactory: reading upload %s: %v", id, err)
		}
		return got
	}
	got, err := st.SettleUpload(ctx, id, opts.Status, "", job.Pin{}, opts.At)
	if err != nil {
		t.Fatalf("testfactory: settling upload %s: %v", id, err)
	}
	return got
}

// AccountOpts describe a connected account to create.
type AccountOpts struct {
	// Owner defaults to a fresh Owner().
	Owner string
	// Sealer, when set, seals RefreshToken (default "refresh-<owner>") the
	// way accounts.Service.Connect does, so the publisher can open it. Nil
	// stores an envelope nobody can open: enough for "is connected".
	Sealer       *sealer.Sealer
	RefreshToken string
	// At is the connection time; defaults to time.Now().
	At time.Time
}

// Account stores a connected account for opts.Owner and returns it.
func Account(t testing.TB, st *store.Store, opts AccountOpts) accounts.Account {
	t.Helper()
	ctx := context.Background()
	defaults(&opts.Owner, &opts.At)
	if opts.RefreshToken == "" {
		opts.RefreshToken = "refresh-" + opts.Owner
	}
	env := envelope.Envelope{}
	if opts.Sealer != nil {
		var err error
		// The same additional data as accounts' own sealing.
		env, err = opts.Sealer.Seal(ctx, []byte(opts.RefreshToken), map[string]string{"user": opts.Owner, "provider": Provider, "token": "refresh", envelope.ContextPurpose: envelope.PurposeAccountToken})
		if err != nil {
			t.Fatalf("testfactory: sealing the refresh token: %v", err)
		}
	}
	a := accounts.Account{Owner: opts.Owner, Provider: Provider, Refresh: env, Version: 1, ConnectedAt: opts.At.UTC(), UpdatedAt: opts.At.UTC()}
	if err := st.PutAccount(ctx, a); err != nil {
		t.Fatalf("testfactory: storing account: %v", err)
	}
	return a
}

// JobOpts describe a job to create.
type JobOpts struct {
	// Owner defaults to a fresh Owner().
	Owner string
	// Tier defaults to job.Medium.
	Tier job.Tier
	// Status defaults to job.Queued. Running jobs get a lease and a
	// heartbeat at At; finished ones a FinishedAt at At; Scheduled ones a
	// ScheduleAt an hour after At unless ScheduleAt is set.
	Status job.Status
	// Attempts is how many runs the job has spent; MaxAttempts defaults to
	// MaxAttemptsDefault.
	Attempts    int
	MaxAttempts int
	// Items is how many items the job holds (default 1), each on a new
	// confirmed upload of the owner; UploadIDs names existing uploads
	// instead (one item each).
	Items     int
	UploadIDs []string
	// Title defaults to "factory job".
	Title string
	// At is when the job was created, queued and last updated; defaults to
	// time.Now().
	At time.Time
	// ScheduleAt, HeartbeatAt, LeaseOwner, LeaseUntil, RetryAt and Waiting
	// override what Status implies.
	ScheduleAt  *time.Time
	HeartbeatAt *time.Time
	LeaseOwner  string
	LeaseUntil  *time.Time
	RetryAt     *time.Time
	Waiting     string
	// Hash is the idempotency hash; defaults to a random one (no two
	// factory jobs collide unless a test asks).
	Hash string
	// WebhookURL is the job's own webhook, none by default.
	WebhookURL string
}

// Build returns the job opts describe, with new ids, without storing it
// (nor its uploads: UploadIDs must name uploads the test created).
func Build(opts JobOpts) job.Job {
	if opts.Owner == "" {
		opts.Owner = Owner()
	}
	if opts.Tier == "" {
		opts.Tier = job.Medium
	}
	if opts.Status == "" {
		opts.Status = job.Queued
	}
	if opts.MaxAttempts == 0 {
		opts.MaxAttempts = MaxAttemptsDefault
	}
	if opts.Title == "" {
		opts.Title = "factory job"
	}
	if opts.At.IsZero() {
		opts.At = time.Now()
	}
	if opts.Hash == "" {
		opts.Hash = random(16)
	}
	at := opts.At.UTC()
	params, _ := job.DocOf(publish.Params{Title: opts.Title}) // a struct of strings always encodes
	j := job.Job{
		ID: ids.New(ids.Job), Type: publish.Type, Status: opts.Status, Tier: opts.Tier,
		Phase: string(opts.Status), Phases: job.NewPhases(publish.Phases...),
		Params:   params,
		Attempts: opts.Attempts, MaxAttempts: opts.MaxAttempts, WebhookURL: opts.WebhookURL,
		CreatedAt: at, UpdatedAt: at, Owner: opts.Owner, Hash: opts.Hash,
	}
	for _, id := range opts.UploadIDs {
		j.Items = append(j.Items, job.Item{ID: ids.New(ids.Item), UploadID: id, Status: job.ItemPending,
			Key: "uploads/" + opts.Owner + "/" + id, ContentType: "image/png", Size: 1024, Filename: id + ".png"})
	}
	switch opts.Status {
	case job.Scheduled:
		s := at.Add(time.Hour)
		j.ScheduleAt = &s
	case job.Queued:
		j.QueuedAt, j.Enqueues = &at, 1
	case job.Running:
		until := at.Add(time.Minute)
		j.QueuedAt, j.Enqueues, j.StartedAt = &at, 1, &at
		j.HeartbeatAt, j.LeaseOwner, j.LeaseUntil = &at, "factory-worker", &until
		j.Phase = publish.PhaseToken
	case job.Succeeded, job.Failed, job.Cancelled:
		j.StartedAt, j.FinishedAt = &at, &at
		if opts.Status == job.Failed {
			j.Error = &job.Error{Code: "factory", Message: "made failed by the test factory"}
		}
	}
	if opts.ScheduleAt != nil {
		s := opts.ScheduleAt.UTC()
		j.ScheduleAt = &s
	}
	if opts.HeartbeatAt != nil {
		h := opts.HeartbeatAt.UTC()
		j.HeartbeatAt = &h
	}
	if opts.LeaseOwner != "" {
		j.LeaseOwner = opts.LeaseOwner
	}
	if opts.LeaseUntil != nil {
		l := opts.LeaseUntil.UTC()
		j.LeaseUntil = &l
	}
	if opts.RetryAt != nil {
		r := opts.RetryAt.UTC()
		j.RetryAt = &r
	}
	j.Waiting = opts.Waiting
	return j
}

// Job creates the job opts describe in st (with its items' uploads, unless
// UploadIDs names them) and returns it as stored. It stores no event and
// sends no message: a test that needs the job in its tier's queue sends it.
func Job(t testing.TB, st *store.Store, opts JobOpts) job.Job {
	t.Helper()
	defaults(&opts.Owner, &opts.At)
	if len(opts.UploadIDs) == 0 {
		n := max(opts.Items, 1)
		for range n {
			opts.UploadIDs = append(opts.UploadIDs, Upload(t, st, UploadOpts{Owner: opts.Owner, At: opts.At}).ID)
		}
	}
	j := Build(opts)
	ctx := context.Background()
	ups, err := st.GetUploads(ctx, opts.UploadIDs)
	if err != nil {
		t.Fatalf("testfactory: reading the job's uploads: %v", err)
	}
	for i, it := range j.Items {
		if u, ok := ups[it.UploadID]; ok {
			j.Items[i].Key, j.Items[i].ContentType, j.Items[i].Size, j.Items[i].Filename = u.Key, u.ContentType, u.Size, u.Filename
		}
	}
	stored, created, err := st.CreateJob(ctx, &j)
	if err != nil {
		t.Fatalf("testfactory: creating job: %v", err)
	}
	if !created {
		t.Fatalf("testfactory: an active job %s already holds hash %q", stored.ID, opts.Hash)
	}
	got, err := st.GetJob(ctx, j.ID)
	if err != nil {
		t.Fatalf("testfactory: reading job %s back: %v", j.ID, err)
	}
	return got
}

// defaults gives a zero owner a fresh one and a zero time the present.
func defaults(owner *string, at *time.Time) {
	if *owner == "" {
		*owner = Owner()
	}
	if at.IsZero() {
		*at = time.Now()
	}
}

func random(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
