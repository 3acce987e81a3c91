package handler_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/conveyor/conveyor/internal/handler"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/resources"
	"github.com/conveyor/conveyor/internal/schedule"
	"github.com/conveyor/conveyor/localstack/awstest"
)

// TestRunsEveryScheduledTask wires the function as its binary does and
// runs each task its schedules name on an empty table: recover, release
// and retain (over every shard, and over each part's shards as the
// definition's schedules send them) succeed; a user's tick without its time is dropped (a retry could not
// fix it), and so is the late tick of a schedule deleted meanwhile.
func TestRunsEveryScheduledTask(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := awstest.Handler(t, resources.FuncRecovery, nil, handler.NewRecovery)
	event := func(detail any) events.EventBridgeEvent {
		b, err := json.Marshal(detail)
		if err != nil {
			t.Fatal(err)
		}
		return events.EventBridgeEvent{DetailType: "Scheduled Event", Detail: b}
	}
	for _, task := range []string{resources.TaskRecover, resources.TaskRelease, resources.TaskRetain} {
		if err := h(ctx, event(map[string]string{"task": task})); err != nil {
			t.Errorf("task %s: %v", task, err)
		}
	}
	// As the schedules send them: retention's parts name their shards.
	for _, sc := range resources.For(job.Local).Schedules {
		if err := h(ctx, events.EventBridgeEvent{DetailType: "Scheduled Event", Detail: json.RawMessage(sc.DetailJSON())}); err != nil {
			t.Errorf("schedule %s (%s): %v", sc.Name, sc.DetailJSON(), err)
		}
	}
	if err := h(ctx, event(map[string]string{"task": schedule.TaskTick, "scheduleId": "sch_x"})); err != nil {
		t.Errorf("a tick without its time: %v, want it dropped", err)
	}
	tick := map[string]string{"task": schedule.TaskTick, "scheduleId": "sch_missing", "owner": "u-x", "at": "2026-11-23T10:00:00Z"}
	if err := h(ctx, event(tick)); err != nil {
		t.Errorf("a tick of a deleted schedule: %v, want it dropped", err)
	}
}
