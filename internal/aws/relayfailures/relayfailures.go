// Package relayfailures is the AWS side of replaying the relay's failures
// (relay.Replayer): the event stream mapping's on-failure queue on SQS
// (relay.FailureQueue), the table's stream on DynamoDB Streams
// (relay.StreamReader) and the deployed relay function's configuration on
// Lambda. The operator CLI (`conveyor relay replay`) is its only user, so
// no function links these clients for it.
package relayfailures

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/conveyor/conveyor/internal/aws/awsenv"
	"github.com/conveyor/conveyor/internal/relay"
)

// VisibilityDefault is how long a received failure message stays hidden
// while its batch is replayed; a replay releases the ones it keeps when it
// ends.
const VisibilityDefault = 5 * time.Minute

// Queue is the relay's on-failure queue (a standard SQS queue).
type Queue struct {
	client *sqs.Client
	url    string
	// Visibility is how long a received message stays hidden (default
	// VisibilityDefault).
	Visibility time.Duration
}

// NewQueue returns the queue at url, with an SQS client made from awsCfg.
func NewQueue(awsCfg aws.Config, url string) *Queue {
	return &Queue{client: sqs.NewFromConfig(awsCfg), url: url, Visibility: VisibilityDefault}
}

// QueueURL looks the queue named name up.
func QueueURL(ctx context.Context, awsCfg aws.Config, name string) (string, error) {
	out, err := sqs.NewFromConfig(awsCfg).GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(name)})
	if err != nil {
		return "", fmt.Errorf("looking up queue %s: %w", name, err)
	}
	return aws.ToString(out.QueueUrl), nil
}

// Receive implements relay.FailureQueue: a long poll of a second, so an
// empty answer means an empty queue.
func (q *Queue) Receive(ctx context.Context, max int) ([]relay.FailureMessage, error) {
	vis := q.Visibility
	if vis <= 0 {
		vis = VisibilityDefault
	}
	out, err := q.client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
		QueueUrl: aws.String(q.url), MaxNumberOfMessages: int32(min(max, 10)),
		WaitTimeSeconds: 1, VisibilityTimeout: int32(vis / time.Second),
	})
	if err != nil {
		return nil, err
	}
	msgs := make([]relay.FailureMessage, 0, len(out.Messages))
	for _, m := range out.Messages {
		msgs = append(msgs, relay.FailureMessage{ID: aws.ToString(m.MessageId), Receipt: aws.ToString(m.ReceiptHandle), Body: aws.ToString(m.Body)})
	}
	return msgs, nil
}

// Delete implements relay.FailureQueue.
func (q *Queue) Delete(ctx context.Context, receipt string) error {
	_, err := q.client.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(q.url), ReceiptHandle: aws.String(receipt)})
	return err
}

// Release implements relay.FailureQueue.
func (q *Queue) Release(ctx context.Context, receipt string) error {
	_, err := q.client.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(q.url), ReceiptHandle: aws.String(receipt), VisibilityTimeout: 0})
	return err
}

// Stream reads a table's stream again.
type Stream struct {
	client *dynamodbstreams.Client
	// Region is what the records say they come from (Lambda's awsRegion).
	Region string
	// MaxEmptyReads bounds the empty reads of an open shard before its
	// records run out short of a batch's end (default 20): DynamoDB
	// Streams may answer empty before the part of a shard that holds
	// records.
	MaxEmptyReads int
}

// NewStream returns a reader of DynamoDB streams, with a client made from
// awsCfg (at the DynamoDB endpoint the settings name, as DynamoDB Local
// serves the streams of its tables).
func NewStream(awsCfg aws.Config) *Stream {
	c := dynamodbstreams.NewFromConfig(awsCfg, func(o *dynamodbstreams.Options) {
		if ep, ok := awsenv.DynamoDBEndpoint(awsCfg); ok {
			o.BaseEndpoint = aws.String(ep)
		}
	})
	return &Stream{client: c, Region: awsCfg.Region, MaxEmptyReads: 20}
}

// Read implements relay.StreamReader: the shard's records from the
// batch's first sequence number to its last, in order. A batch the
// stream no longer holds — trimmed (older than 24 hours), or its stream or
// shard gone — is an error wrapping relay.ErrTrimmed.
func (s *Stream) Read(ctx context.Context, b relay.BatchInfo) ([]events.DynamoDBEventRecord, error) {
	start, ok1 := new(big.Int).SetString(b.StartSequenceNumber, 10)
	end, ok2 := new(big.Int).SetString(b.EndSequenceNumber, 10)
	if !ok1 || !ok2 || b.StreamARN == "" || b.ShardID == "" {
		return nil, fmt.Errorf("the failure record names no stream range (stream %q, shard %q, %q to %q)", b.StreamARN, b.ShardID, b.StartSequenceNumber, b.EndSequenceNumber)
	}
	it, err := s.client.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{
		StreamArn: aws.String(b.StreamARN), ShardId: aws.String(b.ShardID),
		ShardIteratorType: types.ShardIteratorTypeAtSequenceNumber, SequenceNumber: aws.String(b.StartSequenceNumber),
	})
	if err != nil {
		return nil, gone(err)
	}
	iter := it.ShardIterator
	var out []events.DynamoDBEventRecord
	empty := 0
	maxEmpty := s.MaxEmptyReads
	if maxEmpty <= 0 {
		maxEmpty = 20
	}
	for iter != nil {
		page, err := s.client.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: iter, Limit: aws.Int32(1000)})
		if err != nil {
			return nil, gone(err)
		}
		for i, r := range page.Records {
			seq, ok := new(big.Int).SetString(aws.ToString(r.Dynamodb.SequenceNumber), 10)
			if !ok {
				return nil, fmt.Errorf("a stream record with sequence number %q", aws.ToString(r.Dynamodb.SequenceNumber))
			}
			if len(out) == 0 && i == 0 && seq.Cmp(start) > 0 {
				// The batch's first record is gone: trimmed under us.
				return nil, fmt.Errorf("%w: the shard starts at %s, after the batch's first record %s", relay.ErrTrimmed, seq, start)
			}
			if seq.Cmp(end) > 0 {
				return out, nil
			}
			if seq.Cmp(start) >= 0 {
				out = append(out, LambdaRecord(r, b.StreamARN, s.Region))
			}
			if seq.Cmp(end) == 0 {
				return out, nil
			}
		}
		if len(page.Records) == 0 {
			if empty++; empty >= maxEmpty {
				break
			}
		} else {
			empty = 0
		}
		iter = page.NextShardIterator
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: no record of the batch was found in shard %s", relay.ErrTrimmed, b.ShardID)
	}
	// The shard ended, or went quiet, before the batch's last record.
	return nil, fmt.Errorf("%w: the shard's records end before the batch's last record %s", relay.ErrTrimmed, end)
}

// gone makes the stream's "no longer there" answers relay.ErrTrimmed.
func gone(err error) error {
	var trimmed *types.TrimmedDataAccessException
	var missing *types.ResourceNotFoundException
	var expired *types.ExpiredIteratorException
	if errors.As(err, &trimmed) || errors.As(err, &missing) || errors.As(err, &expired) {
		return fmt.Errorf("%w: %v", relay.ErrTrimmed, err)
	}
	return err
}

// FunctionEnvironment returns the environment variables of the deployed
// function named name: the relay's configuration, so a replay relays as
// the function does.
func FunctionEnvironment(ctx context.Context, awsCfg aws.Config, name string) (map[string]string, error) {
	out, err := lambda.NewFromConfig(awsCfg).GetFunctionConfiguration(ctx, &lambda.GetFunctionConfigurationInput{FunctionName: aws.String(name)})
	if err != nil {
		return nil, fmt.Errorf("reading function %s's configuration: %w", name, err)
	}
	if out.Environment == nil {
		return map[string]string{}, nil
	}
	return out.Environment.Variables, nil
}

// LambdaRecord renders a stream record as Lambda hands it to a function.
func LambdaRecord(r types.Record, streamARN, region string) events.DynamoDBEventRecord {
	rec := events.DynamoDBEventRecord{
		AWSRegion: region, EventID: aws.ToString(r.EventID), EventName: string(r.EventName),
		EventSource: "aws:dynamodb", EventVersion: aws.ToString(r.EventVersion), EventSourceArn: streamARN,
	}
	if r.UserIdentity != nil {
		rec.UserIdentity = &events.DynamoDBUserIdentity{Type: aws.ToString(r.UserIdentity.Type), PrincipalID: aws.ToString(r.UserIdentity.PrincipalId)}
	}
	if d := r.Dynamodb; d != nil {
		rec.Change = events.DynamoDBStreamRecord{
			Keys: lambdaImage(d.Keys), NewImage: lambdaImage(d.NewImage), OldImage: lambdaImage(d.OldImage),
			SequenceNumber: aws.ToString(d.SequenceNumber), SizeBytes: aws.ToInt64(d.SizeBytes), StreamViewType: string(d.StreamViewType),
		}
		if d.ApproximateCreationDateTime != nil {
			rec.Change.ApproximateCreationDateTime = events.SecondsEpochTime{Time: *d.ApproximateCreationDateTime}
		}
	}
	return rec
}

func lambdaImage(m map[string]types.AttributeValue) map[string]events.DynamoDBAttributeValue {
	if m == nil {
		return nil
	}
	out := make(map[string]events.DynamoDBAttributeValue, len(m))
	for k, v := range m {
		out[k] = lambdaValue(v)
	}
	return out
}

func lambdaValue(v types.AttributeValue) events.DynamoDBAttributeValue {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return events.NewStringAttribute(v.Value)
	case *types.AttributeValueMemberN:
		return events.NewNumberAttribute(v.Value)
	case *types.AttributeValueMemberB:
		return events.NewBinaryAttribute(v.Value)
	case *types.AttributeValueMemberBOOL:
		return events.NewBooleanAttribute(v.Value)
	case *types.AttributeValueMemberSS:
		return events.NewStringSetAttribute(v.Value)
	case *types.AttributeValueMemberNS:
		return events.NewNumberSetAttribute(v.Value)
	case *types.AttributeValueMemberBS:
		return events.NewBinarySetAttribute(v.Value)
	case *types.AttributeValueMemberL:
		l := make([]events.DynamoDBAttributeValue, 0, len(v.Value))
		for _, e := range v.Value {
			l = append(l, lambdaValue(e))
		}
		return events.NewListAttribute(l)
	case *types.AttributeValueMemberM:
		return events.NewMapAttribute(lambdaImage(v.Value))
	}
	return events.NewNullAttribute()
}
