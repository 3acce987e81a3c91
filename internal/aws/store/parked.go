package store

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/resources"
)

// ParkedFor returns up to limit queued jobs parked in the table (job.Park)
// that wait for reason (job.Wait.Reason, or job.Job.Waiting for jobs
// parked before waits were recorded) — narrowed to those waiting for
// breaker's circuit when breaker is set, and to tier when tier is set —
// whether or not they are due yet, with their id and tier. It Queries the
// sweep index's Waiting partitions (every shard; a tier's own when tier is
// set, and the untiered ones of jobs parked before) with a filter: its cost
// follows the jobs parked, not the table. It is how an operator's reset of
// a breaker or resume of a tier finds the jobs to release at once.
func (s *Store) ParkedFor(ctx context.Context, reason, breaker string, tier job.Tier, limit int) ([]job.Job, error) {
	var out []job.Job
	cond := expression.Name("wait.reason").Equal(expression.Value(reason)).
		Or(expression.Name("waiting").Equal(expression.Value(reason)))
	if breaker != "" {
		cond = cond.And(expression.Name("wait.breaker").Equal(expression.Value(breaker)))
	}
	if tier != "" {
		cond = cond.And(expression.Name("tier").Equal(expression.Value(string(tier))))
	}
	// The key too: a compact job item's id is its key's.
	proj := expression.NamesList(expression.Name("id"), expression.Name(resources.AttrPK), expression.Name("tier"), expression.Name(resources.AttrExpiresAt))
	var tiers []job.Tier
	if tier != "" {
		tiers = []job.Tier{tier} // a tier's parked jobs are keyed by it
	}
	for _, pk := range sweepPartitions(Waiting, tiers) {
		kc := expression.Key(resources.AttrSweepKey).Equal(expression.Value(pk))
		e, err := expression.NewBuilder().WithKeyCondition(kc).WithFilter(cond).WithProjection(proj).Build()
		if err != nil {
			return nil, err
		}
		in := &dynamodb.QueryInput{
			TableName: aws.String(s.table), IndexName: aws.String(s.ix(resources.IndexBySweep)),
			KeyConditionExpression: e.KeyCondition(), FilterExpression: e.Filter(), ProjectionExpression: e.Projection(),
			ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(),
		}
		for len(out) < limit {
			res, err := s.db.Query(ctx, in)
			if err != nil {
				return nil, fmt.Errorf("querying the jobs parked for %s: %w", reason, err)
			}
			for _, item := range res.Items {
				if s.expired(item) {
					continue
				}
				var j job.Job
				if err := unmarshalJob(item, &j); err != nil {
					return nil, fmt.Errorf("decoding a parked job: %w", err)
				}
				out = append(out, j)
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
