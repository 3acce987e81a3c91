package store

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/conveyor/conveyor/internal/resources"
)

// CountParked counts the queued jobs parked in the table (job.Park), by
// the reason they wait (job.Job.Waiting: backoff, circuit_open,
// rate_limited, paused, oauth_client_not_set …), whether or not they are
// due yet. It Queries the sweep index's Waiting partitions (every shard),
// reading only the reason: its cost follows the jobs parked, not the table.
func (s *Store) CountParked(ctx context.Context) (map[string]int, error) {
	out := map[string]int{}
	for _, pk := range sweepPartitions(Waiting, nil) {
		kc := expression.Key(resources.AttrSweepKey).Equal(expression.Value(pk))
		proj := expression.NamesList(expression.Name("waiting"), expression.Name(resources.AttrExpiresAt))
		e, err := expression.NewBuilder().WithKeyCondition(kc).WithProjection(proj).Build()
		if err != nil {
			return nil, err
		}
		in := &dynamodb.QueryInput{
			TableName: aws.String(s.table), IndexName: aws.String(resources.IndexBySweep),
			KeyConditionExpression: e.KeyCondition(), ProjectionExpression: e.Projection(),
			ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(),
		}
		for {
			res, err := s.db.Query(ctx, in)
			if err != nil {
				return nil, fmt.Errorf("counting parked jobs: %w", err)
			}
			for _, item := range res.Items {
				if s.expired(item) {
					continue
				}
				reason := "unknown"
				if v, ok := item["waiting"].(*types.AttributeValueMemberS); ok && v.Value != "" {
					reason = v.Value
				}
				out[reason]++
			}
			if len(res.LastEvaluatedKey) == 0 {
				break
			}
			in.ExclusiveStartKey = res.LastEvaluatedKey
		}
	}
	return out, nil
}
