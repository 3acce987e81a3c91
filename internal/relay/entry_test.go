package relay_test

import (
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/conveyor/conveyor/internal/relay"
)

func TestEntrySize(t *testing.T) {
	t.Parallel()
	e := relay.Entry{Source: "conveyor.staging", DetailType: "job.started", Detail: `{"a":1}`, Time: time.Now()}
	if got, want := relay.EntrySize(e), 14+len("conveyor.staging")+len("job.started")+len(`{"a":1}`); got != want {
		t.Errorf("EntrySize = %d, want %d", got, want)
	}
}

func TestIsEventItem(t *testing.T) {
	t.Parallel()
	keys := func(sk string) map[string]events.DynamoDBAttributeValue {
		return map[string]events.DynamoDBAttributeValue{"pk": events.NewStringAttribute("JOB#job_a"), "sk": events.NewStringAttribute(sk)}
	}
	if !relay.IsEventItem(keys("EVT#000000000002")) {
		t.Error("an event item's keys are not recognised")
	}
	if relay.IsEventItem(keys("JOB")) {
		t.Error("a job item's keys are taken for an event's")
	}
}
