package store

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/resources"
)

// Due returns up to limit jobs in status whose sweep time is at or before
// before, oldest first, across every shard of the sparse bySweep index. It
// queries the index; it never scans the table.
//
// Status Waiting gives the queued jobs parked in the table, by when they
// are to be sent again.
func (s *Store) Due(ctx context.Context, status job.Status, before time.Time, limit int) ([]job.Job, error) {
	items, err := s.due(ctx, status, before, limit)
	if err != nil {
		return nil, fmt.Errorf("querying due %s jobs: %w", status, err)
	}
	out := make([]job.Job, 0, len(items))
	for _, item := range items {
		var j job.Job
		if err := attributevalue.UnmarshalMap(item, &j); err != nil {
			return nil, fmt.Errorf("decoding a due job: %w", err)
		}
		out = append(out, j)
	}
	return out, nil
}

// due returns up to limit unexpired items of the bySweep partitions named
// partition (one per shard) whose sweep time is at or before before,
// oldest first within each shard.
func (s *Store) due(ctx context.Context, partition job.Status, before time.Time, limit int) ([]map[string]types.AttributeValue, error) {
	var out []map[string]types.AttributeValue
	for n := range resources.SweepShards {
		kc := expression.Key(resources.AttrSweepKey).Equal(expression.Value(SweepKey(partition, n))).
			And(expression.Key(resources.AttrSweepAt).LessThanEqual(expression.Value(sortTime(before))))
		e, err := expression.NewBuilder().WithKeyCondition(kc).Build()
		if err != nil {
			return nil, err
		}
		in := &dynamodb.QueryInput{
			TableName: aws.String(s.table), IndexName: aws.String(resources.IndexBySweep),
			KeyConditionExpression: e.KeyCondition(), ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(),
			ScanIndexForward: aws.Bool(true), Limit: aws.Int32(int32(limit)),
		}
		for len(out) < limit {
			res, err := s.db.Query(ctx, in)
			if err != nil {
				return nil, err
			}
			for _, item := range res.Items {
				if !s.expired(item) {
					out = append(out, item)
				}
			}
			if len(res.LastEvaluatedKey) == 0 {
				break
			}
			in.ExclusiveStartKey = res.LastEvaluatedKey
		}
	}
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// CountStatus counts all jobs in status from the sweep index (Select COUNT,
// every shard). Stale jobs are not in the index and count as 0.
// Queued counts the jobs parked in the table too.
func (s *Store) CountStatus(ctx context.Context, status job.Status) (int, error) {
	total := 0
	if status == job.Queued {
		n, err := s.CountStatus(ctx, Waiting)
		if err != nil {
			return 0, err
		}
		total = n
	}
	for n := range resources.SweepShards {
		kc := expression.Key(resources.AttrSweepKey).Equal(expression.Value(SweepKey(status, n)))
		e, err := expression.NewBuilder().WithKeyCondition(kc).Build()
		if err != nil {
			return 0, err
		}
		in := &dynamodb.QueryInput{
			TableName: aws.String(s.table), IndexName: aws.String(resources.IndexBySweep), Select: "COUNT",
			KeyConditionExpression: e.KeyCondition(), ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(),
		}
		for {
			res, err := s.db.Query(ctx, in)
			if err != nil {
				return 0, fmt.Errorf("counting %s jobs: %w", status, err)
			}
			total += int(res.Count)
			if len(res.LastEvaluatedKey) == 0 {
				break
			}
			in.ExclusiveStartKey = res.LastEvaluatedKey
		}
	}
	return total, nil
}
