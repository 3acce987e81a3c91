package recovery_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/conveyor/conveyor/internal/aws/queue"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/resources"
	"github.com/conveyor/conveyor/internal/worker"
)

// deliverOne receives one message of tier's queue (the oldest the queue
// hands out), runs it as the consumer would and deletes it when done; it
// reports whether there was one.
func (b *bundle) deliverOne(tier job.Tier) bool {
	b.T.Helper()
	ctx := context.Background()
	url := b.Stack.Config.QueueURLs[tier]
	r, err := b.Stack.App.Clients.SQS.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 1, VisibilityTimeout: 30})
	if err != nil {
		b.T.Fatal(err)
	}
	if len(r.Messages) == 0 {
		return false
	}
	m := r.Messages[0]
	msg, err := queue.Decode(aws.ToString(m.Body))
	if err != nil {
		b.T.Fatal(err)
	}
	v, err := b.Stack.App.Publisher.Run(ctx, worker.Delivery{JobID: msg.JobID, Owner: msg.Owner, Uploads: msg.Uploads, Receives: 1})
	if err != nil {
		b.T.Fatalf("delivery of %s: %v", msg.JobID, err)
	}
	if !v.Done {
		b.T.Fatalf("delivery of %s not done: %+v", msg.JobID, v)
	}
	if _, err := b.Stack.App.Clients.SQS.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: m.ReceiptHandle}); err != nil {
		b.T.Fatal(err)
	}
	return true
}

// deliverAll delivers tier's messages until the queue holds none, visible,
// in flight or delayed. An empty receive is not the end: under load a
// receive the SDK gave up on and retried can leave a message in flight,
// its group locked until the visibility timeout (30 s) passes, so the
// queue's own counts decide, not the first empty answer. Three minutes
// with messages left is a hang.
func (b *bundle) deliverAll(tier job.Tier) {
	b.T.Helper()
	url := b.Stack.Config.QueueURLs[tier]
	for deadline := time.Now().Add(3 * time.Minute); ; {
		if b.deliverOne(tier) {
			continue
		}
		out, err := b.Stack.App.Clients.SQS.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{
			QueueUrl: aws.String(url),
			AttributeNames: []sqstypes.QueueAttributeName{
				sqstypes.QueueAttributeNameApproximateNumberOfMessages,
				sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
				sqstypes.QueueAttributeNameApproximateNumberOfMessagesDelayed,
			},
		})
		if err != nil {
			b.T.Fatal(err)
		}
		left := out.Attributes
		if left["ApproximateNumberOfMessages"] == "0" && left["ApproximateNumberOfMessagesNotVisible"] == "0" && left["ApproximateNumberOfMessagesDelayed"] == "0" {
			return
		}
		if time.Now().After(deadline) {
			b.T.Fatalf("tier %s still holds messages after 3 minutes of delivering: %v", tier, left)
		}
		time.Sleep(time.Second)
	}
}

// recoverEvery is how often the definition schedules recovery's stuck
// sweep (five minutes): the scenarios below run it as often, not every
// simulated minute, which is what AWS does and a fifth of the requests.
func recoverEvery(t *testing.T) int {
	t.Helper()
	for _, s := range resources.For(job.Local).Schedules {
		if s.Task == resources.TaskRecover {
			return int(s.Interval / time.Minute)
		}
	}
	t.Fatal("the definition schedules no recovery run")
	return 0
}

// TestADrainingBacklogOlderThanStuckAfterIsNotResent: one owner's 60 jobs
// in the queue drain at two a minute, so the last wait half an hour —
// longer than STUCK_AFTER (20m). Their messages are all in the queue and
// moving, so recovery, running every five minutes as scheduled, sends none of them again (a
// re-send would double the owner's messages: each a receive and a read
// for nothing, and work the tier's consumers do for one owner while the
// others wait); it reports them as behind. Every job publishes once. A
// message that really is lost is still re-sent: TestStoredButNeverSentIsSent
// and TestRunRescuesWhatIsStuckAndOnlyThat.
func TestADrainingBacklogOlderThanStuckAfterIsNotResent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	const n = 60
	ids := make([]string, n)
	for i := range ids {
		ids[i] = b.submit(nil)
	}
	tier := b.job(ids[0]).Tier
	requeued, behind, every := 0, 0, recoverEvery(t)
	for minute := 1; minute <= n/2+5; minute++ {
		b.clk.Advance(time.Minute)
		for range 2 {
			b.deliverOne(tier)
		}
		if minute%every != 0 {
			continue
		}
		res, err := b.Stack.App.Recoverer.Run(ctx)
		if err != nil {
			t.Fatal(err)
		}
		requeued += res.Requeued
		behind += res.Behind
	}
	b.deliverAll(tier)
	if requeued != 0 {
		t.Errorf("recovery re-sent %d messages of a backlog that was draining, want none", requeued)
	}
	if behind == 0 {
		t.Errorf("no job was found behind its owner's moving messages: the backlog never waited past STUCK_AFTER, so the test shows nothing")
	}
	for _, id := range ids {
		if j := b.job(id); j.Status != job.Succeeded || j.Resends != 0 || j.Enqueues != 1 {
			t.Errorf("job %s: %s, resends %d, enqueues %d; want succeeded from its one message", id, j.Status, j.Resends, j.Enqueues)
		}
	}
	if got := len(b.Stack.Simulator.Publications()); got != n {
		t.Errorf("%d publications, want %d", got, n)
	}
	t.Logf("over %d minutes: %d re-sent, %d found behind their owner's moving messages", n/2+5, requeued, behind)
}

// TestALostMessageAmongMovingOnesIsResent: one job's message is lost (taken
// off the queue unrun) while its owner keeps submitting, two jobs a
// minute, each delivered at once: the owner's messages move all along, so
// "nothing moved for STUCK_AFTER" never holds. The lost job is re-sent all
// the same once jobs queued more than STUCK_AFTER after it have run (a FIFO
// delivery of the owner's slots would not pass its message by that much),
// and it publishes once.
func TestALostMessageAmongMovingOnesIsResent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	lost := b.submit(nil)
	tier := b.job(lost).Tier
	if n := b.drain(tier); n != 1 {
		t.Fatalf("%d messages, want the lost job's one", n)
	}
	resentAt, every := 0, recoverEvery(t)
	for minute := 1; minute <= 45 && resentAt == 0; minute++ {
		b.clk.Advance(time.Minute)
		b.submit(nil)
		b.submit(nil)
		// Every passing job runs within its minute: a queue left with
		// some (an empty receive under load) reads to the sweep as a
		// backlog still draining, and the lost job waits behind it.
		b.deliverAll(tier)
		if minute%every != 0 {
			continue
		}
		res, err := b.Stack.App.Recoverer.Run(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if res.Requeued > 0 {
			resentAt = minute
		}
	}
	b.deliverAll(tier)
	j := b.job(lost)
	if resentAt == 0 || j.Status != job.Succeeded || j.Enqueues != 2 {
		t.Fatalf("lost job: re-sent at minute %d, %s from %d messages; want re-sent, then succeeded", resentAt, j.Status, j.Enqueues)
	}
	if resentAt > 30 {
		t.Errorf("re-sent at minute %d, want within STUCK_AFTER (20m) and the passing jobs' runs", resentAt)
	}
	if got := len(b.Stack.Simulator.Publications()); got != 2*resentAt+1 {
		t.Errorf("%d publications, want %d (each job once)", got, 2*resentAt+1)
	}
	t.Logf("the lost job re-sent at minute %d", resentAt)
}
