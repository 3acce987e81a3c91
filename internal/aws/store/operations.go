package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/conveyor/conveyor/internal/resources"
)

// Operation is an operator's bulk action by filter, worked off in chunks
// in the background: what it does, what it selects, how far it got, and
// the chunk it is working on. Every write is conditional on Version, so
// of two workers running the same chunk only one records it.
type Operation struct {
	ID     string `dynamodbav:"id"`
	Action string `dynamodbav:"action"`
	// Filter is the inspector's filter the operation walks (admin.Filter).
	Filter map[string]string `dynamodbav:"filter"`
	// By is who started it.
	By string `dynamodbav:"by"`
	// Status is running, succeeded or failed.
	Status string `dynamodbav:"opStatus"`
	// Matched is how many jobs the filter selected when the operation
	// started (raised when it walked more).
	Matched int `dynamodbav:"matched"`
	// Done counts the jobs acted on; Skipped the others by reason.
	Done    int            `dynamodbav:"done"`
	Skipped map[string]int `dynamodbav:"skipped,omitempty"`
	// Cursor is where the walk over the filter's index goes on (empty
	// with Started: the walk is at its end).
	Cursor  string `dynamodbav:"cursor,omitempty"`
	Started bool   `dynamodbav:"started"`
	// Chunk are the jobs selected and not yet recorded; Next is the
	// cursor after them.
	Chunk []string `dynamodbav:"chunk,omitempty"`
	Next  string   `dynamodbav:"next,omitempty"`
	// Seq counts the chunks recorded (each worker's message names one).
	Seq int `dynamodbav:"seq"`
	// Error says why a failed operation stopped.
	Error     string    `dynamodbav:"error,omitempty"`
	CreatedAt time.Time `dynamodbav:"createdAt"`
	UpdatedAt time.Time `dynamodbav:"updatedAt"`
	Version   int64     `dynamodbav:"version"`
	// ExpiresAt is the epoch second after which the record is gone.
	ExpiresAt int64 `dynamodbav:"expiresAt,omitempty"`
}

// OperationRunning is the Status of an operation that has work left.
const OperationRunning = "running"

// OperationTTL is how long an operation's record is kept after its last
// write.
const OperationTTL = 7 * 24 * time.Hour

// OperationSweepKey is the bySweepKeys partition of the running
// operations, sorted by their last write: recovery finds there the ones
// whose worker went quiet.
const OperationSweepKey = "operation#running"

func operationPK(id string) string { return "OP#" + id }

const operationSK = "OP"

func (s *Store) operationItem(op *Operation) (map[string]types.AttributeValue, error) {
	item, err := attributevalue.MarshalMap(op)
	if err != nil {
		return nil, fmt.Errorf("encoding operation %s: %w", op.ID, err)
	}
	item[resources.AttrPK] = str(operationPK(op.ID))
	item[resources.AttrSK] = str(operationSK)
	item[resources.AttrExpiresAt] = ttlAttr(op.UpdatedAt.Add(OperationTTL))
	if op.Status == OperationRunning {
		item[resources.AttrSweepKey] = str(OperationSweepKey)
		item[resources.AttrSweepAt] = str(sortTime(op.UpdatedAt))
	}
	return item, nil
}

// CreateOperation stores a new operation (Version 1); an id taken already
// is ErrConflict.
func (s *Store) CreateOperation(ctx context.Context, op *Operation) error {
	op.Version = 1
	op.ExpiresAt = op.UpdatedAt.Add(OperationTTL).Unix()
	return s.putOperation(ctx, op, expression.AttributeNotExists(expression.Name(resources.AttrPK)), "creating")
}

// putOperation writes op's item if cond holds: a failed condition is
// ErrConflict.
func (s *Store) putOperation(ctx context.Context, op *Operation, cond expression.ConditionBuilder, verb string) error {
	item, err := s.operationItem(op)
	if err != nil {
		return err
	}
	e := condition(cond)
	_, err = s.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.table), Item: item,
		ConditionExpression: e.Condition(), ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values()})
	switch {
	case isConditionFailed(err):
		return ErrConflict
	case err != nil:
		return fmt.Errorf("%s operation %s: %w", verb, op.ID, err)
	}
	return nil
}

// GetOperation reads operation id (strongly consistent); a missing or
// expired one is ErrNotFound.
func (s *Store) GetOperation(ctx context.Context, id string) (Operation, error) {
	var op Operation
	err := s.getWith(ctx, operationPK(id), operationSK, func(item map[string]types.AttributeValue) error {
		if s.expired(item) {
			return ErrNotFound
		}
		return attributevalue.UnmarshalMap(item, &op)
	})
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			return Operation{}, ErrNotFound
		}
		return Operation{}, fmt.Errorf("reading operation %s: %w", id, err)
	}
	return op, nil
}

// SaveOperation writes op over the version it was read at and advances
// op.Version; a write since is ErrConflict (op is left as it was).
func (s *Store) SaveOperation(ctx context.Context, op *Operation) error {
	next := *op
	next.Version++
	next.ExpiresAt = next.UpdatedAt.Add(OperationTTL).Unix()
	if err := s.putOperation(ctx, &next, expression.Name("version").Equal(expression.Value(op.Version)), "saving"); err != nil {
		return err
	}
	*op = next
	return nil
}

// QuietOperations returns the ids of up to limit running operations whose
// last write is at or before before, oldest first, from the sparse sweep
// index (never a scan).
func (s *Store) QuietOperations(ctx context.Context, before time.Time, limit int) ([]string, error) {
	key := expression.Key(resources.AttrSweepKey).Equal(expression.Value(OperationSweepKey)).
		And(expression.Key(resources.AttrSweepAt).LessThanEqual(expression.Value(sortTime(before))))
	ex, err := expression.NewBuilder().WithKeyCondition(key).
		WithProjection(expression.NamesList(expression.Name("id"))).Build()
	if err != nil {
		return nil, err
	}
	in := &dynamodb.QueryInput{TableName: aws.String(s.table), IndexName: aws.String(s.ix(resources.IndexBySweep)),
		KeyConditionExpression: ex.KeyCondition(), ProjectionExpression: ex.Projection(),
		ExpressionAttributeNames: ex.Names(), ExpressionAttributeValues: ex.Values(), Limit: aws.Int32(int32(limit))}
	var out []string
	for len(out) < limit {
		res, err := s.db.Query(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("listing quiet operations: %w", err)
		}
		for _, item := range res.Items {
			if v, ok := item["id"].(*types.AttributeValueMemberS); ok {
				out = append(out, v.Value)
			}
		}
		if len(res.LastEvaluatedKey) == 0 {
			break
		}
		in.ExclusiveStartKey = res.LastEvaluatedKey
	}
	return out, nil
}
