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

	"github.com/conveyor/conveyor/internal/breaker"
	"github.com/conveyor/conveyor/internal/resources"
)

// The circuit breakers' records (internal/breaker, which declares the
// breaker.Store these methods make of *Store). The product's circuits all
// live in one partition, so that one Query reads them all; only keys with
// recent failures have a record (closing deletes it, records expire by
// TTL), so the partition stays small. An owner's target circuits live in
// numbered slots of a partition of the owner's own ("BREAKER#TARGET#<owner>",
// sort keys "slot#000" … and "slot#shared"). Every write is conditional on the version
// read, or, for a record that does not exist yet, on there being none
// whose TTL has not passed.

// breakerPK is the partition of the product's circuits.
const breakerPK = "BREAKER"

// breakerTargetPK is the partition of owner's target circuits.
func breakerTargetPK(owner string) string { return "BREAKER#TARGET#" + owner }

// breakerItem is a stored record with its TTL.
type breakerItem struct {
	breaker.Record
	ExpiresAt int64 `dynamodbav:"expiresAt"`
}

// breakerTargetItem is a stored target slot: its record, its host and its
// slot (the item's sort key).
type breakerTargetItem struct {
	breaker.Record
	ExpiresAt int64  `dynamodbav:"expiresAt"`
	Host      string `dynamodbav:"host"`
	Slot      string `dynamodbav:"sk"`
}

// live reports whether a record that expires at expiresAt (0: never) is
// still there at now.
func live(expiresAt int64, now time.Time) bool { return expiresAt == 0 || expiresAt > now.Unix() }

// BreakerRecords returns the record of every product circuit that has one,
// those whose TTL has passed at now excluded (strongly consistent).
func (s *Store) BreakerRecords(ctx context.Context, now time.Time) ([]breaker.Record, error) {
	var out []breaker.Record
	err := s.breakerPartition(ctx, breakerPK, func(raw map[string]types.AttributeValue) error {
		var it breakerItem
		if err := attributevalue.UnmarshalMap(raw, &it); err != nil {
			return err
		}
		if live(it.ExpiresAt, now) {
			out = append(out, it.Record)
		}
		return nil
	}, func(err error) error { return fmt.Errorf("reading breakers: %w", err) })
	return out, err
}

// BreakerRecord returns key's record; found is false when it has none, or
// one whose TTL has passed at now.
func (s *Store) BreakerRecord(ctx context.Context, key string, now time.Time) (r breaker.Record, found bool, err error) {
	raw, err := s.breakerItem(ctx, breakerPK, key)
	if err != nil {
		return breaker.Record{}, false, fmt.Errorf("reading breaker %s: %w", key, err)
	}
	if raw == nil {
		return breaker.Record{}, false, nil
	}
	var it breakerItem
	if err := attributevalue.UnmarshalMap(raw, &it); err != nil {
		return breaker.Record{}, false, err
	}
	return it.Record, live(it.ExpiresAt, now), nil
}

// PutBreaker stores next as its key's record until expiresAt, if the
// stored record's version is still prev — or, when prev is 0, if there is
// none whose TTL has not passed at now. A lost race is breaker.ErrConflict.
func (s *Store) PutBreaker(ctx context.Context, next breaker.Record, prev int64, expiresAt, now time.Time) error {
	return s.putBreakerItem(ctx, keyOf(breakerPK, next.Key), nil, next, prev, expiresAt, now)
}

// DeleteBreaker deletes key's record if its version is still prev; a lost
// race is breaker.ErrConflict.
func (s *Store) DeleteBreaker(ctx context.Context, key string, prev int64) error {
	return breakerWritten(s.deleteBreakerItem(ctx, keyOf(breakerPK, key), prev), "breaker "+key)
}

// ResetBreaker deletes key's record, whatever it holds.
func (s *Store) ResetBreaker(ctx context.Context, key string) error {
	if _, err := s.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(s.table), Key: keyOf(breakerPK, key)}); err != nil {
		return fmt.Errorf("resetting breaker %s: %w", key, err)
	}
	return nil
}

// BreakerTargets returns owner's target slots, those whose TTL has passed
// at now excluded (one strongly consistent Query of the owner's partition).
func (s *Store) BreakerTargets(ctx context.Context, owner string, now time.Time) ([]breaker.TargetRecord, error) {
	var out []breaker.TargetRecord
	err := s.breakerPartition(ctx, breakerTargetPK(owner), func(raw map[string]types.AttributeValue) error {
		var it breakerTargetItem
		if err := attributevalue.UnmarshalMap(raw, &it); err != nil {
			return err
		}
		if live(it.ExpiresAt, now) { // expired: its slot is free
			out = append(out, breaker.TargetRecord{Record: it.Record, Host: it.Host, Slot: it.Slot})
		}
		return nil
	}, func(err error) error { return fmt.Errorf("reading the target breakers of %s: %w", owner, err) })
	return out, err
}

// BreakerTarget returns the record in owner's slot; found is false when the
// slot is empty, or its record's TTL has passed at now.
func (s *Store) BreakerTarget(ctx context.Context, owner, slot string, now time.Time) (r breaker.TargetRecord, found bool, err error) {
	raw, err := s.breakerItem(ctx, breakerTargetPK(owner), slot)
	if err != nil {
		return breaker.TargetRecord{}, false, fmt.Errorf("reading breaker %s of %s: %w", slot, owner, err)
	}
	if raw == nil {
		return breaker.TargetRecord{}, false, nil
	}
	var it breakerTargetItem
	if err := attributevalue.UnmarshalMap(raw, &it); err != nil {
		return breaker.TargetRecord{}, false, err
	}
	return breaker.TargetRecord{Record: it.Record, Host: it.Host, Slot: it.Slot}, live(it.ExpiresAt, now), nil
}

// PutBreakerTarget stores next in owner's slot, beside the host it
// guards, until expiresAt, on the same condition as PutBreaker.
func (s *Store) PutBreakerTarget(ctx context.Context, owner, slot, host string, next breaker.Record, prev int64, expiresAt, now time.Time) error {
	return s.putBreakerItem(ctx, keyOf(breakerTargetPK(owner), slot), map[string]types.AttributeValue{"host": str(host)}, next, prev, expiresAt, now)
}

// DeleteBreakerTarget empties owner's slot if its record's version is
// still prev; a lost race is breaker.ErrConflict.
func (s *Store) DeleteBreakerTarget(ctx context.Context, owner, slot string, prev int64) error {
	return breakerWritten(s.deleteBreakerItem(ctx, keyOf(breakerTargetPK(owner), slot), prev), "breaker "+slot+" of "+owner)
}

// breakerPartition reads every item of partition pk (strongly consistent),
// page by page, handing each to fn; wrap names a failed read.
func (s *Store) breakerPartition(ctx context.Context, pk string, fn func(map[string]types.AttributeValue) error, wrap func(error) error) error {
	e, err := expression.NewBuilder().WithKeyCondition(expression.Key(resources.AttrPK).Equal(expression.Value(pk))).Build()
	if err != nil {
		return err
	}
	in := &dynamodb.QueryInput{
		TableName: aws.String(s.table), KeyConditionExpression: e.KeyCondition(),
		ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(), ConsistentRead: aws.Bool(true),
	}
	for {
		res, err := s.db.Query(ctx, in)
		if err != nil {
			return wrap(err)
		}
		for _, raw := range res.Items {
			if err := fn(raw); err != nil {
				return err
			}
		}
		if len(res.LastEvaluatedKey) == 0 {
			return nil
		}
		in.ExclusiveStartKey = res.LastEvaluatedKey
	}
}

// breakerItem reads one item (strongly consistent); nil when there is none.
func (s *Store) breakerItem(ctx context.Context, pk, sk string) (map[string]types.AttributeValue, error) {
	res, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(s.table), Key: keyOf(pk, sk), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return nil, err
	}
	return res.Item, nil
}

// breakerCondition is the condition of a write over the version prev (0:
// no record, or one whose TTL has passed at now).
func breakerCondition(prev int64, now time.Time) (expression.Expression, error) {
	cond := expression.AttributeNotExists(expression.Name(resources.AttrPK)).
		Or(expression.Name("expiresAt").LessThanEqual(expression.Value(now.Unix())))
	if prev > 0 {
		cond = expression.Name("version").Equal(expression.Value(prev))
	}
	return expression.NewBuilder().WithCondition(cond).Build()
}

func (s *Store) putBreakerItem(ctx context.Context, key, extra map[string]types.AttributeValue, next breaker.Record, prev int64, expiresAt, now time.Time) error {
	e, err := breakerCondition(prev, now)
	if err != nil {
		return err
	}
	av, err := attributevalue.MarshalMap(breakerItem{Record: next, ExpiresAt: expiresAt.Unix()})
	if err != nil {
		return err
	}
	for k, v := range extra {
		av[k] = v
	}
	for k, v := range key {
		av[k] = v
	}
	_, err = s.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(s.table), Item: av,
		ConditionExpression: e.Condition(), ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(),
	})
	return breakerWritten(err, "breaker "+next.Key)
}

// deleteBreakerItem deletes the item at key if its version is still prev.
func (s *Store) deleteBreakerItem(ctx context.Context, key map[string]types.AttributeValue, prev int64) error {
	e, err := breakerCondition(prev, time.Time{})
	if err != nil {
		return err
	}
	_, err = s.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName: aws.String(s.table), Key: key,
		ConditionExpression: e.Condition(), ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(),
	})
	return err
}

// breakerWritten maps the error of a write of what: a failed condition is
// breaker.ErrConflict.
func breakerWritten(err error, what string) error {
	if isConditionFailed(err) {
		return breaker.ErrConflict
	}
	if err != nil {
		return fmt.Errorf("writing %s: %w", what, err)
	}
	return nil
}
