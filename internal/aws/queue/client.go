package queue

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// Client is the SQS client the queues are reached through: the wiring
// makes one per cold start (NewClient) and hands it to the Sender, the
// consumers and the operators' side.
type Client = sqs.Client

// NewClient returns an SQS client made from awsCfg.
func NewClient(awsCfg aws.Config) *Client { return sqs.NewFromConfig(awsCfg) }

// VisibilityChanger is the part of the SQS client Delay uses.
type VisibilityChanger interface {
	ChangeMessageVisibility(ctx context.Context, in *sqs.ChangeMessageVisibilityInput, optFns ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error)
}

// Consumer is the part of the SQS client a tier queue's consumer uses
// besides its trigger (which receives and deletes): Delay changes a
// message's visibility; a message that must wait leaves its owner's slot
// by a send into its job's own group (MoveOut).
type Consumer interface {
	VisibilityChanger
	MessageSender
}

// Delay makes the message of receipt, received from the queue at url,
// visible again after seconds.
func Delay(ctx context.Context, client VisibilityChanger, url, receipt string, seconds int32) error {
	if _, err := client.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{
		QueueUrl: aws.String(url), ReceiptHandle: aws.String(receipt), VisibilityTimeout: seconds,
	}); err != nil {
		return fmt.Errorf("changing a message's visibility: %w", err)
	}
	return nil
}
