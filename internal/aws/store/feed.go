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

	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/resources"
)

// FeedKey is the sort key of an event in the feed index (job.FeedKey).
var FeedKey = job.FeedKey

// FeedTime renders a time as a feed key that sorts before every event at
// or after it.
var FeedTime = sortTime

func feedPartition(n int) string { return "feed#" + strconv.Itoa(n) }

// setFeedKeys puts the last event item of a write in the feed index, in
// its job's shard, for the write's events from seq from on: one entry per
// write of a job, however many events it made.
func setFeedKeys(item map[string]types.AttributeValue, ev EventRecord, from int64) {
	item[resources.AttrFeedKey] = str(feedPartition(shard(ev.JobID) % resources.FeedShards))
	item[resources.AttrFeedAt] = str(FeedKey(ev))
	item[resources.AttrFeedFrom] = &types.AttributeValueMemberN{Value: strconv.FormatInt(from, 10)}
}

// FeedEvent is an event read from the feed, with its feed key
// (job.FeedEvent).
type FeedEvent = job.FeedEvent

// Feed returns up to limit events of every user from one shard of the feed
// index whose feed key is after after, oldest first. The index is
// eventually consistent: an event may show up a moment after later ones.
// An entry stands for the events of one write of a job (its last event's
// key and header, and the first one's sequence); the events themselves
// are read by key (BatchGetItem) when the shard has any, so a page may
// hold more than limit events.
func (s *Store) Feed(ctx context.Context, shard int, after string, limit int) ([]FeedEvent, error) {
	kc := expression.Key(resources.AttrFeedKey).Equal(expression.Value(feedPartition(shard))).
		And(expression.Key(resources.AttrFeedAt).GreaterThan(expression.Value(after)))
	e, err := expression.NewBuilder().WithKeyCondition(kc).Build()
	if err != nil {
		return nil, err
	}
	res, err := s.db.Query(ctx, &dynamodb.QueryInput{
		TableName: aws.String(s.table), IndexName: aws.String(s.ix(resources.IndexByFeed)),
		KeyConditionExpression: e.KeyCondition(), ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(),
		Limit: aws.Int32(int32(limit)),
	})
	if err != nil {
		return nil, fmt.Errorf("reading the event feed: %w", err)
	}
	// Each entry stands for its write's events (feedFrom to seq), all in
	// the item it is (an entry written before writes shared one item: in
	// an item each, read by their keys after).
	type entry struct {
		JobID string `dynamodbav:"jobId"`
		Seq   int64  `dynamodbav:"seq"`
		From  int64  `dynamodbav:"feedFrom"`
	}
	var entries []entry
	var keys []ItemKey
	for _, item := range res.Items {
		var e entry
		if s.expired(item) || attributevalue.UnmarshalMap(item, &e) != nil || e.JobID == "" || e.Seq < 1 {
			continue
		}
		e.From = min(max(e.From, 1), e.Seq)
		entries = append(entries, e)
		keys = append(keys, ItemKey{jobPK(e.JobID), eventSK(e.Seq)})
	}
	byKey := map[ItemKey][]EventRecord{}
	read := func(keys []ItemKey) error {
		return s.GetItems(ctx, keys, func(k ItemKey, item map[string]types.AttributeValue) error {
			evs, err := decodeEvents(item)
			byKey[k] = evs
			return err
		})
	}
	if err := read(keys); err != nil {
		return nil, fmt.Errorf("reading the feed's events: %w", err)
	}
	var older []ItemKey
	for _, e := range entries {
		for seq := e.From; seq < firstSeq(byKey[ItemKey{jobPK(e.JobID), eventSK(e.Seq)}]); seq++ {
			older = append(older, ItemKey{jobPK(e.JobID), eventSK(seq)})
		}
	}
	if len(older) > 0 {
		if err := read(older); err != nil {
			return nil, fmt.Errorf("reading the feed's events: %w", err)
		}
	}
	out := make([]FeedEvent, 0, len(keys))
	for _, e := range entries {
		main := byKey[ItemKey{jobPK(e.JobID), eventSK(e.Seq)}]
		var evs []EventRecord
		for seq := e.From; seq < firstSeq(main); seq++ {
			if r, ok := eventAt(byKey[ItemKey{jobPK(e.JobID), eventSK(seq)}], seq); ok {
				evs = append(evs, r)
			}
		}
		for _, r := range main {
			if r.Seq >= e.From {
				evs = append(evs, r)
			}
		}
		for _, r := range evs {
			out = append(out, FeedEvent{EventRecord: r, Key: FeedKey(r)})
		}
	}
	return out, nil
}
