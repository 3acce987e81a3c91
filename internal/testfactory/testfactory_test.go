package testfactory_test

import (
	"context"
	"testing"
	"time"

	"github.com/conveyor/conveyor/internal/aws/store"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/testfactory"
	"github.com/conveyor/conveyor/internal/uploads"
	"github.com/conveyor/conveyor/localstack/awstest"
)

func TestMain(m *testing.M) { awstest.Main(m) }

// TestRecordsAreStoredAsTheOptionsSay reads back what the factory stored.
func TestRecordsAreStoredAsTheOptionsSay(t *testing.T) {
	t.Parallel()
	env := awstest.Provision(t)
	st := store.New(env.Clients.DynamoDB, env.Res.Definition.Table.Name, nil)
	ctx := context.Background()
	at := time.Now().Add(-time.Hour).UTC().Truncate(time.Millisecond)

	owner := testfactory.Owner()
	if other := testfactory.Owner(); other == owner {
		t.Fatalf("two owners are both %q", owner)
	}
	running := testfactory.Job(t, st, testfactory.JobOpts{Owner: owner, Tier: job.Low, Status: job.Running, Attempts: 3, Items: 2, At: at})
	if running.Status != job.Running || running.Tier != "low" || running.Attempts != 3 || running.MaxAttempts != testfactory.MaxAttemptsDefault ||
		running.LeaseOwner == "" || running.HeartbeatAt == nil || !running.HeartbeatAt.Equal(at) || len(running.Items) != 2 {
		t.Errorf("running job = %+v", running)
	}
	for _, it := range running.Items {
		u, err := st.GetUpload(ctx, it.UploadID)
		if err != nil || u.Owner != owner || u.Status != uploads.Confirmed || u.Refs != 1 || it.Key != u.Key || it.Size != u.Size {
			t.Errorf("item %+v on upload %+v (%v)", it, u, err)
		}
	}
	due := at.Add(48 * time.Hour)
	scheduled := testfactory.Job(t, st, testfactory.JobOpts{Status: job.Scheduled, ScheduleAt: &due, At: at})
	if scheduled.ScheduleAt == nil || !scheduled.ScheduleAt.Equal(due) || scheduled.QueuedAt != nil {
		t.Errorf("scheduled job = %+v", scheduled)
	}
	failed := testfactory.Job(t, st, testfactory.JobOpts{Status: job.Failed, At: at})
	if failed.FinishedAt == nil || failed.Error == nil {
		t.Errorf("failed job = %+v", failed)
	}
	if n, err := st.CountDue(ctx, job.Running, at.Add(time.Second)); err != nil || n != 1 {
		t.Errorf("running jobs due = %d, %v; want the factory's one, indexed", n, err)
	}

	pending := testfactory.Upload(t, st, testfactory.UploadOpts{Status: uploads.Pending})
	if pending.Status != uploads.Pending {
		t.Errorf("pending upload = %+v", pending)
	}
	a := testfactory.Account(t, st, testfactory.AccountOpts{Owner: owner})
	if got, err := st.GetAccount(ctx, owner, testfactory.Provider); err != nil || got.Version != a.Version {
		t.Errorf("account = %+v, %v", got, err)
	}
	if _, connected, err := st.GetUploadsAndAccount(ctx, nil, owner, testfactory.Provider); err != nil || !connected {
		t.Errorf("connected = %v, %v", connected, err)
	}
}
