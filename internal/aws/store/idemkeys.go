package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
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

// The states of a client idempotency key's record.
const (
	// KeyInFlight: the first request with the key is being handled.
	KeyInFlight = "in_flight"
	// KeyDone: the first request's response is kept for replay.
	KeyDone = "done"
)

const keySK = "IKEY"

// keyPK is the record's partition key: per owner, per route (scope), per
// key. The key is hashed: a client's key is opaque and may be long.
func keyPK(owner, scope, key string) string {
	h := sha256.Sum256([]byte(scope + "\n" + key))
	return "IKEY#" + owner + "#" + hex.EncodeToString(h[:])
}

// KeyRecord is what the table keeps of a client's Idempotency-Key
// (httpapi.Idempotency): the request it first came with, and once that
// request was answered, the answer. It expires (TTL, and readers ignore it)
// at ExpiresAt.
type KeyRecord struct {
	// Owner, Scope ("POST /v1/jobs") and Key name the record.
	Owner string `dynamodbav:"owner"`
	Scope string `dynamodbav:"scope"`
	Key   string `dynamodbav:"-"`
	// Fingerprint is the hash of the first request's body.
	Fingerprint string `dynamodbav:"fingerprint"`
	// State is KeyInFlight or KeyDone.
	State string `dynamodbav:"state"`
	// Token names the request that holds an in-flight record: only it
	// completes or abandons it.
	Token string `dynamodbav:"token"`
	// StartedMs is when the in-flight request began (Unix milliseconds).
	StartedMs int64 `dynamodbav:"startedMs"`
	// Status, Headers and Body are the kept response (KeyDone).
	Status  int               `dynamodbav:"status,omitempty"`
	Headers map[string]string `dynamodbav:"headers,omitempty"`
	Body    string            `dynamodbav:"body,omitempty"`
	// ExpiresAt is the epoch second the record lapses.
	ExpiresAt int64 `dynamodbav:"expiresAt"`
}

// ClaimKey records rec (in flight) unless an unexpired record of the same
// owner, scope and key exists; an in-flight record older than staleBefore
// (its request died unanswered) is taken over. One conditional write: of
// two concurrent claims, one wins. When another record holds the key it
// returns that record and claimed=false.
func (s *Store) ClaimKey(ctx context.Context, rec KeyRecord, staleBefore time.Time) (held KeyRecord, claimed bool, err error) {
	item, err := attributevalue.MarshalMap(rec)
	if err != nil {
		return KeyRecord{}, false, fmt.Errorf("encoding an idempotency key: %w", err)
	}
	pk := keyPK(rec.Owner, rec.Scope, rec.Key)
	item[resources.AttrPK], item[resources.AttrSK] = str(pk), str(keySK)
	cond := expression.AttributeNotExists(expression.Name(resources.AttrPK)).
		Or(expression.Name(resources.AttrExpiresAt).LessThanEqual(expression.Value(s.now().Unix()))).
		Or(expression.Name("state").Equal(expression.Value(KeyInFlight)).
			And(expression.Name("startedMs").LessThan(expression.Value(staleBefore.UnixMilli()))))
	e, err := expression.NewBuilder().WithCondition(cond).Build()
	if err != nil {
		return KeyRecord{}, false, err
	}
	_, err = s.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(s.table), Item: item,
		ConditionExpression: e.Condition(), ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	var ccf *types.ConditionalCheckFailedException
	if !errors.As(err, &ccf) {
		if err != nil {
			return KeyRecord{}, false, fmt.Errorf("claiming an idempotency key: %w", err)
		}
		return rec, true, nil
	}
	old := ccf.Item
	if old == nil {
		res, gerr := s.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(s.table), Key: keyOf(pk, keySK), ConsistentRead: aws.Bool(true)})
		if gerr != nil {
			return KeyRecord{}, false, fmt.Errorf("reading an idempotency key: %w", gerr)
		}
		old = res.Item
	}
	if old == nil {
		// Gone between the write and the read: the caller may try again.
		return KeyRecord{}, false, ErrConflict
	}
	if err := attributevalue.UnmarshalMap(old, &held); err != nil {
		return KeyRecord{}, false, fmt.Errorf("decoding an idempotency key: %w", err)
	}
	held.Key = rec.Key
	return held, false, nil
}

// CompleteKey keeps the answer to the request that holds rec's key (by
// rec.Token): a later request with the key and the same body gets it. It
// returns ErrConflict when the request no longer holds the key.
func (s *Store) CompleteKey(ctx context.Context, rec KeyRecord) error {
	rec.State = KeyDone
	item, err := attributevalue.MarshalMap(rec)
	if err != nil {
		return fmt.Errorf("encoding an idempotency key: %w", err)
	}
	item[resources.AttrPK], item[resources.AttrSK] = str(keyPK(rec.Owner, rec.Scope, rec.Key)), str(keySK)
	return s.keyWrite(ctx, item, nil, rec.Token)
}

// ReleaseKey drops the record the request named by token holds, so that
// the key may be used again at once (the request was not answered with a
// success). Nothing happens when the request no longer holds it.
func (s *Store) ReleaseKey(ctx context.Context, owner, scope, key, token string) error {
	err := s.keyWrite(ctx, nil, keyOf(keyPK(owner, scope, key), keySK), token)
	if errors.Is(err, ErrConflict) {
		return nil
	}
	return err
}

// keyWrite puts item, or deletes key when item is nil, if the record is
// still held by token.
func (s *Store) keyWrite(ctx context.Context, item, key map[string]types.AttributeValue, token string) error {
	cond := expression.Name("token").Equal(expression.Value(token)).And(expression.Name("state").Equal(expression.Value(KeyInFlight)))
	e, err := expression.NewBuilder().WithCondition(cond).Build()
	if err != nil {
		return err
	}
	if item != nil {
		_, err = s.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.table), Item: item,
			ConditionExpression: e.Condition(), ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values()})
	} else {
		_, err = s.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(s.table), Key: key,
			ConditionExpression: e.Condition(), ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values()})
	}
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return ErrConflict
	}
	if err != nil {
		return fmt.Errorf("writing an idempotency key: %w", err)
	}
	return nil
}
