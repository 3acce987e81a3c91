package handler_test

import (
	"context"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/conveyor/conveyor/internal/handler"
	"github.com/conveyor/conveyor/internal/resources"
	"github.com/conveyor/conveyor/localstack/awstest"
)

// TestDropsMessagesNoConsumerKnows wires the function as its binary does:
// an unreadable message and one of a kind the system tier does not run are
// dropped, not redelivered forever.
func TestDropsMessagesNoConsumerKnows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := awstest.Handler(t, resources.FuncSystem, nil, handler.NewSystem)
	ev := events.SQSEvent{Records: []events.SQSMessage{
		{MessageId: "m1", Body: "{", Attributes: map[string]string{"MessageGroupId": "g1", "ApproximateReceiveCount": "1"}},
		{MessageId: "m2", Body: `{"kind":"email","jobId":"job_x","send":1}`, Attributes: map[string]string{"MessageGroupId": "g2", "ApproximateReceiveCount": "1"}},
	}}
	resp, err := h(ctx, ev)
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Errorf("answer %+v (%v), want no batch item failures", resp, err)
	}
}
