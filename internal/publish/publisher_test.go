package publish_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/conveyor/conveyor/internal/accounts"
	"github.com/conveyor/conveyor/internal/aws/awsclient"
	"github.com/conveyor/conveyor/internal/aws/bucket"
	"github.com/conveyor/conveyor/internal/aws/queue"
	"github.com/conveyor/conveyor/internal/aws/sealer"
	"github.com/conveyor/conveyor/internal/aws/store"
	"github.com/conveyor/conveyor/internal/clock"
	"github.com/conveyor/conveyor/internal/deviantart"
	"github.com/conveyor/conveyor/internal/handler"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/publish"
	"github.com/conveyor/conveyor/internal/retry"
	"github.com/conveyor/conveyor/internal/testfactory"
	"github.com/conveyor/conveyor/internal/worker"
	"github.com/conveyor/conveyor/localstack/awstest"
	"github.com/conveyor/conveyor/localstack/simulator"
)

// pubBundle is a run loop with the publish kind on the test's own table and bucket, the
// simulator as the external API, and jobs made by the factory: no HTTP API,
// no pollers.
type pubBundle struct {
	st     *store.Store
	sealer *sealer.Sealer
	// objects is the test's bucket.
	objects *bucket.Bucket
	sim     *simulator.Server
	clk     *clock.Simulated
	tokens  *accounts.Service
	pub     *worker.Worker
	// requests counts the publisher's AWS requests by operation.
	requests *awsclient.Counter
	// simURL, db and table: for a test that builds its own publisher.
	simURL string
	db     *dynamodb.Client
	table  string
}

func setupPublisher(t *testing.T) *pubBundle {
	t.Helper()
	env := awstest.Provision(t)
	quiet := slog.New(slog.NewJSONHandler(io.Discard, nil))
	requests := awsclient.NewCounter()
	counted := requests.Attach(env.Config)
	b := &pubBundle{clk: clock.NewSimulated(time.Now()), objects: bucket.New(counted, env.Res.Definition.Bucket.Name), requests: requests}
	b.st = store.New(awsclient.New(counted).DynamoDB, env.Res.Definition.Table.Name, b.clk.Now)
	b.sealer = sealer.New(kms.NewFromConfig(counted), env.Res.KMSKeyID)
	sim, url, stop, err := simulator.Start("127.0.0.1:0", simulator.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	b.sim, b.simURL, b.db, b.table = sim, url, env.Clients.DynamoDB, env.Res.Definition.Table.Name
	api, err := deviantart.New(deviantart.Config{BaseURL: url, ClientID: simulator.ClientIDDefault, ClientSecret: simulator.ClientSecretDefault, CallTimeout: 20 * time.Second, UploadRateMin: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	b.tokens = accounts.New(accounts.Config{Store: b.st, Sealer: b.sealer, Refresher: api, Now: b.clk.Now, Logger: quiet})
	b.pub = worker.New(worker.Config{Store: b.st,
		Policy: retry.Policy{Base: 2 * time.Second, Max: 15 * time.Minute, MaxAttempts: 7, ParkAfter: time.Minute}, Worker: "w-test", Now: b.clk.Now, Logger: quiet,
		Kinds: job.NewRegistry(publish.New(publish.Config{Store: b.st, Objects: b.objects, Tokens: b.tokens, API: api, Logger: quiet}))})
	return b
}

// job makes a connected owner's queued job of n items whose images are in
// the bucket.
func (b *pubBundle) job(t *testing.T, tier job.Tier, n int) job.Job {
	t.Helper()
	owner := testfactory.Owner()
	testfactory.Account(t, b.st, testfactory.AccountOpts{Owner: owner, Sealer: b.sealer, At: b.clk.Now()})
	return b.jobOf(t, owner, tier, n)
}

// jobOf makes owner's queued job of n items whose images are in the bucket.
func (b *pubBundle) jobOf(t *testing.T, owner string, tier job.Tier, n int) job.Job {
	t.Helper()
	return b.jobWith(t, testfactory.JobOpts{Owner: owner, Tier: tier, At: b.clk.Now()}, n)
}

// jobWith makes the job opts describe, of n items whose images are in the
// bucket, on new uploads of opts.Owner.
func (b *pubBundle) jobWith(t *testing.T, opts testfactory.JobOpts, n int) job.Job {
	t.Helper()
	for i := range n {
		img := pngOf(t, 4+i)
		u := testfactory.Upload(t, b.st, testfactory.UploadOpts{Owner: opts.Owner, Size: int64(len(img)), At: b.clk.Now()})
		if _, err := b.objects.Put(context.Background(), u.Key, bytes.NewReader(img), bucket.Headers{ContentType: "image/png"}); err != nil {
			t.Fatal(err)
		}
		opts.UploadIDs = append(opts.UploadIDs, u.ID)
	}
	return testfactory.Job(t, b.st, opts)
}

func pngOf(t *testing.T, n int) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, n, n))
	img.Set(0, 0, color.RGBA{G: 200, A: 255})
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func (b *pubBundle) get(t *testing.T, id string) job.Job {
	t.Helper()
	j, err := b.st.GetJob(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// TestPublisherRunsAFactoryJob: a factory job runs to PUBLISHED, every item
// with its own output; a second delivery of the same message publishes
// nothing more.
func TestPublisherRunsAFactoryJob(t *testing.T) {
	t.Parallel()
	b := setupPublisher(t)
	ctx := context.Background()
	j := b.job(t, job.Medium, 2)
	v, err := b.pub.Run(ctx, worker.Delivery{JobID: j.ID, Receives: 1})
	if err != nil || !v.Done {
		t.Fatalf("run: %+v, %v", v, err)
	}
	got := b.get(t, j.ID)
	if got.Status != job.Succeeded || got.Attempts != 1 || got.Progress != 100 {
		t.Fatalf("job: status %s attempts %d progress %d; want succeeded, 1, 100", got.Status, got.Attempts, got.Progress)
	}
	for i, it := range got.Items {
		if it.Status != job.ItemPublished || it.Output == nil || it.Output.DeviationID == "" {
			t.Errorf("item %d: %s %+v", i, it.Status, it.Output)
		}
	}
	if n := len(b.sim.Publications()); n != 2 {
		t.Fatalf("publications = %d, want 2", n)
	}
	v, err = b.pub.Run(ctx, worker.Delivery{JobID: j.ID, Receives: 2})
	if err != nil || !v.Done {
		t.Fatalf("second delivery: %+v, %v", v, err)
	}
	if n := len(b.sim.Publications()); n != 2 {
		t.Errorf("a second delivery published again: %d publications", n)
	}
}

// TestPublisherParksAPausedTiersJob: the claim meets the pause; the job
// waits in the table without spending an attempt, and nothing reaches the
// external API.
func TestPublisherParksAPausedTiersJob(t *testing.T) {
	t.Parallel()
	b := setupPublisher(t)
	ctx := context.Background()
	j := b.job(t, job.Low, 1)
	if _, err := b.st.SetTierPaused(ctx, job.Low, true, "op"); err != nil {
		t.Fatal(err)
	}
	v, err := b.pub.Run(ctx, worker.Delivery{JobID: j.ID, Receives: 1})
	if err != nil || !v.Done {
		t.Fatalf("run: %+v, %v; want the message let go", v, err)
	}
	got := b.get(t, j.ID)
	if got.Status != job.Queued || got.Waiting != "paused" || got.Attempts != 0 {
		t.Errorf("job: status %s waiting %q attempts %d; want queued, paused, 0", got.Status, got.Waiting, got.Attempts)
	}
	if n := len(b.sim.Publications()); n != 0 {
		t.Errorf("publications = %d, want none", n)
	}
}

// TestPublisherLeavesFinishedAndLeasedJobs: a message for a job that is
// cancelled, or running under another worker's live lease, is let go
// without touching the job.
func TestPublisherLeavesFinishedAndLeasedJobs(t *testing.T) {
	t.Parallel()
	b := setupPublisher(t)
	ctx := context.Background()
	now := b.clk.Now()
	cancelled := testfactory.Job(t, b.st, testfactory.JobOpts{Status: job.Cancelled, At: now})
	until := now.Add(time.Minute)
	leased := testfactory.Job(t, b.st, testfactory.JobOpts{Status: job.Running, Attempts: 1, LeaseOwner: "w-other", LeaseUntil: &until, At: now})
	for name, j := range map[string]job.Job{"cancelled": cancelled, "leased": leased} {
		v, err := b.pub.Run(ctx, worker.Delivery{JobID: j.ID, Receives: 1})
		if err != nil || !v.Done {
			t.Errorf("%s: %+v, %v; want the message let go", name, v, err)
		}
		if got := b.get(t, j.ID); got.Version != j.Version {
			t.Errorf("%s: the job was written (version %d → %d)", name, j.Version, got.Version)
		}
	}
	if v, err := b.pub.Run(ctx, worker.Delivery{JobID: "job_aaaaaaaaaaaaaaaaaaaaaaaaaa"}); err != nil || !v.Done {
		t.Errorf("unknown job: %+v, %v", v, err)
	}
	if n := len(b.sim.Publications()); n != 0 {
		t.Errorf("publications = %d, want none", n)
	}
}

// TestMessageWithTheOwnerReadsJobAndAccountOnce: a message that names the
// job's owner gets the job and the account in one BatchGetItem, and the
// token phase reads nothing more once the account holds a valid access
// token (after its owner's first job refreshed it); the job publishes as
// usual. Its AWS requests are those four: that read, the claim, the
// image's GetObject and the finishing write — no lease check before the
// upload or the publication, since the run's claim saw the job running
// under its lease moments before (worker.Config.CancelNotice). A message
// whose owner is not the job's owner gets no account: the token phase
// reads the job owner's own.
func TestMessageWithTheOwnerReadsJobAndAccountOnce(t *testing.T) {
	t.Parallel()
	b := setupPublisher(t)
	ctx := context.Background()
	// run runs one delivery and returns the DynamoDB requests it made.
	run := func(id, owner string) map[string]int {
		t.Helper()
		b.requests.Reset()
		v, err := b.pub.Run(ctx, worker.Delivery{JobID: id, Receives: 1, Owner: owner})
		if err != nil || !v.Done {
			t.Fatalf("run: %+v, %v", v, err)
		}
		made := b.requests.Snapshot()
		if got := b.get(t, id); got.Status != job.Succeeded {
			t.Fatalf("job %s, want succeeded", got.Status)
		}
		return made
	}
	first, firstB := b.job(t, job.High, 1), b.job(t, job.High, 1)
	run(first.ID, first.Owner) // refreshes the token
	run(firstB.ID, firstB.Owner)

	j := b.jobOf(t, first.Owner, job.High, 1)
	made := run(j.ID, j.Owner)
	want := map[string]int{"DynamoDB.BatchGetItem": 1, "DynamoDB.TransactWriteItems": 2, "S3.GetObject": 1}
	if diff := cmp.Diff(want, made, cmpopts.IgnoreMapEntries(func(op string, _ int) bool {
		return op == "DynamoDB.Query" // the breaker's cache fill, once per instance and period
	})); diff != "" {
		t.Errorf("AWS requests of one run (-want +got):\n%s", diff)
	}

	other := b.jobOf(t, firstB.Owner, job.High, 1)
	if n := run(other.ID, first.Owner)["DynamoDB.GetItem"]; n != 1 {
		t.Errorf("GetItem requests = %d, want 1 (the job's own owner's account)", n)
	}
}

// grouped is a queue message and the message group it was sent to.
type grouped struct {
	msg   queue.Message
	group string
}

// consume hands msgs to the publisher function's handler as one batch of
// the event source mapping (message ids m0, m1, …), with b's run loop.
func (b *pubBundle) consume(t *testing.T, msgs []grouped) events.SQSEventResponse {
	t.Helper()
	var ev events.SQSEvent
	for i, m := range msgs {
		body, err := json.Marshal(m.msg)
		if err != nil {
			t.Fatal(err)
		}
		ev.Records = append(ev.Records, events.SQSMessage{MessageId: fmt.Sprint("m", i), Body: string(body),
			Attributes: map[string]string{"MessageGroupId": m.group, "ApproximateReceiveCount": "1"}})
	}
	quiet := slog.New(slog.NewJSONHandler(io.Discard, nil))
	resp, err := handler.PublisherHandler(b.pub, nil, handler.NewQueueURLs(), quiet)(context.Background(), ev)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// TestABatchReadsItsJobsInOneRequest: the jobs of a batch whose runs start
// side by side (the first message of each group) are read, each with its
// owner's account and its uploads, in one BatchGetItem for the batch, not
// one per job; a later message of a group reads its own job, since it runs
// only after the message before it; a message for a job that does not
// exist is dropped as before.
func TestABatchReadsItsJobsInOneRequest(t *testing.T) {
	t.Parallel()
	b := setupPublisher(t)
	ctx := context.Background()
	first, second := b.job(t, job.High, 1), b.job(t, job.High, 2)
	for _, j := range []job.Job{first, second} { // the owners' tokens refreshed
		if v, err := b.pub.Run(ctx, worker.Delivery{JobID: j.ID, Owner: j.Owner, Receives: 1}); err != nil || !v.Done {
			t.Fatalf("run: %+v, %v", v, err)
		}
	}
	jobs := []job.Job{b.jobOf(t, first.Owner, job.High, 1), b.jobOf(t, second.Owner, job.High, 2), b.jobOf(t, first.Owner, job.High, 1)}
	behind := b.jobOf(t, second.Owner, job.High, 1)
	var batch []grouped
	for _, j := range jobs {
		batch = append(batch, grouped{queue.ForJob(j), j.ID})
	}
	batch = append(batch, grouped{queue.ForJob(behind), jobs[0].ID}, // second in the first job's group
		grouped{queue.Message{Kind: queue.KindJob, JobID: "job_missing", Owner: first.Owner}, "job_missing"})

	b.requests.Reset()
	if resp := b.consume(t, batch); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("batch failures: %+v", resp.BatchItemFailures)
	}
	made := b.requests.Snapshot()
	for _, j := range append(jobs, behind) {
		if got := b.get(t, j.ID); got.Status != job.Succeeded || got.Attempts != 1 {
			t.Errorf("job %s: %s after %d attempts, want succeeded after 1", j.ID, got.Status, got.Attempts)
		}
	}
	// One read for the four runs that started at once, one for the run
	// behind the first; no account read apart (GetItem): each came with
	// its job.
	if made["DynamoDB.BatchGetItem"] != 2 || made["DynamoDB.GetItem"] != 0 {
		t.Errorf("reads of a batch of six messages in five groups: %d BatchGetItem, %d GetItem; want 2 and 0 (%v)",
			made["DynamoDB.BatchGetItem"], made["DynamoDB.GetItem"], made)
	}
}

// TestAnUnreadableJobFailsOnlyItsOwnMessage: a batch whose read finds one
// job that does not decode runs its other jobs from that one read; the
// unreadable job's message comes back (reported failed) and nothing is
// written to it.
func TestAnUnreadableJobFailsOnlyItsOwnMessage(t *testing.T) {
	t.Parallel()
	b := setupPublisher(t)
	ctx := context.Background()
	good, bad := b.job(t, job.High, 1), b.job(t, job.High, 1)
	if _, err := b.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: &b.table,
		Key:                       map[string]ddbtypes.AttributeValue{"pk": &ddbtypes.AttributeValueMemberS{Value: "JOB#" + bad.ID}, "sk": &ddbtypes.AttributeValueMemberS{Value: "JOB"}},
		UpdateExpression:          aws.String("SET jobZ = :z"),
		ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":z": &ddbtypes.AttributeValueMemberB{Value: []byte("not a job")}},
	}); err != nil {
		t.Fatal(err)
	}
	b.requests.Reset()
	resp := b.consume(t, []grouped{{queue.ForJob(good), good.ID}, {queue.ForJob(bad), bad.ID}})
	if len(resp.BatchItemFailures) != 1 || resp.BatchItemFailures[0].ItemIdentifier != "m1" {
		t.Errorf("failures %+v, want the unreadable job's message (m1) only", resp.BatchItemFailures)
	}
	if got := b.get(t, good.ID); got.Status != job.Succeeded {
		t.Errorf("the readable job: %s, want succeeded", got.Status)
	}
	if n := b.requests.Get("DynamoDB.BatchGetItem"); n != 1 {
		t.Errorf("%d BatchGetItem, want the batch's one", n)
	}
}

// TestALapsedLastAttemptIsNotRunAgain: a job whose last allowed run
// stopped without recording its outcome (its worker died: running, lease
// lapsed, every attempt spent) fails `stuck` (retryable) when its message
// comes back, as recovery fails such a job; it is not claimed for an
// attempt beyond maxAttempts, and the API hears nothing.
func TestALapsedLastAttemptIsNotRunAgain(t *testing.T) {
	t.Parallel()
	b := setupPublisher(t)
	ctx := context.Background()
	owner := testfactory.Owner()
	testfactory.Account(t, b.st, testfactory.AccountOpts{Owner: owner, Sealer: b.sealer, At: b.clk.Now()})
	lapsed := b.clk.Now().Add(-time.Minute)
	j := b.jobWith(t, testfactory.JobOpts{Owner: owner, Tier: job.High, At: b.clk.Now().Add(-time.Hour),
		Status: job.Running, Attempts: 7, MaxAttempts: 7, LeaseOwner: "w-dead", LeaseUntil: &lapsed}, 1)
	v, err := b.pub.Run(ctx, worker.Delivery{JobID: j.ID, Owner: owner, Receives: 2})
	if err != nil || !v.Done {
		t.Fatalf("run: %+v, %v", v, err)
	}
	got := b.get(t, j.ID)
	if got.Status != job.Failed || got.Attempts != 7 || got.Error == nil || got.Error.Code != "stuck" || !got.Error.Retryable {
		t.Errorf("job: %s after %d of %d attempts, error %+v; want failed stuck (retryable) after 7", got.Status, got.Attempts, got.MaxAttempts, got.Error)
	}
	if calls := b.sim.Stats().Calls; len(calls["/api/v1/oauth2/stash/submit"])+len(calls["/api/v1/oauth2/stash/publish"]) != 0 {
		t.Errorf("the API heard of a job whose attempts were spent: %v", calls)
	}
}
