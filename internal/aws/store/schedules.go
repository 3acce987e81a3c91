package store

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/conveyor/conveyor/internal/resources"
	"github.com/conveyor/conveyor/internal/schedule"
)

// A recurring schedule (internal/schedule) is one item of the table, under
// its owner's partition ("SCHED#<owner>", sort key the schedule id):
// listing a user's schedules is one Query, and a tick names its owner to
// read its schedule.

// ScheduleRecord and ScheduleRun are the schedules' records
// (schedule.Record, schedule.RecordRun).
type (
	ScheduleRecord = schedule.Record
	ScheduleRun    = schedule.RecordRun
)

// scheduleDocs are the attributes of a schedule item that hold documents
// (EncodeDocs): its job template.
var scheduleDocs = []string{"job"}

func schedulePK(owner string) string { return "SCHED#" + owner }

// unmarshalSchedule reads a schedule item into r.
func unmarshalSchedule(item map[string]types.AttributeValue, r *ScheduleRecord) error {
	item, err := DecodeDocs(item, scheduleDocs...)
	if err != nil {
		return err
	}
	return attributevalue.UnmarshalMap(item, r)
}

// CreateSchedule writes r as a new item; ErrConflict when the owner has a
// schedule with its id already.
func (s *Store) CreateSchedule(ctx context.Context, r ScheduleRecord) error {
	return s.putSchedule(ctx, r, expression.AttributeNotExists(expression.Name(resources.AttrPK)))
}

// ReplaceSchedule writes r over the item of version prev; ErrConflict when
// the item changed (or went) since it was read.
func (s *Store) ReplaceSchedule(ctx context.Context, r ScheduleRecord, prev int64) error {
	return s.putSchedule(ctx, r, expression.Name("version").Equal(expression.Value(prev)))
}

func (s *Store) putSchedule(ctx context.Context, r ScheduleRecord, cond expression.ConditionBuilder) error {
	item, err := attributevalue.MarshalMap(r)
	if err == nil {
		err = EncodeDocs(item, scheduleDocs...)
	}
	if err != nil {
		return fmt.Errorf("encoding schedule %s: %w", r.ID, err)
	}
	item[resources.AttrPK], item[resources.AttrSK] = str(schedulePK(r.Owner)), str(r.ID)
	e := condition(cond)
	_, err = s.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(s.table), Item: item, ConditionExpression: e.Condition(),
		ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(),
	})
	switch {
	case isConditionFailed(err):
		return ErrConflict
	case err != nil:
		return fmt.Errorf("writing schedule %s: %w", r.ID, err)
	}
	return nil
}

// GetSchedule reads owner's schedule id (strongly consistent); ErrNotFound
// when there is none.
func (s *Store) GetSchedule(ctx context.Context, owner, id string) (ScheduleRecord, error) {
	var r ScheduleRecord
	err := s.getWith(ctx, schedulePK(owner), id, func(item map[string]types.AttributeValue) error {
		return unmarshalSchedule(item, &r)
	})
	if err != nil {
		return ScheduleRecord{}, err
	}
	return r, nil
}

// ListSchedules returns owner's schedules in id order (strongly consistent).
func (s *Store) ListSchedules(ctx context.Context, owner string) ([]ScheduleRecord, error) {
	e, err := scheduleKeys(owner)
	if err != nil {
		return nil, err
	}
	p := dynamodb.NewQueryPaginator(s.db, &dynamodb.QueryInput{
		TableName: aws.String(s.table), KeyConditionExpression: e.KeyCondition(),
		ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(), ConsistentRead: aws.Bool(true),
	})
	list := []ScheduleRecord{}
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("listing schedules: %w", err)
		}
		for _, item := range page.Items {
			var r ScheduleRecord
			if err := unmarshalSchedule(item, &r); err != nil {
				return nil, fmt.Errorf("decoding schedules: %w", err)
			}
			list = append(list, r)
		}
	}
	return list, nil
}

// CountSchedules counts owner's schedules.
func (s *Store) CountSchedules(ctx context.Context, owner string) (int, error) {
	e, err := scheduleKeys(owner)
	if err != nil {
		return 0, err
	}
	out, err := s.db.Query(ctx, &dynamodb.QueryInput{
		TableName: aws.String(s.table), KeyConditionExpression: e.KeyCondition(), Select: types.SelectCount,
		ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(),
	})
	if err != nil {
		return 0, fmt.Errorf("counting schedules: %w", err)
	}
	return int(out.Count), nil
}

// DeleteSchedule removes owner's schedule id; a missing one is no error.
func (s *Store) DeleteSchedule(ctx context.Context, owner, id string) error {
	if _, err := s.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(s.table), Key: keyOf(schedulePK(owner), id)}); err != nil {
		return fmt.Errorf("deleting schedule %s: %w", id, err)
	}
	return nil
}

// scheduleKeys is the key condition of owner's schedules.
func scheduleKeys(owner string) (expression.Expression, error) {
	e, err := expression.NewBuilder().WithKeyCondition(
		expression.Key(resources.AttrPK).Equal(expression.Value(schedulePK(owner)))).Build()
	if err != nil {
		return expression.Expression{}, fmt.Errorf("building the schedules' key condition: %w", err)
	}
	return e, nil
}
