package handler_test

import (
	"context"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/conveyor/conveyor/internal/config"
	"github.com/conveyor/conveyor/internal/handler"
	"github.com/conveyor/conveyor/internal/ids"
	"github.com/conveyor/conveyor/internal/resources"
	"github.com/conveyor/conveyor/localstack/awstest"
)

// TestDropsWhatNoRunCanUse wires the function as its binary does and feeds
// it a batch of an unreadable message and a message of a job that does not
// exist: both are dropped (deleted by SQS), not redelivered forever.
func TestDropsWhatNoRunCanUse(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := awstest.Handler(t, resources.FuncPublisher, map[string]string{
		config.VarDeviantArtClientID: "id", config.VarDeviantArtClientSecret: "secret", config.VarDeviantArtURL: "http://127.0.0.1:9"}, handler.NewPublisher)
	missing := ids.New(ids.Job)
	ev := events.SQSEvent{Records: []events.SQSMessage{
		{MessageId: "m1", Body: "not json", Attributes: map[string]string{"MessageGroupId": "g1", "ApproximateReceiveCount": "1"}},
		{MessageId: "m2", Body: `{"kind":"publish","jobId":"` + missing + `","send":1}`,
			Attributes: map[string]string{"MessageGroupId": missing, "ApproximateReceiveCount": "1"}},
	}}
	resp, err := h(ctx, ev)
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Errorf("answer %+v (%v), want no batch item failures", resp, err)
	}
}
