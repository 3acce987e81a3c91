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
	"github.com/conveyor/conveyor/internal/secrets"
)

// Account is a user's connected external account. Its tokens are stored
// only as KMS envelopes; the plaintext never reaches the table.
type Account struct {
	Owner    string `dynamodbav:"accountOwner"`
	Provider string `dynamodbav:"provider"`
	// Refresh is the sealed refresh token.
	Refresh secrets.Envelope `dynamodbav:"refresh"`
	// Access is the sealed access token, when one is known.
	Access *secrets.Envelope `dynamodbav:"access,omitempty"`
	// AccessExpiresAt is when Access stops working.
	AccessExpiresAt *time.Time `dynamodbav:"accessExpiresAt,omitempty"`
	// Version increases with every token change.
	Version int64 `dynamodbav:"version"`
	// LeaseOwner / LeaseUntil serialise refreshes of this account.
	// LeaseUntilMs is epoch milliseconds (a number, so conditions compare
	// it correctly).
	LeaseOwner   string    `dynamodbav:"leaseOwner,omitempty"`
	LeaseUntilMs int64     `dynamodbav:"leaseUntilMs,omitempty"`
	ConnectedAt  time.Time `dynamodbav:"connectedAt"`
	UpdatedAt    time.Time `dynamodbav:"updatedAt"`
}

func accountPK(owner string) string { return "ACCT#" + owner }

// GetAccount returns owner's account for provider, or ErrNotFound.
func (s *Store) GetAccount(ctx context.Context, owner, provider string) (Account, error) {
	var a Account
	err := s.get(ctx, accountPK(owner), provider, &a)
	return a, err
}

// PutAccount stores a (re)connected account, replacing any earlier one.
func (s *Store) PutAccount(ctx context.Context, a Account) error {
	item, err := attributevalue.MarshalMap(a)
	if err != nil {
		return err
	}
	for k, v := range keyOf(accountPK(a.Owner), a.Provider) {
		item[k] = v
	}
	if _, err := s.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.table), Item: item}); err != nil {
		return fmt.Errorf("storing account of %s: %w", a.Owner, err)
	}
	return nil
}

// LeaseAccount takes the refresh lease of an account for worker until
// until, if nobody holds an unexpired one. It returns ErrConflict when
// another worker holds it.
func (s *Store) LeaseAccount(ctx context.Context, owner, provider, worker string, now, until time.Time) error {
	cond := expression.AttributeExists(expression.Name(resources.AttrPK)).And(
		expression.AttributeNotExists(expression.Name("leaseUntilMs")).
			Or(expression.Name("leaseUntilMs").LessThan(expression.Value(now.UnixMilli()))))
	update := expression.Set(expression.Name("leaseOwner"), expression.Value(worker)).
		Set(expression.Name("leaseUntilMs"), expression.Value(until.UnixMilli()))
	e, err := expression.NewBuilder().WithCondition(cond).WithUpdate(update).Build()
	if err != nil {
		return err
	}
	_, err = s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(s.table), Key: keyOf(accountPK(owner), provider),
		ConditionExpression: e.Condition(), UpdateExpression: e.Update(),
		ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(),
	})
	if isConditionFailed(err) {
		return ErrConflict
	}
	if err != nil {
		return fmt.Errorf("leasing account of %s: %w", owner, err)
	}
	return nil
}

// SaveRotated stores a's rotated tokens and releases any refresh lease, if
// the stored account still holds the tokens that were spent: version
// spentVersion of the connection made at connectedAt (ErrConflict
// otherwise, e.g. after a reconnect). It does not require the lease: a
// refresher whose lease lapsed still holds the only valid refresh token,
// and nobody else can have stored a successor of the one it spent.
func (s *Store) SaveRotated(ctx context.Context, a Account, spentVersion int64, connectedAt time.Time) error {
	a.LeaseOwner, a.LeaseUntilMs = "", 0
	item, err := attributevalue.MarshalMap(a)
	if err != nil {
		return err
	}
	for k, v := range keyOf(accountPK(a.Owner), a.Provider) {
		item[k] = v
	}
	c := condition(expression.Name("version").Equal(expression.Value(spentVersion)).
		And(expression.Name("connectedAt").Equal(expression.Value(connectedAt))))
	_, err = s.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(s.table), Item: item,
		ConditionExpression: c.Condition(), ExpressionAttributeNames: c.Names(), ExpressionAttributeValues: c.Values(),
	})
	if isConditionFailed(err) {
		return ErrConflict
	}
	if err != nil {
		return fmt.Errorf("storing refreshed tokens of %s: %w", a.Owner, err)
	}
	return nil
}

// ReleaseAccount gives up worker's refresh lease (after a failed refresh).
func (s *Store) ReleaseAccount(ctx context.Context, owner, provider, worker string) error {
	e, err := expression.NewBuilder().
		WithCondition(expression.Name("leaseOwner").Equal(expression.Value(worker))).
		WithUpdate(expression.Remove(expression.Name("leaseOwner")).Remove(expression.Name("leaseUntilMs"))).Build()
	if err != nil {
		return err
	}
	_, err = s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(s.table), Key: keyOf(accountPK(owner), provider),
		ConditionExpression: e.Condition(), UpdateExpression: e.Update(),
		ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(),
	})
	if err != nil && !isConditionFailed(err) {
		return err
	}
	return nil
}

// GetJobAndAccount reads job id and owner's account for provider in one
// BatchGetItem with strongly consistent reads: what a worker needs to claim
// a job and get its access token, for one read request instead of two. The
// account is nil when owner has none (or it expired); the job is
// ErrNotFound when it does not exist. An account is returned only when the
// job belongs to owner.
func (s *Store) GetJobAndAccount(ctx context.Context, id, owner, provider string) (job.Job, *Account, error) {
	jobKey, acctKey := jobPK(id), accountPK(owner)
	req := map[string]types.KeysAndAttributes{s.table: {
		Keys: []map[string]types.AttributeValue{keyOf(jobKey, jobSK), keyOf(acctKey, provider)}, ConsistentRead: aws.Bool(true),
	}}
	var (
		j     job.Job
		a     *Account
		found bool
	)
	for len(req) > 0 {
		res, err := s.db.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: req})
		if err != nil {
			return job.Job{}, nil, fmt.Errorf("reading job %s and its account: %w", id, err)
		}
		for _, item := range res.Responses[s.table] {
			if s.expired(item) {
				continue
			}
			pk, _ := item[resources.AttrPK].(*types.AttributeValueMemberS)
			switch {
			case pk == nil:
			case pk.Value == jobKey:
				if err := attributevalue.UnmarshalMap(item, &j); err != nil {
					return job.Job{}, nil, fmt.Errorf("decoding job %s: %w", id, err)
				}
				found = true
			case pk.Value == acctKey:
				var acct Account
				if err := attributevalue.UnmarshalMap(item, &acct); err != nil {
					return job.Job{}, nil, fmt.Errorf("decoding the account of %s: %w", owner, err)
				}
				a = &acct
			}
		}
		// DynamoDB may leave keys unprocessed (throttling, size): ask again
		// for those alone.
		req = res.UnprocessedKeys
	}
	if !found {
		return job.Job{}, nil, ErrNotFound
	}
	if j.Owner != owner {
		a = nil
	}
	return j, a, nil
}
