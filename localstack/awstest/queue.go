package awstest

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// ReceiveAll receives every message visible on the queue at url now,
// hiding each for visibility seconds (0: the queue's own timeout), with its
// system attributes. A short poll may answer empty while messages are
// visible (SQS samples a subset of its servers; moto has answered so too),
// so an empty answer ends the read only when a one-second long poll
// confirms it.
func ReceiveAll(t testing.TB, client *sqs.Client, url string, visibility int32) []sqstypes.Message {
	t.Helper()
	var out []sqstypes.Message
	var wait int32
	for {
		r, err := client.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(url), MaxNumberOfMessages: 10, VisibilityTimeout: visibility, WaitTimeSeconds: wait,
			MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAll},
		})
		if err != nil {
			t.Fatalf("receiving from %s: %v", url, err)
		}
		if len(r.Messages) == 0 {
			if wait > 0 {
				return out
			}
			wait = 1
			continue
		}
		wait = 0
		out = append(out, r.Messages...)
	}
}
