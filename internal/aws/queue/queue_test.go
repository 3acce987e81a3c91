package queue_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/google/go-cmp/cmp"

	"github.com/conveyor/conveyor/internal/aws/awsclient"
	"github.com/conveyor/conveyor/internal/aws/queue"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/localstack/awstest"
)

func TestMain(m *testing.M) { awstest.Main(m) }

// received is what a consumer sees of one message.
type received struct {
	Body, Group, Dedup string
}

func receiveAll(t *testing.T, c *sqs.Client, url string) []received {
	t.Helper()
	var out []received
	for _, m := range awstest.ReceiveAll(t, c, url, 60) {
		out = append(out, received{aws.ToString(m.Body), m.Attributes["MessageGroupId"], m.Attributes["MessageDeduplicationId"]})
	}
	return out
}

// TestSendGroupsEachSendApart: every send of a job is its own message
// group with its own deduplication id — a repeat of the same send is
// dropped, a later send (recovery's) is not — and a webhook delivery is
// deduplicated by its delivery id. The body carries ids only.
func TestSendGroupsEachSendApart(t *testing.T) {
	t.Parallel()
	env := awstest.Provision(t)
	s := queue.NewSender(env.Clients.SQS, env.Res.QueueURLs, queue.Fairness{})
	ctx := context.Background()
	const id = "job_aaaaaaaaaaaaaaaaaaaaaaaaaa"
	for _, m := range []queue.Message{
		{Kind: queue.KindPublish, JobID: id, Send: 1},
		{Kind: queue.KindPublish, JobID: id, Send: 1}, // a retried SendMessage
		{Kind: queue.KindPublish, JobID: id, Send: 2},
	} {
		if err := s.Send(ctx, job.Medium, m); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Send(ctx, job.System, queue.Message{Kind: queue.KindWebhook, JobID: id, DeliveryID: "dlv-1", Seq: 3}); err != nil {
		t.Fatal(err)
	}
	want := []received{
		{`{"kind":"publish","jobId":"` + id + `","send":1}`, id + "-1", id + "-1"},
		{`{"kind":"publish","jobId":"` + id + `","send":2}`, id + "-2", id + "-2"},
	}
	if diff := cmp.Diff(want, receiveAll(t, env.Clients.SQS, env.Res.QueueURLs[job.Medium])); diff != "" {
		t.Errorf("medium queue (-want +got):\n%s", diff)
	}
	wantSys := []received{{`{"kind":"webhook","jobId":"` + id + `","send":0,"deliveryId":"dlv-1","seq":3}`, "dlv-1", "dlv-1"}}
	if diff := cmp.Diff(wantSys, receiveAll(t, env.Clients.SQS, env.Res.QueueURLs[job.System])); diff != "" {
		t.Errorf("system queue (-want +got):\n%s", diff)
	}
	for _, tier := range []job.Tier{job.High, job.Low} {
		if got := receiveAll(t, env.Clients.SQS, env.Res.QueueURLs[tier]); len(got) != 0 {
			t.Errorf("tier %s received %d messages, want none", tier, len(got))
		}
	}
}

func TestSendToAnUnknownTierFails(t *testing.T) {
	t.Parallel()
	env := awstest.Provision(t)
	s := queue.NewSender(env.Clients.SQS, env.Res.QueueURLs, queue.Fairness{})
	err := s.Send(context.Background(), job.Tier("platinum"), queue.Message{Kind: queue.KindPublish, JobID: "job_x", Send: 1})
	if err == nil || !strings.Contains(err.Error(), "platinum") {
		t.Fatalf("err = %v, want one naming the tier", err)
	}
}

func TestDecode(t *testing.T) {
	t.Parallel()
	got, err := queue.Decode(`{"kind":"publish","jobId":"job_1","send":4,"extra":true}`)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(queue.Message{Kind: queue.KindPublish, JobID: "job_1", Send: 4}, got); diff != "" {
		t.Errorf("decode (-want +got):\n%s", diff)
	}
	for _, body := range []string{``, `not json`, `{"kind":"publish"}`, `{"jobId":""}`, `[1]`} {
		if _, err := queue.Decode(body); err == nil {
			t.Errorf("Decode(%q) accepted it", body)
		}
	}
	if queue.DedupID("job_1", 3) != "job_1-3" {
		t.Errorf("DedupID = %q", queue.DedupID("job_1", 3))
	}
}

// TestSendBatchSendsTenPerRequest: 24 webhook deliveries (one of them
// twice) go in three requests; each arrives once, in its own message group
// deduplicated by its delivery id, as Send would have put it. A tier
// without a queue fails every message and sends nothing.
func TestSendBatchSendsTenPerRequest(t *testing.T) {
	t.Parallel()
	env := awstest.Provision(t)
	counter := awsclient.NewCounter()
	s := queue.NewSender(awsclient.New(counter.Attach(env.Config)).SQS, env.Res.QueueURLs, queue.Fairness{})
	var msgs []queue.Message
	for i := range 23 {
		id := fmt.Sprintf("job_%026d", i)
		msgs = append(msgs, queue.Message{Kind: queue.KindWebhook, JobID: id, Seq: 4, DeliveryID: fmt.Sprintf("dlv_%s_4", id)})
	}
	msgs = append(msgs, msgs[5]) // the relay's retry of a delivery already queued
	for i, err := range s.SendBatch(context.Background(), job.System, msgs) {
		if err != nil {
			t.Errorf("message %d: %v", i, err)
		}
	}
	if got := counter.Snapshot(); got["SQS.SendMessageBatch"] != 3 || counter.Total() != 3 {
		t.Errorf("requests %v: want 3 SendMessageBatch", got)
	}
	got := receiveAll(t, env.Clients.SQS, env.Res.QueueURLs[job.System])
	if len(got) != 23 {
		t.Fatalf("%d messages arrived, want 23", len(got))
	}
	seen := map[string]bool{}
	for _, r := range got {
		m, err := queue.Decode(r.Body)
		if err != nil || r.Group != m.DeliveryID || r.Dedup != m.DeliveryID || seen[m.DeliveryID] {
			t.Errorf("message %+v (%v): want its own group and deduplication id, once", r, err)
		}
		seen[m.DeliveryID] = true
	}
	counter.Reset()
	errs := s.SendBatch(context.Background(), job.Tier("nowhere"), msgs[:3])
	if len(errs) != 3 || errs[0] == nil || errs[1] == nil || errs[2] == nil || counter.Total() != 0 {
		t.Errorf("an unknown tier: errors %v, %d requests", errs, counter.Total())
	}
}
