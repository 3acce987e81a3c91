package handler_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/conveyor/conveyor/internal/handler"
	"github.com/conveyor/conveyor/internal/resources"
	"github.com/conveyor/conveyor/localstack/awstest"
)

// TestRelaysTheSampleStreamBatch wires the function as its binary does and
// relays the sample stream batch (events/): its event item reaches the
// bus, nothing is left to retry.
func TestRelaysTheSampleStreamBatch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := awstest.Handler(t, resources.FuncRelay, nil, handler.NewRelay)
	raw, err := os.ReadFile(filepath.Join(samplesDir, "dynamodb-stream-event.json"))
	if err != nil {
		t.Fatal(err)
	}
	var batch events.DynamoDBEvent
	if err := json.Unmarshal(raw, &batch); err != nil {
		t.Fatal(err)
	}
	if len(batch.Records) == 0 {
		t.Fatal("the sample holds no record")
	}
	resp, err := h(ctx, batch)
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Errorf("answer %+v (%v), want no batch item failures", resp, err)
	}
}
