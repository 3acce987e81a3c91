package schedule

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	"github.com/aws/aws-sdk-go-v2/service/scheduler/types"
)

// TaskTick is the recovery function's task for a schedule's tick.
const TaskTick = "schedule"

// ScheduledTime is EventBridge Scheduler's context attribute for the
// tick's scheduled time, replaced in the target's input at each firing.
const ScheduledTime = "<aws.scheduler.scheduled-time>"

// TickDetail is the detail of the event a schedule's target receives.
type TickDetail struct {
	Task       string `json:"task"`
	ScheduleID string `json:"scheduleId"`
	Owner      string `json:"owner"`
	// At is the tick's scheduled time (RFC 3339).
	At string `json:"at"`
}

// TickInput is the target input of schedule sc: an EventBridge-shaped
// event whose detail names the tick (see TickDetail).
func TickInput(sc Schedule) string {
	// Unescaped: Scheduler replaces the context attribute only as written.
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(map[string]any{
		"version": "0", "source": "aws.scheduler", "detail-type": "Scheduled Event",
		"detail": TickDetail{Task: TaskTick, ScheduleID: sc.ID, Owner: sc.Owner, At: ScheduledTime},
	})
	return strings.TrimSpace(b.String())
}

// SchedulerBackend keeps one EventBridge Scheduler schedule per
// definition, in Group, named by the schedule id, invoking TargetARN (the
// recovery function) through RoleARN. Scheduler retries a failed
// invocation (the tick is idempotent); a schedule that the account's
// quota refuses is an *UnavailableError and the definition is not kept.
type SchedulerBackend struct {
	Client    *scheduler.Client
	Group     string
	TargetARN string
	RoleARN   string
}

// UnavailableError is Scheduler refusing for capacity: the account's
// schedule quota (1,000,000 per Region by default, adjustable) or its
// request rate. The API answers 503.
type UnavailableError struct{ Err error }

func (e *UnavailableError) Error() string {
	return "the scheduler cannot take this schedule now: " + e.Err.Error()
}
func (e *UnavailableError) Unwrap() error { return e.Err }

// Put creates or updates sc's schedule.
func (b SchedulerBackend) Put(ctx context.Context, sc Schedule, e Expr) error {
	state := types.ScheduleStateEnabled
	if sc.Status != Active {
		state = types.ScheduleStateDisabled
	}
	tz := sc.Timezone
	if e.Rate > 0 {
		tz = "UTC"
	}
	target := &types.Target{
		Arn: aws.String(b.TargetARN), RoleArn: aws.String(b.RoleARN), Input: aws.String(TickInput(sc)),
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
	_, err := b.Client.CreateSchedule(ctx, &scheduler.CreateScheduleInput{
		Name: aws.String(sc.ID), GroupName: aws.String(b.Group), ScheduleExpression: aws.String(e.AWS()),
		ScheduleExpressionTimezone: aws.String(tz), State: state, Target: target, FlexibleTimeWindow: flex,
		Description: desc, StartDate: start,
	})
	var conflict *types.ConflictException
	if errors.As(err, &conflict) {
		_, err = b.Client.UpdateSchedule(ctx, &scheduler.UpdateScheduleInput{
			Name: aws.String(sc.ID), GroupName: aws.String(b.Group), ScheduleExpression: aws.String(e.AWS()),
			ScheduleExpressionTimezone: aws.String(tz), State: state, Target: target, FlexibleTimeWindow: flex,
			Description: desc, StartDate: start,
		})
	}
	return wrap(err, "putting schedule "+sc.ID)
}

// Delete removes the schedule of id.
func (b SchedulerBackend) Delete(ctx context.Context, id string) error {
	_, err := b.Client.DeleteSchedule(ctx, &scheduler.DeleteScheduleInput{Name: aws.String(id), GroupName: aws.String(b.Group)})
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
		return &UnavailableError{Err: err}
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
