package scheduler_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	sdk "github.com/aws/aws-sdk-go-v2/service/scheduler"

	"github.com/conveyor/conveyor/internal/aws/scheduler"
	"github.com/conveyor/conveyor/internal/schedule"
	"github.com/conveyor/conveyor/localstack/awstest"
)

// TestPutUpdatesAndDeleteForgets keeps one schedule in the emulator's
// Scheduler: created enabled with the tick as its target's input, put
// again paused (an update), deleted, and deleted again without an error.
func TestPutUpdatesAndDeleteForgets(t *testing.T) {
	t.Parallel()
	env := awstest.Provision(t)
	def := env.Res.Definition
	target := "arn:aws:lambda:us-east-1:123456789012:function:" + def.Prefix + "-recovery"
	b := scheduler.New(env.Config, def.ScheduleGroup, target, "arn:aws:iam::123456789012:role/"+def.Prefix+"-scheduler")
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Second)
	sc := schedule.Schedule{ID: "sch_aaaaaaaaaaaaaaaaaaaaaaaaaa", Name: "ping", Rate: "5m", Timezone: "Europe/Moscow",
		Status: schedule.Active, Owner: "u-1", CreatedAt: now, UpdatedAt: now}
	e, err := schedule.ParseRate(sc.Rate, sc.CreatedAt)
	if err != nil {
		t.Fatal(err)
	}
	read := func() *sdk.GetScheduleOutput {
		t.Helper()
		got, err := env.Clients.Scheduler.GetSchedule(ctx, &sdk.GetScheduleInput{Name: aws.String(sc.ID), GroupName: aws.String(def.ScheduleGroup)})
		if err != nil {
			t.Fatalf("reading the schedule: %v", err)
		}
		return got
	}
	if err := b.Put(ctx, sc, e); err != nil {
		t.Fatal(err)
	}
	got := read()
	if aws.ToString(got.ScheduleExpression) != "rate(5 minutes)" || got.State != "ENABLED" || aws.ToString(got.ScheduleExpressionTimezone) != "UTC" ||
		aws.ToString(got.Target.Arn) != target || !strings.Contains(aws.ToString(got.Target.Input), schedule.ScheduledTime) {
		t.Errorf("created %s %s in %s, target %s with %s", aws.ToString(got.ScheduleExpression), got.State,
			aws.ToString(got.ScheduleExpressionTimezone), aws.ToString(got.Target.Arn), aws.ToString(got.Target.Input))
	}
	sc.Status = schedule.Paused
	if err := b.Put(ctx, sc, e); err != nil {
		t.Fatalf("putting it again: %v", err)
	}
	if got := read(); got.State != "DISABLED" {
		t.Errorf("paused: state %s, want DISABLED", got.State)
	}
	if err := b.Delete(ctx, sc.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Clients.Scheduler.GetSchedule(ctx, &sdk.GetScheduleInput{Name: aws.String(sc.ID), GroupName: aws.String(def.ScheduleGroup)}); err == nil {
		t.Error("the schedule is still there after Delete")
	}
	if err := b.Delete(ctx, sc.ID); err != nil {
		t.Errorf("deleting a missing schedule: %v", err)
	}
}
