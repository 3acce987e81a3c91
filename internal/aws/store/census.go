package store

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/resources"
)

// Census is what the sweep index says of the active jobs at one moment:
// every figure the admin overview shows of the table (Store.Census).
type Census struct {
	// Jobs counts the jobs of each active status: scheduled, queued (in a
	// queue or parked in the table) and running. Stale jobs are not in the
	// index and are not counted.
	Jobs map[job.Status]int
	// Delayed counts, by tier, the jobs waiting for a time after now:
	// scheduled jobs before their time, jobs parked in the table before
	// they are to be sent again, and queued jobs in a queue behind a
	// backoff (retryAt; a job recovery re-sent is ahead of now without
	// waiting for anything, and is not delayed).
	Delayed map[string]int
	// Parked counts the jobs parked in the table (job.Park) by the reason
	// they wait (job.Job.Waiting; "unknown" when none was recorded),
	// whether or not they are due yet.
	Parked map[string]int
	// StuckQueued counts, by tier, the queued jobs in a queue since before
	// the census' stuck line: nobody received them.
	StuckQueued map[job.Tier]int
	// StuckRunning counts the running jobs whose last beat is before the
	// stuck line.
	StuckRunning int
}

// censusStatuses are the sweep index partitions a census reads.
var censusStatuses = []job.Status{job.Scheduled, Waiting, job.Queued, job.Running}

// Census reads the active jobs' partitions of the sweep index — every
// shard of scheduled, parked, queued and running — once each, and counts
// from what they hold what the overview shows (Census). stuck is the line
// before which a queued job nobody received, or a running job that stopped
// beating, counts as stuck. It reads each item's sweep key and time, tier,
// retryAt, waiting reason and expiry, so its cost follows the work in
// progress, not the table: one Query per partition (192) where a COUNT per
// figure took one per partition per figure (544). Items past their expiry
// that TTL has not deleted yet count in Jobs and the stuck counts, as a
// COUNT counts them, and not in Delayed and Parked.
func (s *Store) Census(ctx context.Context, now, stuck time.Time) (Census, error) {
	c := Census{Jobs: map[job.Status]int{}, Delayed: map[string]int{}, Parked: map[string]int{}, StuckQueued: map[job.Tier]int{}}
	var pks []string
	for _, st := range censusStatuses {
		pks = append(pks, sweepPartitions(st, nil)...)
	}
	proj := expression.NamesList(expression.Name(resources.AttrSweepKey), expression.Name(resources.AttrSweepAt), expression.Name("tier"),
		expression.Name("retryAt"), expression.Name("waiting"), expression.Name(resources.AttrExpiresAt))
	line := censusLine{now: now, nowKey: sortTime(now), stuckKey: sortTime(stuck)}
	err := s.queryPartitions(ctx, pks, func(pk string) (*dynamodb.QueryInput, error) {
		e, err := expression.NewBuilder().WithKeyCondition(expression.Key(resources.AttrSweepKey).Equal(expression.Value(pk))).
			WithProjection(proj).Build()
		if err != nil {
			return nil, err
		}
		return &dynamodb.QueryInput{
			TableName: aws.String(s.table), IndexName: aws.String(s.ix(resources.IndexBySweep)),
			KeyConditionExpression: e.KeyCondition(), ProjectionExpression: e.Projection(),
			ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(),
		}, nil
	}, func(res *dynamodb.QueryOutput) error {
		for _, item := range res.Items {
			var it censusItem
			if err := attributevalue.UnmarshalMap(item, &it); err != nil {
				return fmt.Errorf("decoding a job of the sweep index: %w", err)
			}
			c.count(it, s.expired(item), line)
		}
		return nil
	})
	if err != nil {
		return Census{}, fmt.Errorf("counting the active jobs: %w", err)
	}
	return c, nil
}

// censusItem is what a census reads of a sweep index item.
type censusItem struct {
	Key     string     `dynamodbav:"sweepKey"`
	At      string     `dynamodbav:"sweepAt"`
	Tier    string     `dynamodbav:"tier"`
	RetryAt *time.Time `dynamodbav:"retryAt"`
	Waiting string     `dynamodbav:"waiting"`
}

// censusLine is the moment a census counts at, and its stuck line, as
// sweep times.
type censusLine struct {
	now              time.Time
	nowKey, stuckKey string
}

// count adds one item to the census; expired says it is past its expiry.
func (c *Census) count(it censusItem, expired bool, line censusLine) {
	s, _, _ := strings.Cut(it.Key, "#")
	st := job.Status(s)
	switch st {
	case Waiting:
		c.Jobs[job.Queued]++
	default:
		c.Jobs[st]++
	}
	if st == job.Queued && it.At <= line.stuckKey {
		c.StuckQueued[job.Tier(it.Tier)]++
	}
	if st == job.Running && it.At <= line.stuckKey {
		c.StuckRunning++
	}
	if expired {
		return
	}
	if st == Waiting {
		reason := it.Waiting
		if reason == "" {
			reason = "unknown"
		}
		c.Parked[reason]++
	}
	if st != job.Running && it.At > line.nowKey && (st != job.Queued || it.RetryAt != nil && it.RetryAt.After(line.now)) {
		c.Delayed[it.Tier]++
	}
}
