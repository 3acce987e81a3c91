package emulator_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/resources"
	"github.com/conveyor/conveyor/localstack/awstest"
	"github.com/conveyor/conveyor/localstack/emulator"
)

func TestMain(m *testing.M) { awstest.Main(m) }

func TestApplyCreatesFIFOQueuesWithRedrive(t *testing.T) {
	t.Parallel()
	env := awstest.Provision(t)
	ctx := context.Background()
	for _, q := range env.Res.Definition.Queues {
		attrs, err := env.Clients.SQS.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
			QueueUrl:       aws.String(env.Res.QueueURLs[q.Tier]),
			AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameAll},
		})
		if err != nil {
			t.Fatalf("%s: %v", q.Name, err)
		}
		if got := attrs.Attributes["FifoQueue"]; got != "true" {
			t.Errorf("%s FifoQueue = %q, want true", q.Name, got)
		}
		var redrive struct {
			DeadLetterTargetArn string `json:"deadLetterTargetArn"`
			MaxReceiveCount     any    `json:"maxReceiveCount"`
		}
		if err := json.Unmarshal([]byte(attrs.Attributes["RedrivePolicy"]), &redrive); err != nil {
			t.Fatalf("%s RedrivePolicy %q: %v", q.Name, attrs.Attributes["RedrivePolicy"], err)
		}
		if redrive.DeadLetterTargetArn != env.Res.DLQARNs[q.Tier] {
			t.Errorf("%s redrive target = %q, want %q", q.Name, redrive.DeadLetterTargetArn, env.Res.DLQARNs[q.Tier])
		}
		if got := toInt(redrive.MaxReceiveCount); got != q.MaxReceiveCount {
			t.Errorf("%s maxReceiveCount = %v, want %d", q.Name, redrive.MaxReceiveCount, q.MaxReceiveCount)
		}
		if got, want := attrs.Attributes["VisibilityTimeout"], secs(q); got != want {
			t.Errorf("%s VisibilityTimeout = %s, want %s", q.Name, got, want)
		}
		// High-throughput FIFO, as in the cloud.
		if got := attrs.Attributes["DeduplicationScope"]; got != resources.DeduplicationScopeMessageGroup {
			t.Errorf("%s DeduplicationScope = %q, want %q", q.Name, got, resources.DeduplicationScopeMessageGroup)
		}
		if got := attrs.Attributes["FifoThroughputLimit"]; got != resources.FifoThroughputLimitPerMessageGroup {
			t.Errorf("%s FifoThroughputLimit = %q, want %q", q.Name, got, resources.FifoThroughputLimitPerMessageGroup)
		}
		dlq, err := env.Clients.SQS.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
			QueueUrl:       aws.String(env.Res.DLQURLs[q.Tier]),
			AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameAll},
		})
		if err != nil || dlq.Attributes["FifoQueue"] != "true" {
			t.Fatalf("%s DLQ is not FIFO: %v %v", q.DLQName, dlq, err)
		}
		// The DLQ's RedriveAllowPolicy (only its own tier's queue) is set
		// by Apply, but moto 5.2 accepts the attribute without storing it
		// (GetQueueAttributes never returns it): its shape is tested in
		// internal/resources and in the CDK template (infra/stack).
	}
}

func toInt(v any) int {
	switch n := v.(type) {
	case float64:
		return int(n)
	case string:
		var i int
		_ = json.Unmarshal([]byte(n), &i)
		return i
	}
	return -1
}

func secs(q resources.Queue) string {
	b, _ := json.Marshal(int(q.VisibilityTimeout.Seconds()))
	return string(b)
}

func TestApplyCreatesTableWithIndexesAndTTL(t *testing.T) {
	t.Parallel()
	env := awstest.Provision(t)
	ctx := context.Background()
	def := env.Res.Definition.Table
	d, err := env.Clients.DynamoDB.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(def.Name)})
	if err != nil {
		t.Fatal(err)
	}
	type index struct{ Name, PK, SK string }
	var want, got []index
	for _, ix := range def.Indexes {
		want = append(want, index{ix.Name, ix.PartitionKey.Name, ix.SortKey.Name})
	}
	for _, g := range d.Table.GlobalSecondaryIndexes {
		got = append(got, index{aws.ToString(g.IndexName), aws.ToString(g.KeySchema[0].AttributeName), aws.ToString(g.KeySchema[1].AttributeName)})
	}
	// DynamoDB lists a table's indexes in no promised order.
	byName := cmpopts.SortSlices(func(a, b index) bool { return a.Name < b.Name })
	if diff := cmp.Diff(want, got, byName); diff != "" {
		t.Errorf("indexes (-want +got):\n%s", diff)
	}
	if pk := aws.ToString(d.Table.KeySchema[0].AttributeName); pk != def.PartitionKey.Name {
		t.Errorf("partition key = %s, want %s", pk, def.PartitionKey.Name)
	}
	ttl, err := env.Clients.DynamoDB.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(def.Name)})
	if err != nil {
		t.Fatal(err)
	}
	if got := aws.ToString(ttl.TimeToLiveDescription.AttributeName); got != def.TTLAttribute {
		t.Errorf("TTL attribute = %q, want %q", got, def.TTLAttribute)
	}
	// The stream the relay reads: new images, and its ARN in the result.
	if s := d.Table.StreamSpecification; s == nil || !aws.ToBool(s.StreamEnabled) || string(s.StreamViewType) != def.StreamView {
		t.Errorf("stream = %+v, want enabled with %s", s, def.StreamView)
	}
	if got := aws.ToString(d.Table.LatestStreamArn); got == "" || got != env.Res.TableStreamARN {
		t.Errorf("stream ARN = %q, result says %q", got, env.Res.TableStreamARN)
	}
}

func TestApplyTwiceChangesNothing(t *testing.T) {
	t.Parallel()
	env := awstest.Provision(t)
	again, err := emulator.Provision(context.Background(), env.Clients, env.Res.Definition)
	if err != nil {
		t.Fatalf("second run: %v", err)
	}
	if diff := cmp.Diff(env.Res, again); diff != "" {
		t.Errorf("second run changed the result (-first +second):\n%s", diff)
	}
	// Nothing new appeared either: still exactly the queues of the definition.
	out, err := env.Clients.SQS.ListQueues(context.Background(), &sqs.ListQueuesInput{QueueNamePrefix: aws.String(env.Res.Definition.Prefix)})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(out.QueueUrls), 2*len(job.Tiers)+2; got != want {
		t.Errorf("queues after two runs = %d, want %d (tiers, DLQs, relay failures, notification bridge): %v", got, want, out.QueueUrls)
	}
}

func TestFIFODedupDropsDuplicateInsideWindow(t *testing.T) {
	t.Parallel()
	env := awstest.Provision(t)
	ctx := context.Background()
	url := env.Res.QueueURLs[job.High]
	for range 2 {
		if _, err := env.Clients.SQS.SendMessage(ctx, &sqs.SendMessageInput{
			QueueUrl: aws.String(url), MessageBody: aws.String(`{"jobId":"job_1"}`),
			MessageGroupId: aws.String("job_1"), MessageDeduplicationId: aws.String("job_1-1"),
		}); err != nil {
			t.Fatal(err)
		}
	}
	out, err := env.Clients.SQS.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Messages) != 1 {
		t.Fatalf("received %d messages, want 1 (the duplicate must be dropped)", len(out.Messages))
	}
	again, err := env.Clients.SQS.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(again.Messages) != 0 {
		t.Errorf("a second receive got %d messages, want 0", len(again.Messages))
	}
}

func TestApplySetsTheUploadLifecycleFromTheDefinition(t *testing.T) {
	t.Parallel()
	env := awstest.Provision(t)
	bk := env.Res.Definition.Bucket
	out, err := emulator.S3(env.Config).GetBucketLifecycleConfiguration(context.Background(), &s3.GetBucketLifecycleConfigurationInput{Bucket: aws.String(bk.Name)})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range out.Rules {
		if r.Filter != nil && aws.ToString(r.Filter.Prefix) == bk.UploadPrefix && r.Expiration != nil {
			if got := time.Duration(aws.ToInt32(r.Expiration.Days)) * 24 * time.Hour; got != bk.UploadObjectExpiry || got < resources.UploadObjectHorizon {
				t.Errorf("uploads expire after %v, want %v (horizon %v)", got, bk.UploadObjectExpiry, resources.UploadObjectHorizon)
			}
			return
		}
	}
	t.Errorf("no expiration rule for %s: %+v", bk.UploadPrefix, out.Rules)
}
