package store

import (
	"context"
	"fmt"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/conveyor/conveyor/internal/resources"
)

// FeedKey is the sort key of an event in the feed index: its time, job and
// sequence, so keys order events by time.
func FeedKey(ev EventRecord) string {
	return sortTime(ev.At) + "#" + ev.JobID + "#" + fmt.Sprintf("%012d", ev.Seq)
}

// FeedTime renders a time as a feed key that sorts before every event at
// or after it.
var FeedTime = sortTime

func feedPartition(n int) string { return "feed#" + strconv.Itoa(n) }

// setFeedKeys puts an event item in the feed index, in its job's shard.
func setFeedKeys(item map[string]types.AttributeValue, ev EventRecord) {
	item[resources.AttrFeedKey] = str(feedPartition(shard(ev.JobID) % resources.FeedShards))
	item[resources.AttrFeedAt] = str(FeedKey(ev))
}

// FeedEvent is an event read from the feed, with its feed key.
type FeedEvent struct {
	EventRecord
	Key string
}

// Feed returns up to limit events of every user from one shard of the feed
// index whose feed key is after after, oldest first. The index is
// eventually consistent: an event may show up a moment after later ones.
func (s *Store) Feed(ctx context.Context, shard int, after string, limit int) ([]FeedEvent, error) {
	kc := expression.Key(resources.AttrFeedKey).Equal(expression.Value(feedPartition(shard))).
		And(expression.Key(resources.AttrFeedAt).GreaterThan(expression.Value(after)))
	e, err := expression.NewBuilder().WithKeyCondition(kc).Build()
	if err != nil {
		return nil, err
	}
	res, err := s.db.Query(ctx, &dynamodb.QueryInput{
		TableName: aws.String(s.table), IndexName: aws.String(resources.IndexByFeed),
		KeyConditionExpression: e.KeyCondition(), ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(),
		Limit: aws.Int32(int32(limit)),
	})
	if err != nil {
		return nil, fmt.Errorf("reading the event feed: %w", err)
	}
	out := make([]FeedEvent, 0, len(res.Items))
	for _, item := range res.Items {
		if s.expired(item) {
			continue
		}
		var r EventRecord
		if err := attributevalue.UnmarshalMap(item, &r); err != nil {
			return nil, err
		}
		out = append(out, FeedEvent{EventRecord: r, Key: FeedKey(r)})
	}
	return out, nil
}
