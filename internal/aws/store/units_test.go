package store_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/conveyor/conveyor/internal/aws/awsclient"
	"github.com/conveyor/conveyor/internal/aws/store"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/publish"
	"github.com/conveyor/conveyor/internal/resources"
	"github.com/conveyor/conveyor/internal/testfactory"
	"github.com/conveyor/conveyor/localstack/awstest"
)

// TestAPublishedJobWritesNarrowIndexEntries follows one published job's
// writes as the pipeline makes them — the submission's transaction, the
// claim's, the finish's with its events — and reads the write units per
// index, each transaction priced by DynamoDB's rules (awsclient.TxPricer:
// DynamoDB Local counts a transaction's items of equal size once, and
// doubles index entries that DynamoDB does not): every index entry is one
// unit (a few hundred bytes, not the job), in a transaction as outside
// one. The indexes that do not
// carry the job's status are written once, when the job is created; the
// owner's creation index only when the status changes; the re-keyed ones
// (status, sweep time, updatedAt) an entry out and one in per write; the
// feed one entry per write, however many events it made.
func TestAPublishedJobWritesNarrowIndexEntries(t *testing.T) {
	t.Parallel()
	env := awstest.Provision(t)
	counter := awsclient.NewCounter()
	counter.PriceTransactions(awsclient.NewTxPricer(dynamodb.NewFromConfig(env.Config)))
	now := time.Now().UTC()
	st := store.New(dynamodb.NewFromConfig(counter.Attach(env.Config)), env.Res.Definition.Table.Name, func() time.Time { return now })
	// The owner's active jobs are counted, as under the default quotas.
	st.SetActiveQuota(func(string, string) int { return 10000 })
	ctx := context.Background()
	up := testfactory.Upload(t, st, testfactory.UploadOpts{})
	j := testfactory.Build(testfactory.JobOpts{Owner: up.Owner, UploadIDs: []string{up.ID}, At: now,
		Title: "A title as long as a user's title usually is"})
	j.Emit(job.EventEnqueued, now, nil)
	counter.Reset()
	// Each write leaves the job item under the 1 KB of one write unit
	// (compact: its phases, items and params in jobZ).
	var sizes []int
	size := func() {
		t.Helper()
		res, err := env.Clients.DynamoDB.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(env.Res.Definition.Table.Name),
			Key: map[string]types.AttributeValue{resources.AttrPK: &types.AttributeValueMemberS{Value: "JOB#" + j.ID},
				resources.AttrSK: &types.AttributeValueMemberS{Value: "JOB"}}, ConsistentRead: aws.Bool(true)})
		if err != nil {
			t.Fatal(err)
		}
		sizes = append(sizes, awsclient.ItemSize(res.Item))
	}
	if _, _, err := st.CreateJob(ctx, &j); err != nil {
		t.Fatal(err)
	}
	size()
	if _, err := j.Claim("publisher-1", now.Add(time.Minute), now); err != nil {
		t.Fatal(err)
	}
	j.StartPhase(publish.PhaseToken, "getting an access token", now)
	if err := st.ClaimJob(ctx, &j); err != nil {
		t.Fatal(err)
	}
	size()
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
	size()
	u := counter.Units()
	for i, n := range sizes {
		if n >= 1024 {
			t.Errorf("the job item after write %d: %d bytes, want under 1 KB", i+1, n)
		}
	}
	t.Logf("the job item after each write: %v bytes; the table: %.1f write units", sizes, u["write table"])
	// The table: each of the three writes is a transaction (2 units per KB
	// of each item), and holds one event item however many events it made:
	// the job (under 1 KB at each write), its event item, and the
	// submission's idempotency record, upload reference and account check,
	// the claim's tier check, the finish's hourly counter. An item per event
	// made the finish's six events cost 12 units where one item costs 2; a
	// job item with every attribute (2 KB once the claim stored its items'
	// descriptions) 26 units where a compact one costs 20. The owner's
	// active-jobs counter adds 2 to the submission and 2 to the finish.
	if got, most := u["write table"], 2.0*(1+1+1+1+1+1)+2*(1+1+1)+2*(1+1+1+1); got > most {
		t.Errorf("table: %.1f write units for a published job, want at most %.0f", got, most)
	}
	for ix, most := range map[string]float64{
		// Written once, in the submission's transaction.
		resources.IndexByTierCreated: 1, resources.IndexByTypeCreated: 1, resources.IndexByCreated: 1,
		// Put, then updated at the claim and the finish.
		resources.IndexByOwner: 3,
		// Put, then re-keyed (out and in) at the claim and the finish.
		resources.IndexByOwnerUpdated: 5, resources.IndexByStatusCreated: 5,
		// The same, and the upload's entry, which the job's reference on
		// it rewrites in the submission's transaction.
		resources.IndexBySweep: 6,
		// One entry per write with events, however many it made.
		resources.IndexByFeed: 3,
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

	// Retention, days later: the stale sweep's one transaction (the job
	// stale, its job.stale event, the upload's release) and the media
	// sweep's expiry of the upload. The job leaves the sweep index, its
	// status indexes are re-keyed once more.
	counter.Reset()
	later := now.Add(8 * 24 * time.Hour)
	if _, err := st.StaleJob(ctx, j, later, func(cur *job.Job) error { return cur.Apply(job.Expire, later) }); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := st.ExpireUpload(ctx, up.ID, later, time.Hour); err != nil || !ok {
		t.Fatalf("expiring the upload: %v, %v", ok, err)
	}
	r := counter.Units()
	t.Logf("write units of its retention: %v", r)
	// The table: the job (1 KB) and its event item, doubled, and the
	// upload's release in the transaction; the upload's expiry.
	if got, most := r["write table"], 2.0*(1+1+1)+1; got > most {
		t.Errorf("retention, table: %.1f write units, want at most %.0f", got, most)
	}
	if got, most := r["write"]-r["write table"], 9.0; got > most {
		t.Errorf("retention, indexes: %.1f write units, want at most %.0f", got, most)
	}
}

// TestAWriteOfManyEventsIsOneItem: the finish's events (its phases, its
// progress, its outcome) are one item, read back as events one by one —
// by the job's event log, by sequence (a middle one and the last), and
// with the job in one read for a webhook delivery.
func TestAWriteOfManyEventsIsOneItem(t *testing.T) {
	t.Parallel()
	env := awstest.Provision(t)
	now := time.Now().UTC()
	st := store.New(dynamodb.NewFromConfig(env.Config), env.Res.Definition.Table.Name, func() time.Time { return now })
	ctx := context.Background()
	j := testfactory.Build(testfactory.JobOpts{Owner: "usr_many", At: now})
	j.Emit(job.EventEnqueued, now, nil)
	if _, _, err := st.CreateJob(ctx, &j); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"a", "b", "c"} {
		j.Emit(job.EventProgress, now, map[string]string{"phase": p})
	}
	if err := j.Apply(job.Cancel, now); err != nil {
		t.Fatal(err)
	}
	if err := st.SaveJob(ctx, &j); err != nil {
		t.Fatal(err)
	}
	if j.EventSeq != 5 {
		t.Fatalf("event sequence %d after five events", j.EventSeq)
	}
	evs, err := st.Events(ctx, j.ID, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for i, ev := range evs {
		if ev.Seq != int64(i+1) || ev.Job == "" || ev.Owner != j.Owner {
			t.Errorf("event %d: %+v", i+1, ev)
		}
		kinds = append(kinds, ev.Type)
	}
	want := []string{job.EventEnqueued, job.EventProgress, job.EventProgress, job.EventProgress, job.EventCancelled}
	if !slices.Equal(kinds, want) {
		t.Errorf("events %v, want %v", kinds, want)
	}
	if evs, err := st.Events(ctx, j.ID, 3, 1); err != nil || len(evs) != 1 || evs[0].Seq != 4 {
		t.Errorf("one event after 3: %v, %v", evs, err)
	}
	for _, seq := range []int64{3, 5} {
		ev, err := st.GetEvent(ctx, j.ID, seq)
		if err != nil || ev.Seq != seq || ev.Type != want[seq-1] {
			t.Errorf("event %d: %+v, %v", seq, ev, err)
		}
		ev, got, _, err := st.GetEventAndJob(ctx, j.ID, seq)
		if err != nil || ev.Seq != seq || got == nil || got.ID != j.ID {
			t.Errorf("event %d with its job: %+v, %v, %v", seq, ev, got, err)
		}
	}
	if _, err := st.GetEvent(ctx, j.ID, 6); err != store.ErrNotFound {
		t.Errorf("event 6 of 5: %v, want ErrNotFound", err)
	}
}

// TestEventItemsOfOneEventAreReadAsBefore: a table written before a write's
// events shared one item holds an item per event, the write's last in the
// feed naming the first (feedFrom). The event log, GetEvent and the feed
// read them as they read one item per write.
func TestEventItemsOfOneEventAreReadAsBefore(t *testing.T) {
	t.Parallel()
	env := awstest.Provision(t)
	db := dynamodb.NewFromConfig(env.Config)
	table := env.Res.Definition.Table.Name
	now := time.Now().UTC().Truncate(time.Millisecond)
	st := store.New(db, table, func() time.Time { return now })
	ctx := context.Background()
	const id = "job_oldeventitemsaaaaaaaaaaaa"
	s := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	for seq, typ := range map[int]string{1: job.EventProgress, 2: job.EventSucceeded} {
		at := now.Add(time.Duration(seq) * time.Millisecond)
		item := map[string]types.AttributeValue{
			resources.AttrPK: s("JOB#" + id), resources.AttrSK: s(fmt.Sprintf("%s%012d", resources.EventSKPrefix, seq)),
			"jobId": s(id), "eventOwner": s("usr_old"), "seq": &types.AttributeValueMemberN{Value: strconv.Itoa(seq)},
			"type": s(typ), "at": s(at.Format(time.RFC3339Nano)), "tier": s("low"), "job": s(`{"id":"` + id + `"}`),
		}
		if seq == 2 {
			// The write's last item stands for both in the feed.
			item[resources.AttrFeedKey] = s("feed#0")
			item[resources.AttrFeedAt] = s(store.FeedKey(store.EventRecord{JobID: id, Seq: 2, At: at}))
			item[resources.AttrFeedFrom] = &types.AttributeValueMemberN{Value: "1"}
		}
		if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: item}); err != nil {
			t.Fatal(err)
		}
	}
	evs, err := st.Events(ctx, id, 0, 10)
	if err != nil || len(evs) != 2 || evs[0].Seq != 1 || evs[1].Seq != 2 || evs[1].Job == "" {
		t.Errorf("the event log: %+v, %v", evs, err)
	}
	if ev, err := st.GetEvent(ctx, id, 1); err != nil || ev.Type != job.EventProgress {
		t.Errorf("event 1: %+v, %v", ev, err)
	}
	feed, err := st.Feed(ctx, 0, store.FeedTime(now.Add(-time.Minute)), 100)
	var seqs []int64
	for _, ev := range feed {
		if ev.JobID == id {
			seqs = append(seqs, ev.Seq)
		}
	}
	if err != nil || !slices.Equal(seqs, []int64{1, 2}) {
		t.Errorf("the feed gave %v (%v), want 1 and 2", seqs, err)
	}
}
