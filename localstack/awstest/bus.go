package awstest

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/conveyor/conveyor/internal/aws/awsclient"
	"github.com/conveyor/conveyor/internal/resources"
)

// TapBus makes a FIFO queue named <prefix>-bus-tap.fifo and a rule on
// def's event bus that sends it every event of def's source (one message
// group, so in the order the bus took them), and returns the queue's URL:
// what a test reads to see what reached the bus. region names the
// queue's ARN.
func TapBus(t testing.TB, c awsclient.Clients, def resources.Definition, region string) string {
	t.Helper()
	ctx := context.Background()
	name := def.Prefix + "-bus-tap.fifo"
	q, err := c.SQS.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name),
		Attributes: map[string]string{"FifoQueue": "true", "ContentBasedDeduplication": "true"}})
	if err != nil {
		t.Fatal(err)
	}
	pattern, _ := json.Marshal(map[string]any{"source": []string{resources.EventSource(def.Env)}})
	if _, err := c.EventBridge.PutRule(ctx, &eventbridge.PutRuleInput{Name: aws.String("tap"), EventBusName: aws.String(def.EventBus),
		EventPattern: aws.String(string(pattern))}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.EventBridge.PutTargets(ctx, &eventbridge.PutTargetsInput{Rule: aws.String("tap"), EventBusName: aws.String(def.EventBus),
		Targets: []ebtypes.Target{{Id: aws.String("q"), Arn: aws.String("arn:aws:sqs:" + region + ":123456789012:" + name),
			SqsParameters: &ebtypes.SqsParameters{MessageGroupId: aws.String("all")}}}}); err != nil {
		t.Fatal(err)
	}
	return aws.ToString(q.QueueUrl)
}
