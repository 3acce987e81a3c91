package stack_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/conveyor/conveyor/internal/aws/store"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/localstack/awstest"
	"github.com/conveyor/conveyor/localstack/stack"
)

// queueMessages is how many messages the tier queues hold in all (visible,
// in flight and delayed), as SQS says.
func queueMessages(t *testing.T, b *awstest.Bundle) int {
	t.Helper()
	n := 0
	for _, url := range b.Stack.Provisioned.QueueURLs {
		out, err := b.Stack.App.Clients.SQS.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url),
			AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages,
				sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible, sqstypes.QueueAttributeNameApproximateNumberOfMessagesDelayed}})
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range out.Attributes {
			k, _ := strconv.Atoi(v)
			n += k
		}
	}
	return n
}

// TestAnOwnersQueueDepthIsBounded: with CONVEYOR_OWNER_QUEUE_DEPTH=4 an
// owner's 40 jobs put at most 4 messages in the queue at any moment (SQS's
// own count, sampled throughout); the rest wait in the owner's backlog in
// the table and are admitted as the owner's jobs finish, until every one
// has succeeded, each called once. Another owner's job submitted after the
// backlog runs at once, ahead of it. Without the bound the queue held all
// 40.
func TestAnOwnersQueueDepthIsBounded(t *testing.T) {
	t.Parallel()
	const bound = 4
	target := newConcurrencyTarget(t, 100*time.Millisecond)
	b := awstest.Setup(t, map[string]string{"CONVEYOR_FAIR_SLOTS": "free=2", "CONVEYOR_OWNER_QUEUE_DEPTH": strconv.Itoa(bound),
		"CONVEYOR_SCHEDULE_INTERVAL": "300ms"}, stack.Options{})
	big, small := b.Token("u-deep", "user", "free"), b.Token("u-shallow", "user", "free")

	stop := make(chan struct{})
	var peak int
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			if n := queueMessages(t, b); n > peak {
				peak = n
			}
		}
	})
	ids := submitHTTP(b, big, "deep", target.URL, 40)
	backlogged := 0
	for _, id := range ids {
		if r := b.Must(b.Call("GET", "/v1/jobs/"+id, big, nil), 200); r.Body["wait"] != nil && r.Body["wait"].(map[string]any)["reason"] == "backlog" {
			backlogged++
		}
	}
	sid := submitHTTP(b, small, "shallow", target.URL, 1)[0]
	b.WaitStatus(small, sid, "succeeded")
	aheadOf := 0 // the deep owner's jobs not yet finished when the other's succeeded
	for _, id := range ids {
		if j, err := b.Stack.App.Store.GetJob(context.Background(), id); err == nil && j.Status != "succeeded" {
			aheadOf++
		}
	}
	// The backlog drains at the release sweep's pace (a few jobs a run):
	// on a loaded machine that takes longer than one wait.
	deadline := time.Now().Add(5 * time.Minute)
	for !allSucceeded(b, ids) {
		if time.Now().After(deadline) {
			t.Fatalf("the owner's backlog did not drain in 5 minutes")
		}
		time.Sleep(250 * time.Millisecond)
	}
	close(stop)
	wg.Wait()

	if most := store.DepthShards * store.ShardBound(bound); peak > most+1 { // the other owner's one message beside
		t.Errorf("the queues held %d messages at once, want at most the owner's bound of %d and the other owner's one", peak, most)
	}
	if backlogged == 0 {
		t.Errorf("none of 40 jobs waited in the backlog with a bound of %d", bound)
	}
	if aheadOf == 0 {
		t.Errorf("the other owner's job succeeded only after the whole backlog")
	}
	if d := target.duplicates(); len(d) > 0 {
		t.Errorf("jobs called more than once: %v", d)
	}
	deep, err := b.Stack.App.Store.QueueDepth(context.Background(), "u-deep", job.TierForPlan("free"))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("peak messages %d, %d of 40 backlogged at submission, %d still unfinished when the other owner's job succeeded; counters after: %+v", peak, backlogged, aheadOf, deep)
}

// allSucceeded reports whether every job of ids succeeded.
func allSucceeded(b *awstest.Bundle, ids []string) bool {
	for _, id := range ids {
		if j, err := b.Stack.App.Store.GetJob(context.Background(), id); err != nil || j.Status != "succeeded" {
			return false
		}
	}
	return true
}
