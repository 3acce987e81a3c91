package stream

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/conveyor/conveyor/internal/ids"
	"github.com/conveyor/conveyor/internal/resources"
)

// ErrLeaseLost is returned by Renew when the slot expired and was taken.
var ErrLeaseLost = errors.New("stream slot lost")

// Leases caps each user's open streams across every instance: a user has
// Max slot items in the table; a stream holds one by a conditional write
// (free, or its lease ended) and renews it while it runs, so the count
// holds across Lambda instances, and the slots of a crashed instance free
// themselves after TTL. Opening costs one to Max conditional writes;
// a running stream renews every TTL/3 (a write, no read).
type Leases struct {
	DB    *dynamodb.Client
	Table string
	// Max is the number of slots per user.
	Max int
	// TTL is how long a slot is held without renewal.
	TTL time.Duration
	Now func() time.Time
}

// Lease is one held slot.
type Lease struct {
	l      *Leases
	user   string
	slot   int
	holder string
}

func leasePK(user string) string { return "SSE#" + user }
func slotSK(n int) string        { return "SLOT#" + strconv.Itoa(n) }

func (l *Leases) key(user string, n int) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		resources.AttrPK: &types.AttributeValueMemberS{Value: leasePK(user)},
		resources.AttrSK: &types.AttributeValueMemberS{Value: slotSK(n)},
	}
}

// Acquire takes a free slot of user's. When every slot is held it tries
// again every wait/4 until wait has passed (a stream whose client just left
// frees its slot within a poll interval), then returns ErrTooMany.
func (l *Leases) Acquire(ctx context.Context, user string, wait time.Duration) (*Lease, error) {
	holder := ids.New("sse")
	deadline := time.Now().Add(wait)
	for {
		lease, err := l.acquireOnce(ctx, user, holder)
		if !errors.Is(err, ErrTooMany) || !time.Now().Before(deadline) {
			return lease, err
		}
		select {
		case <-ctx.Done():
			return nil, ErrTooMany
		case <-time.After(max(wait/4, time.Millisecond)):
		}
	}
}

// acquireOnce tries each slot once.
func (l *Leases) acquireOnce(ctx context.Context, user, holder string) (*Lease, error) {
	now := l.Now()
	start := rand.IntN(l.Max) // spread concurrent opens over the slots
	for i := range l.Max {
		n := (start + i) % l.Max
		free := expression.AttributeNotExists(expression.Name(resources.AttrPK)).
			Or(expression.Name("leaseUntilMs").LessThan(expression.Value(now.UnixMilli())))
		e, err := expression.NewBuilder().WithCondition(free).Build()
		if err != nil {
			return nil, err
		}
		item := l.key(user, n)
		item["holder"] = &types.AttributeValueMemberS{Value: holder}
		item["leaseUntilMs"] = &types.AttributeValueMemberN{Value: strconv.FormatInt(now.Add(l.TTL).UnixMilli(), 10)}
		item[resources.AttrExpiresAt] = &types.AttributeValueMemberN{Value: strconv.FormatInt(now.Add(l.TTL+time.Hour).Unix(), 10)}
		_, err = l.DB.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(l.Table), Item: item,
			ConditionExpression: e.Condition(), ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values()})
		var ccf *types.ConditionalCheckFailedException
		if errors.As(err, &ccf) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("taking a stream slot: %w", err)
		}
		return &Lease{l: l, user: user, slot: n, holder: holder}, nil
	}
	return nil, ErrTooMany
}

func (x *Lease) held() (expression.Expression, error) {
	return expression.NewBuilder().WithCondition(expression.Name("holder").Equal(expression.Value(x.holder))).Build()
}

// Renew extends the lease; ErrLeaseLost when another stream took the slot.
func (x *Lease) Renew(ctx context.Context) error {
	now := x.l.Now()
	cond := expression.Name("holder").Equal(expression.Value(x.holder))
	upd := expression.Set(expression.Name("leaseUntilMs"), expression.Value(now.Add(x.l.TTL).UnixMilli())).
		Set(expression.Name(resources.AttrExpiresAt), expression.Value(now.Add(x.l.TTL+time.Hour).Unix()))
	e, err := expression.NewBuilder().WithCondition(cond).WithUpdate(upd).Build()
	if err != nil {
		return err
	}
	_, err = x.l.DB.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(x.l.Table), Key: x.l.key(x.user, x.slot),
		ConditionExpression: e.Condition(), UpdateExpression: e.Update(), ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values()})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return ErrLeaseLost
	}
	if err != nil {
		return fmt.Errorf("renewing a stream slot: %w", err)
	}
	return nil
}

// Release frees the slot if this lease still holds it.
func (x *Lease) Release(ctx context.Context) error {
	e, err := x.held()
	if err != nil {
		return err
	}
	_, err = x.l.DB.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(x.l.Table), Key: x.l.key(x.user, x.slot),
		ConditionExpression: e.Condition(), ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values()})
	var ccf *types.ConditionalCheckFailedException
	if err != nil && !errors.As(err, &ccf) {
		return fmt.Errorf("releasing a stream slot: %w", err)
	}
	return nil
}
