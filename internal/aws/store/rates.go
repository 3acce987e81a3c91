package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/conveyor/conveyor/internal/resources"
)

// An owner's request rate is one item ("RATE#<owner>" / "RATE"), shared by
// every instance of the API function (internal/ratelimit): its bucket's
// theoretical arrival time in Unix microseconds (tatUs). A lease moves it
// forward by a block of units in one conditional write on its previous
// value. The item expires RateBucketTTL after its TAT: by then the bucket
// has been full for that long, and a bucket with no item is a full one.

func rateKey(bucket string) map[string]types.AttributeValue {
	return keyOf("RATE#"+bucket, "RATE")
}

// RateBucketTTL is how long past its TAT a rate bucket's item is kept.
const RateBucketTTL = time.Hour

// RateLease moves bucket's TAT from prev (zero: the bucket has no item) to
// next, in one conditional UpdateItem, if it is still prev. When another
// instance moved it, nothing changes and it reports false with the TAT it
// found (zero: no item), read from the refused write's answer
// (ReturnValuesOnConditionCheckFailure ALL_OLD), or by one strongly
// consistent read where an emulator answers without it.
func (s *Store) RateLease(ctx context.Context, bucket string, prev, next time.Time) (bool, time.Time, error) {
	cond := expression.AttributeNotExists(expression.Name(resources.AttrPK))
	if !prev.IsZero() {
		cond = expression.Name("tatUs").Equal(expression.Value(prev.UnixMicro()))
	}
	upd := expression.Set(expression.Name("tatUs"), expression.Value(next.UnixMicro())).
		Set(expression.Name(resources.AttrExpiresAt), expression.Value(next.Add(RateBucketTTL).Unix()))
	e, err := expression.NewBuilder().WithCondition(cond).WithUpdate(upd).Build()
	if err != nil {
		return false, time.Time{}, err
	}
	_, err = s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(s.table), Key: rateKey(bucket),
		ConditionExpression: e.Condition(), UpdateExpression: e.Update(), ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld})
	var ccf *types.ConditionalCheckFailedException
	if !errors.As(err, &ccf) {
		if err != nil {
			return false, time.Time{}, fmt.Errorf("leasing a rate bucket's units: %w", err)
		}
		return true, time.Time{}, nil
	}
	old := ccf.Item
	if old == nil {
		res, gerr := s.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(s.table), Key: rateKey(bucket), ConsistentRead: aws.Bool(true)})
		if gerr != nil {
			return false, time.Time{}, fmt.Errorf("reading a rate bucket: %w", gerr)
		}
		old = res.Item
	}
	return false, tatOf(old), nil
}

// tatOf is a rate bucket item's TAT (zero: no item, or none in it).
func tatOf(item map[string]types.AttributeValue) time.Time {
	v, ok := item["tatUs"].(*types.AttributeValueMemberN)
	if !ok {
		return time.Time{}
	}
	us, err := strconv.ParseInt(v.Value, 10, 64)
	if err != nil {
		return time.Time{}
	}
	return time.UnixMicro(us).UTC()
}
