package store_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/conveyor/conveyor/internal/awsclient"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/publish"
	"github.com/conveyor/conveyor/internal/resources"
	"github.com/conveyor/conveyor/internal/store"
	"github.com/conveyor/conveyor/internal/testfactory"
	"github.com/conveyor/conveyor/localstack/awstest"
)

// TestAPublishedJobWritesNarrowIndexEntries follows one published job's
// writes as the pipeline makes them — the submission's transaction, the
// claim's, the finish's with its events — and reads the write units
// DynamoDB reports per index: every index entry is one unit (a few hundred
// bytes, not the job), at most twice that in a transaction. The indexes that do not
// carry the job's status are written once, when the job is created; the
// owner's creation index only when the status changes; the re-keyed ones
// (status, sweep time, updatedAt) an entry out and one in per write; the
// feed one entry per write, however many events it made.
func TestAPublishedJobWritesNarrowIndexEntries(t *testing.T) {
	t.Parallel()
	env := awstest.Provision(t)
	counter := awsclient.NewCounter()
	now := time.Now().UTC()
	st := store.New(dynamodb.NewFromConfig(counter.Attach(env.Config)), env.Res.Definition.Table.Name, func() time.Time { return now })
	ctx := context.Background()
	up := testfactory.Upload(t, st, testfactory.UploadOpts{})
	j := testfactory.Build(testfactory.JobOpts{Owner: up.Owner, UploadIDs: []string{up.ID}, At: now,
		Title: "A title as long as a user's title usually is"})
	j.Emit(job.EventEnqueued, now, nil)
	counter.Reset()
	if _, _, err := st.CreateJob(ctx, &j); err != nil {
		t.Fatal(err)
	}
	if _, err := j.Claim("publisher-1", now.Add(time.Minute), now); err != nil {
		t.Fatal(err)
	}
	j.StartPhase(publish.PhaseToken, "getting an access token", now)
	if err := st.ClaimJob(ctx, &j); err != nil {
		t.Fatal(err)
	}
	j.CompletePhase(publish.PhaseToken, "access token ready", now)
	j.CompletePhase(publish.PhaseDownload, "1 of 1 items", now)
	j.CompletePhase(publish.PhaseUpload, "1 of 1 items", now)
	j.Emit(job.EventProgress, now, map[string]string{"phase": publish.PhaseUpload, "items": "1 of 1 items"})
	j.Items[0].Status, j.Items[0].StashItemID = job.ItemPublished, 1234567
	j.Items[0].Output = &job.Output{DeviationID: "0123456789ABCDEF", URL: "https://www.deviantart.com/someone/art/a-title-1234567890"}
	j.CompletePhase(publish.PhasePublish, "1 of 1 items", now)
	if err := j.Apply(job.Succeed, now); err != nil {
		t.Fatal(err)
	}
	if err := st.SaveJob(ctx, &j); err != nil {
		t.Fatal(err)
	}
	u := counter.Units()
	for ix, most := range map[string]float64{
		// Written once, in the submission's transaction.
		resources.IndexByTierCreated: 2, resources.IndexByTypeCreated: 2, resources.IndexByCreated: 2,
		// Put, then updated at the claim and the finish.
		resources.IndexByOwner: 3 * 2,
		// Put, then re-keyed (out and in) at the claim and the finish.
		resources.IndexByOwnerUpdated: 5 * 2, resources.IndexByStatusCreated: 5 * 2,
		// The same, and the upload's entry, which the job's reference on
		// it rewrites in the submission's transaction.
		resources.IndexBySweep: 6 * 2,
		// One entry per write with events, however many it made.
		resources.IndexByFeed: 3 * 2,
	} {
		if got := u["write "+ix]; got < 1 || got > most {
			t.Errorf("%s: %.1f write units for a published job, want 1–%.0f", ix, got, most)
		}
	}
	if got := u["write "+resources.IndexByErrorCreated]; got != 0 {
		t.Errorf("%s: %.1f write units for a job without an error, want 0", resources.IndexByErrorCreated, got)
	}
	t.Logf("write units of a published job: %v", u)

	// The feed's entry per write stands for every event of the write.
	var seqs []int64
	for n := range resources.FeedShards {
		evs, err := st.Feed(ctx, n, store.FeedTime(now.Add(-time.Minute)), 100)
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs {
			if ev.JobID == j.ID {
				seqs = append(seqs, ev.Seq)
			}
		}
	}
	if int64(len(seqs)) != j.EventSeq || !slices.IsSorted(seqs) {
		t.Errorf("the feed gave the job's events %v, want 1 to %d in order", seqs, j.EventSeq)
	}
}
