// Package scheduler keeps the users' recurring schedules in EventBridge
// Scheduler (schedule.Backend): the adapter of the Scheduler API. Only the
// functions that create, change or delete schedules (schedules) link it.
package scheduler

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	sdk "github.com/aws/aws-sdk-go-v2/service/scheduler"
	"github.com/aws/aws-sdk-go-v2/service/scheduler/types"

	"github.com/conveyor/conveyor/internal/config"
	"github.com/conveyor/conveyor/internal/schedule"
)

// API is the part of the Scheduler client a Backend uses.
type API interface {
	CreateSchedule(ctx context.Context, in *sdk.CreateScheduleInput, optFns ...func(*sdk.Options)) (*sdk.CreateScheduleOutput, error)
	UpdateSchedule(ctx context.Context, in *sdk.UpdateScheduleInput, optFns ...func(*sdk.Options)) (*sdk.UpdateScheduleOutput, error)
	DeleteSchedule(ctx context.Context, in *sdk.DeleteScheduleInput, optFns ...func(*sdk.Options)) (*sdk.DeleteScheduleOutput, error)
}

// Backend keeps one EventBridge Scheduler schedule per definition, in
// Group, named by the schedule id, invoking TargetARN (the recovery
// function) through RoleARN with the tick as its input
// (schedule.TickInput). Scheduler retries a failed invocation (the tick is
// idempotent); a schedule that the account's quota refuses is a
// *schedule.UnavailableError and the definition is not kept.
type Backend struct {
	Client    API
	Group     string
	TargetARN string
	RoleARN   string
}

// New returns the Backend of group, with a Scheduler client made from
// awsCfg.
func New(awsCfg aws.Config, group, targetARN, roleARN string) Backend {
	return Backend{Client: sdk.NewFromConfig(awsCfg), Group: group, TargetARN: targetARN, RoleARN: roleARN}
}

// For is the Backend of the schedule group cfg names, with a Scheduler
// client made from awsCfg, or nil when it names none (the schedules are
// then kept in the table only, fired by schedule.Service.Fire): what the
// functions that manage schedules (schedules) or fire their ticks
// (recovery) give schedule.Config.Backend.
func For(awsCfg aws.Config, cfg config.Config) schedule.Backend {
	if cfg.ScheduleGroup == "" {
		return nil
	}
	return New(awsCfg, cfg.ScheduleGroup, cfg.ScheduleTargetARN, cfg.ScheduleRoleARN)
}

// Put creates or updates sc's schedule.
func (b Backend) Put(ctx context.Context, sc schedule.Schedule, e schedule.Expr) error {
	state := types.ScheduleStateEnabled
	if sc.Status != schedule.Active {
		state = types.ScheduleStateDisabled
	}
	tz := sc.Timezone
	if e.Rate > 0 {
		tz = "UTC"
	}
	target := &types.Target{
		Arn: aws.String(b.TargetARN), RoleArn: aws.String(b.RoleARN), Input: aws.String(schedule.TickInput(sc)),
		RetryPolicy: &types.RetryPolicy{MaximumRetryAttempts: aws.Int32(3), MaximumEventAgeInSeconds: aws.Int32(3600)},
	}
	flex := &types.FlexibleTimeWindow{Mode: types.FlexibleTimeWindowModeOff}
	desc := aws.String(truncate(sc.Name, 512))
	// A rate's ticks keep their phase (CreatedAt + k·rate) across a
	// pause: Scheduler starts counting at StartDate, which must not lie
	// in the past, so it is the next tick.
	var start *time.Time
	if e.Rate > 0 {
		start = aws.Time(e.Next(sc.UpdatedAt))
	}
	_, err := b.Client.CreateSchedule(ctx, &sdk.CreateScheduleInput{
		Name: aws.String(sc.ID), GroupName: aws.String(b.Group), ScheduleExpression: aws.String(e.AWS()),
		ScheduleExpressionTimezone: aws.String(tz), State: state, Target: target, FlexibleTimeWindow: flex,
		Description: desc, StartDate: start,
	})
	var conflict *types.ConflictException
	if errors.As(err, &conflict) {
		_, err = b.Client.UpdateSchedule(ctx, &sdk.UpdateScheduleInput{
			Name: aws.String(sc.ID), GroupName: aws.String(b.Group), ScheduleExpression: aws.String(e.AWS()),
			ScheduleExpressionTimezone: aws.String(tz), State: state, Target: target, FlexibleTimeWindow: flex,
			Description: desc, StartDate: start,
		})
	}
	return wrap(err, "putting schedule "+sc.ID)
}

// Delete removes the schedule of id; a missing one is no error.
func (b Backend) Delete(ctx context.Context, id string) error {
	_, err := b.Client.DeleteSchedule(ctx, &sdk.DeleteScheduleInput{Name: aws.String(id), GroupName: aws.String(b.Group)})
	var nf *types.ResourceNotFoundException
	if errors.As(err, &nf) {
		return nil
	}
	return wrap(err, "deleting schedule "+id)
}

func wrap(err error, doing string) error {
	if err == nil {
		return nil
	}
	var quota *types.ServiceQuotaExceededException
	var throttled *types.ThrottlingException
	if errors.As(err, &quota) || errors.As(err, &throttled) {
		return &schedule.UnavailableError{Err: err}
	}
	return fmt.Errorf("%s: %w", doing, err)
}

func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) > n {
		return string(r[:n])
	}
	return s
}
