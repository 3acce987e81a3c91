// Package store persists Conveyor's state in the one DynamoDB table: jobs
// with their events and idempotency records, uploads, connected accounts,
// breakers, webhooks, stream slots, rate buckets and recurring schedules;
// it reads the event items of the table's stream (DecodeEvent) and makes
// the DynamoDB client (NewClient). Every state change is a conditional
// write (optimistic concurrency on a version), so concurrent writers never
// lose each other's updates. Items whose TTL has passed are treated as
// gone, since DynamoDB deletes them late.
package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/conveyor/conveyor/internal/fault"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/resources"
)

// ErrNotFound is returned when an item does not exist or has expired.
var ErrNotFound = fault.ErrNotFound

// ErrConflict is returned when a conditional write lost a race: the item
// changed since it was read.
var ErrConflict = fault.ErrConflict

// Store reads and writes the table.
type Store struct {
	db    *dynamodb.Client
	table string
	now   func() time.Time
	// EventTTL is how long events are kept (default EventTTLDefault).
	EventTTL time.Duration
	// accounts are the connected accounts this instance has seen.
	accounts knownAccounts
	// retired makes the readers query the retired indexes
	// (ReadRetiredIndexes).
	retired bool
	// jobAttributes makes the writers store jobs with every attribute
	// (WriteJobAttributes).
	jobAttributes bool
	// queueBound is the most jobs of an owner a tier's queue may hold
	// (SetQueueBound; nil: no bound).
	queueBound func(owner, plan string) int
	// activeQuota is the most active jobs an owner may have
	// (SetActiveQuota; nil: not counted).
	activeQuota func(owner, plan string) int
}

// ReadRetiredIndexes makes s query, in place of each index that replaced a
// retired one, the retired one (resources.Replaced): what the functions do
// during a migration until every replacement is ACTIVE
// (CONVEYOR_TABLE_INDEXES=retired, docs/migrations.md). The writes are the
// same either way: every item carries the keys of both sets.
func (s *Store) ReadRetiredIndexes() { s.retired = true }

// ix is the name of the index s queries for index.
func (s *Store) ix(index string) string {
	if old, ok := resources.Replaced[index]; ok && s.retired {
		return old
	}
	return index
}

// New returns a Store on table. now defaults to time.Now.
func New(db *dynamodb.Client, table string, now func() time.Time) *Store {
	if now == nil {
		now = time.Now
	}
	return &Store{db: db, table: table, now: now}
}

// sortTimeLayout renders times so that lexicographic order is time order
// (job.SortTimeLayout).
const sortTimeLayout = job.SortTimeLayout

// sortTime renders t so that lexicographic order is time order.
func sortTime(t time.Time) string { return job.SortTime(t) }

func keyOf(pk, sk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		resources.AttrPK: &types.AttributeValueMemberS{Value: pk},
		resources.AttrSK: &types.AttributeValueMemberS{Value: sk},
	}
}

func str(s string) types.AttributeValue { return &types.AttributeValueMemberS{Value: s} }

func isConditionFailed(err error) bool {
	var ccf *types.ConditionalCheckFailedException
	return errors.As(err, &ccf)
}

// expired reports whether an item's TTL attribute has passed.
func (s *Store) expired(item map[string]types.AttributeValue) bool {
	v, ok := item[resources.AttrExpiresAt].(*types.AttributeValueMemberN)
	if !ok {
		return false
	}
	sec, err := strconv.ParseInt(v.Value, 10, 64)
	return err == nil && sec <= s.now().Unix()
}

// get reads one item with a strongly consistent read.
func (s *Store) get(ctx context.Context, pk, sk string, out any) error {
	return s.getWith(ctx, pk, sk, func(item map[string]types.AttributeValue) error {
		return attributevalue.UnmarshalMap(item, out)
	})
}

// getWith reads one item with a strongly consistent read and decodes it
// with decode.
func (s *Store) getWith(ctx context.Context, pk, sk string, decode func(map[string]types.AttributeValue) error) error {
	res, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(s.table), Key: keyOf(pk, sk), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return fmt.Errorf("reading %s: %w", pk, err)
	}
	if res.Item == nil || s.expired(res.Item) {
		return ErrNotFound
	}
	if err := decode(res.Item); err != nil {
		return fmt.Errorf("decoding %s: %w", pk, err)
	}
	return nil
}

// getRaw reads one item with a strongly consistent read, also when its TTL
// has passed (for writers that must take such an item over): it reports
// whether the item exists and whether it is expired.
func (s *Store) getRaw(ctx context.Context, pk, sk string, out any) (found, expired bool, err error) {
	res, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(s.table), Key: keyOf(pk, sk), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return false, false, fmt.Errorf("reading %s: %w", pk, err)
	}
	if res.Item == nil {
		return false, false, nil
	}
	if err := attributevalue.UnmarshalMap(res.Item, out); err != nil {
		return false, false, fmt.Errorf("decoding %s: %w", pk, err)
	}
	return true, s.expired(res.Item), nil
}

// condition builds a condition expression or panics on a programming error.
func condition(c expression.ConditionBuilder) expression.Expression {
	e, err := expression.NewBuilder().WithCondition(c).Build()
	if err != nil {
		panic(fmt.Sprintf("store: building condition: %v", err))
	}
	return e
}

// jobStatusIndexKey is the partition key of the byOwnerStatus index.
func jobStatusIndexKey(owner string, st job.Status) string { return owner + "#" + string(st) }
