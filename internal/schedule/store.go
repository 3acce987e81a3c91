package schedule

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/conveyor/conveyor/internal/resources"
	"github.com/conveyor/conveyor/internal/store"
)

// A schedule is one item of the table, under its owner's partition
// ("SCHED#<owner>", sort key the schedule id): listing a user's schedules
// is one Query, and a tick names its owner to read its schedule.

func ownerPK(owner string) string { return "SCHED#" + owner }

func key(owner, id string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		resources.AttrPK: &types.AttributeValueMemberS{Value: ownerPK(owner)},
		resources.AttrSK: &types.AttributeValueMemberS{Value: id},
	}
}

// put writes sc: a new item (replace=false) or, replacing, the version read.
func (s *Service) put(ctx context.Context, sc *Schedule, replace bool) error {
	prev := sc.Version
	sc.Version++
	item, err := attributevalue.MarshalMap(sc)
	if err == nil {
		err = store.EncodeDocs(item, "job")
	}
	if err != nil {
		return fmt.Errorf("encoding schedule %s: %w", sc.ID, err)
	}
	for k, v := range key(sc.Owner, sc.ID) {
		item[k] = v
	}
	cond := expression.AttributeNotExists(expression.Name(resources.AttrPK))
	if replace {
		cond = expression.Name("version").Equal(expression.Value(prev))
	}
	e, err := expression.NewBuilder().WithCondition(cond).Build()
	if err != nil {
		return err
	}
	_, err = s.cfg.DB.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(s.cfg.Table), Item: item, ConditionExpression: e.Condition(),
		ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(),
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		sc.Version = prev
		return errConflict
	}
	if err != nil {
		sc.Version = prev
		return fmt.Errorf("writing schedule %s: %w", sc.ID, err)
	}
	return nil
}

var errConflict = errors.New("schedule changed meanwhile")

func (s *Service) get(ctx context.Context, owner, id string) (Schedule, error) {
	out, err := s.cfg.DB.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(s.cfg.Table), Key: key(owner, id), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return Schedule{}, fmt.Errorf("reading schedule %s: %w", id, err)
	}
	if out.Item == nil {
		return Schedule{}, ErrNotFound
	}
	var sc Schedule
	item, err := store.DecodeDocs(out.Item, "job")
	if err == nil {
		err = attributevalue.UnmarshalMap(item, &sc)
	}
	if err != nil {
		return Schedule{}, fmt.Errorf("decoding schedule %s: %w", id, err)
	}
	if sc.LastRuns == nil {
		sc.LastRuns = []Run{}
	}
	return sc, nil
}

func (s *Service) list(ctx context.Context, owner string) ([]Schedule, error) {
	e, err := expression.NewBuilder().WithKeyCondition(
		expression.Key(resources.AttrPK).Equal(expression.Value(ownerPK(owner)))).Build()
	if err != nil {
		return nil, err
	}
	in := &dynamodb.QueryInput{
		TableName: aws.String(s.cfg.Table), KeyConditionExpression: e.KeyCondition(),
		ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(), ConsistentRead: aws.Bool(true),
	}
	list := []Schedule{}
	p := dynamodb.NewQueryPaginator(s.cfg.DB, in)
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("listing schedules: %w", err)
		}
		items := make([]map[string]types.AttributeValue, len(page.Items))
		for i, item := range page.Items {
			if items[i], err = store.DecodeDocs(item, "job"); err != nil {
				return nil, fmt.Errorf("decoding schedules: %w", err)
			}
		}
		var got []Schedule
		if err := attributevalue.UnmarshalListOfMaps(items, &got); err != nil {
			return nil, fmt.Errorf("decoding schedules: %w", err)
		}
		list = append(list, got...)
	}
	for i := range list {
		if list[i].LastRuns == nil {
			list[i].LastRuns = []Run{}
		}
	}
	return list, nil
}

func (s *Service) count(ctx context.Context, owner string) (int, error) {
	e, err := expression.NewBuilder().WithKeyCondition(
		expression.Key(resources.AttrPK).Equal(expression.Value(ownerPK(owner)))).Build()
	if err != nil {
		return 0, err
	}
	out, err := s.cfg.DB.Query(ctx, &dynamodb.QueryInput{
		TableName: aws.String(s.cfg.Table), KeyConditionExpression: e.KeyCondition(), Select: types.SelectCount,
		ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(),
	})
	if err != nil {
		return 0, fmt.Errorf("counting schedules: %w", err)
	}
	return int(out.Count), nil
}

// update applies fn to the schedule and writes it when fn reports a
// change, re-reading on a race.
func (s *Service) update(ctx context.Context, owner, id string, fn func(*Schedule) bool) (Schedule, error) {
	for range 5 {
		sc, err := s.get(ctx, owner, id)
		if err != nil {
			return Schedule{}, err
		}
		if !fn(&sc) {
			return sc, nil
		}
		switch err := s.put(ctx, &sc, true); {
		case err == nil:
			return sc, nil
		case !errors.Is(err, errConflict):
			return Schedule{}, err
		}
	}
	return Schedule{}, fmt.Errorf("updating schedule %s: %w", id, errConflict)
}

func (s *Service) delete(ctx context.Context, owner, id string) error {
	if _, err := s.cfg.DB.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(s.cfg.Table), Key: key(owner, id)}); err != nil {
		return fmt.Errorf("deleting schedule %s: %w", id, err)
	}
	return nil
}
