package emulator_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/conveyor/conveyor/internal/aws/awsclient"
	"github.com/conveyor/conveyor/localstack/awstest"
	"github.com/conveyor/conveyor/localstack/emulator"
)

// startMoto starts moto the way every stack does (moto_server.py) and
// returns it, its SQS client, and its output.
func startMoto(t *testing.T) (*emulator.Process, *sqs.Client, *awstest.Buffer) {
	t.Helper()
	var log awstest.Buffer
	m, err := emulator.Start(context.Background(), emulator.Options{Log: &log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Stop() })
	return m, awsclient.New(awsclient.ForEndpoint(awsclient.Endpoints{Default: m.Endpoint}, "")).SQS, &log
}

// TestPatchedMotoAnswersAsMotoDoes starts moto the way every stack does
// (moto_server.py: its SQS hot paths made cheap) and checks that the patches
// took and that what they touch answers as stock moto and SQS do: the three
// approximate counts, a delayed message, an in-flight one, content-based
// deduplication on a FIFO queue, retention on receive.
func TestPatchedMotoAnswersAsMotoDoes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, c, log := startMoto(t)

	q, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("patched")})
	if err != nil {
		t.Fatal(err)
	}
	url := q.QueueUrl
	for i := range 4 {
		if _, err := c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: url, MessageBody: aws.String("m" + strconv.Itoa(i))}); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		if _, err := c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: url, MessageBody: aws.String("later"), DelaySeconds: 600}); err != nil {
			t.Fatal(err)
		}
	}
	got, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: url, MaxNumberOfMessages: 1, VisibilityTimeout: 600})
	if err != nil || len(got.Messages) != 1 {
		t.Fatalf("receive: %v, %d messages", err, len(got.Messages))
	}
	counts := func(url *string) map[string]string {
		t.Helper()
		a, err := c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: url, AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameAll}})
		if err != nil {
			t.Fatal(err)
		}
		return a.Attributes
	}
	a := counts(url)
	for name, want := range map[string]string{"ApproximateNumberOfMessages": "3", "ApproximateNumberOfMessagesDelayed": "2", "ApproximateNumberOfMessagesNotVisible": "1"} {
		if a[name] != want {
			t.Errorf("%s = %q, want %q (all: %v)", name, a[name], want, a)
		}
	}
	// One attribute by name goes through the same counts.
	one, err := c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: url, AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages}})
	if err != nil || one.Attributes["ApproximateNumberOfMessages"] != "3" {
		t.Errorf("ApproximateNumberOfMessages alone: %v, %v", one.Attributes, err)
	}

	fifo, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("patched.fifo"),
		Attributes: map[string]string{"FifoQueue": "true", "ContentBasedDeduplication": "true"}})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: fifo.QueueUrl, MessageBody: aws.String("same"), MessageGroupId: aws.String("g")}); err != nil {
			t.Fatal(err)
		}
	}
	if n := counts(fifo.QueueUrl)["ApproximateNumberOfMessages"]; n != "1" {
		t.Errorf("content-based deduplication kept %s messages, want 1", n)
	}

	// A message past the queue's retention period is not delivered.
	short, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("patched-retention"), Attributes: map[string]string{"MessageRetentionPeriod": "60"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: short.QueueUrl, MessageBody: aws.String("fresh")}); err != nil {
		t.Fatal(err)
	}
	if r, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: short.QueueUrl}); err != nil || len(r.Messages) != 1 {
		t.Errorf("a fresh message within retention: %v, %d messages", err, len(r.Messages))
	}

	if strings.Contains(log.String(), "conveyor moto patches") {
		t.Errorf("a patch did not apply:\n%s", log.String())
	}
}

// TestALongPollOnABusyFIFOGroupWaits: a long poll on a FIFO queue whose only
// visible message belongs to a group with a message in flight answers as SQS
// does — nothing at the end of its wait, the group's next message once the
// one in flight is deleted — and waits without spinning: stock moto's
// receive loop spins a core for the whole wait, so over a blocked two-second
// poll moto's processor time would be about the poll's length (a bound far
// above the patched wait's, so a loaded machine cannot fail it).
func TestALongPollOnABusyFIFOGroupWaits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	m, c, log := startMoto(t)
	q, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("busy.fifo"),
		Attributes: map[string]string{"FifoQueue": "true", "ContentBasedDeduplication": "true"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, body := range []string{"first", "second"} {
		if _, err := c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: q.QueueUrl, MessageBody: aws.String(body), MessageGroupId: aws.String("g")}); err != nil {
			t.Fatal(err)
		}
	}
	first, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: q.QueueUrl, MaxNumberOfMessages: 1, VisibilityTimeout: 600})
	if err != nil || len(first.Messages) != 1 || aws.ToString(first.Messages[0].Body) != "first" {
		t.Fatalf("first receive: %v, %+v", err, first)
	}

	before, err := m.CPUTime()
	if err != nil {
		t.Fatal(err)
	}
	blocked, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: q.QueueUrl, WaitTimeSeconds: 2})
	if err != nil || len(blocked.Messages) != 0 {
		t.Fatalf("a long poll while the group is in flight: %v, %d messages, want none", err, len(blocked.Messages))
	}
	after, err := m.CPUTime()
	if err != nil {
		t.Fatal(err)
	}
	if spent := after - before; spent > time.Second {
		t.Errorf("moto used %s of processor time over a blocked two-second poll: it spins", spent)
	}

	// The group freed: the next receive gets its next message. (A poll
	// already waiting does not see it in moto, which reads the groups in
	// flight once per receive; SQS would deliver it to that poll.)
	if _, err := c.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: q.QueueUrl, ReceiptHandle: first.Messages[0].ReceiptHandle}); err != nil {
		t.Fatal(err)
	}
	next, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: q.QueueUrl, WaitTimeSeconds: 5})
	if err != nil || len(next.Messages) != 1 || aws.ToString(next.Messages[0].Body) != "second" {
		t.Errorf("a receive once the group is freed: %v, %d messages, want the second message", err, len(next.Messages))
	}
	if strings.Contains(log.String(), "conveyor moto patches") {
		t.Errorf("a patch did not apply:\n%s", log.String())
	}
}
