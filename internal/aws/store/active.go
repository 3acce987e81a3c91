package store

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/conveyor/conveyor/internal/fault"
	"github.com/conveyor/conveyor/internal/job"
)

// An owner's active jobs (scheduled, queued or running) are counted in one
// item, ACTIVE#owner / ACTIVE, attribute active. Every write of a job whose
// counting changes (job.Job.Active as stored against job.Status.Active)
// adds its ±1 to the item in the same transaction, so the count is exact
// whatever crashes or retries: a transaction lands whole or not at all, a
// job's write is conditional on its version, and a retried write that had
// landed is recognised (landed), not written twice. The creating
// transaction's increment is conditional on the count being under the
// owner's quota (a *fault.Throttled, 429 quota_exceeded); other transitions into active (a
// release, a retry, an operator's restart) count the job in without a
// condition. A job stored before the counter (Active false) is counted in
// by its next write while active and never takes one away before.

const activeSK = "ACTIVE"

func activePK(owner string) string { return "ACTIVE#" + owner }

// QuotaRetryAfter is the Retry-After of a submission over the active-jobs
// quota: the quota frees as the owner's jobs finish.
const QuotaRetryAfter = 5 * time.Second

// QuotaActiveJobs names the active-jobs quota in an answer's error.limit.
const QuotaActiveJobs = "activeJobs"

// CodeQuotaExceeded is the answer's code of a submission over a quota.
const CodeQuotaExceeded = "quota_exceeded"

// SetActiveQuota sets the most active jobs of an owner on a plan (nil: the
// owner's jobs are not counted).
func (s *Store) SetActiveQuota(quota func(owner, plan string) int) { s.activeQuota = quota }

// ActiveQuota is owner's active-jobs quota on plan (0: not counted).
func (s *Store) ActiveQuota(owner, plan string) int {
	if s.activeQuota == nil {
		return 0
	}
	return max(s.activeQuota(owner, plan), 0)
}

// activeDelta is the change of j's write to its owner's active counter
// (+1, -1 or 0) and whether the job is counted after it.
func (s *Store) activeDelta(j *job.Job) (delta int, counted bool) {
	switch active := j.Status.Active(); {
	case j.Active && !active:
		return -1, false
	case !j.Active && active && s.ActiveQuota(j.Owner, j.Plan) > 0:
		return 1, true
	}
	return 0, j.Active
}

// activeOp is the transaction item adding delta to j's owner's active
// counter, conditional on room under quota when quota > 0.
func (s *Store) activeOp(j *job.Job, delta, quota int) (types.TransactWriteItem, error) {
	b := expression.NewBuilder().WithUpdate(expression.Add(expression.Name("active"), expression.Value(delta)).
		Set(expression.Name("owner"), expression.Value(j.Owner)))
	if quota > 0 {
		b = b.WithCondition(expression.AttributeNotExists(expression.Name("active")).
			Or(expression.Name("active").LessThan(expression.Value(quota))))
	}
	e, err := b.Build()
	if err != nil {
		return types.TransactWriteItem{}, err
	}
	return types.TransactWriteItem{Update: &types.Update{
		TableName: aws.String(s.table), Key: keyOf(activePK(j.Owner), activeSK),
		UpdateExpression: e.Update(), ConditionExpression: e.Condition(),
		ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(),
	}}, nil
}

// ActiveJobs reads owner's count of active jobs (a strongly consistent
// read; 0 when it has none counted).
func (s *Store) ActiveJobs(ctx context.Context, owner string) (int, error) {
	var rec struct {
		Active int `dynamodbav:"active"`
	}
	if _, _, err := s.getRaw(ctx, activePK(owner), activeSK, &rec); err != nil {
		return 0, fmt.Errorf("reading the active jobs of %s: %w", owner, err)
	}
	return rec.Active, nil
}

// activeQuotaError is a submission refused because its owner has as many
// active jobs as its quota: a 429 (waiting helps: the quota frees as jobs
// finish).
func activeQuotaError(quota int) error {
	return &fault.Throttled{Code: CodeQuotaExceeded, Name: QuotaActiveJobs, Limit: quota, RetryAfter: QuotaRetryAfter,
		Msg: fmt.Sprintf("over the active-jobs quota: %d jobs scheduled, queued or running at once; retry when one finishes", quota)}
}
