package store

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/conveyor/conveyor/internal/resources"
)

// A user's open SSE streams hold slot items ("SSE#<user>" / "SLOT#<n>"),
// one each, so that a cap on them holds across every instance of the
// stream function (internal/stream, Leases). A slot's item carries its
// holder and the end of its lease; it expires an hour after that lease.

func streamSlotKey(user string, n int) map[string]types.AttributeValue {
	return keyOf("SSE#"+user, "SLOT#"+strconv.Itoa(n))
}

// streamSlotTTL is how long past its lease a slot's item is kept.
const streamSlotTTL = time.Hour

// TakeStreamSlot gives slot n of user to holder until until, if it is
// free at now: no item, or one whose lease ended before now. It is
// ErrConflict when another holder has it.
func (s *Store) TakeStreamSlot(ctx context.Context, user string, n int, holder string, now, until time.Time) error {
	free := expression.AttributeNotExists(expression.Name(resources.AttrPK)).
		Or(expression.Name("leaseUntilMs").LessThan(expression.Value(now.UnixMilli())))
	e, err := expression.NewBuilder().WithCondition(free).Build()
	if err != nil {
		return err
	}
	item := streamSlotKey(user, n)
	item["holder"] = str(holder)
	item["leaseUntilMs"] = &types.AttributeValueMemberN{Value: strconv.FormatInt(until.UnixMilli(), 10)}
	item[resources.AttrExpiresAt] = &types.AttributeValueMemberN{Value: strconv.FormatInt(until.Add(streamSlotTTL).Unix(), 10)}
	_, err = s.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.table), Item: item,
		ConditionExpression: e.Condition(), ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values()})
	if isConditionFailed(err) {
		return ErrConflict
	}
	if err != nil {
		return fmt.Errorf("taking a stream slot: %w", err)
	}
	return nil
}

// RenewStreamSlot extends holder's lease of slot n of user to until (a
// write, no read). It is ErrConflict when holder no longer has the slot.
func (s *Store) RenewStreamSlot(ctx context.Context, user string, n int, holder string, until time.Time) error {
	cond := expression.Name("holder").Equal(expression.Value(holder))
	upd := expression.Set(expression.Name("leaseUntilMs"), expression.Value(until.UnixMilli())).
		Set(expression.Name(resources.AttrExpiresAt), expression.Value(until.Add(streamSlotTTL).Unix()))
	e, err := expression.NewBuilder().WithCondition(cond).WithUpdate(upd).Build()
	if err != nil {
		return err
	}
	_, err = s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(s.table), Key: streamSlotKey(user, n),
		ConditionExpression: e.Condition(), UpdateExpression: e.Update(), ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values()})
	if isConditionFailed(err) {
		return ErrConflict
	}
	if err != nil {
		return fmt.Errorf("renewing a stream slot: %w", err)
	}
	return nil
}

// ReleaseStreamSlot frees slot n of user if holder still has it; when
// another holder does, it does nothing.
func (s *Store) ReleaseStreamSlot(ctx context.Context, user string, n int, holder string) error {
	e, err := expression.NewBuilder().WithCondition(expression.Name("holder").Equal(expression.Value(holder))).Build()
	if err != nil {
		return err
	}
	_, err = s.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(s.table), Key: streamSlotKey(user, n),
		ConditionExpression: e.Condition(), ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values()})
	if err != nil && !isConditionFailed(err) {
		return fmt.Errorf("releasing a stream slot: %w", err)
	}
	return nil
}
