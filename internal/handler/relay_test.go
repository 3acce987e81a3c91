package handler_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/conveyor/conveyor/internal/aws/bus"
	"github.com/conveyor/conveyor/internal/handler"
	"github.com/conveyor/conveyor/internal/relay"
	"github.com/conveyor/conveyor/internal/resources"
	"github.com/conveyor/conveyor/localstack/awstest"
)

// TestRelaysTheSampleStreamBatch wires the function as its binary does and
// relays the sample stream batch (events/): its event item reaches the
// bus, nothing is left to retry.
func TestRelaysTheSampleStreamBatch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := awstest.Handler(t, resources.FuncRelay, nil, handler.NewRelay(bus.For))
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

type relayed relay.Result

func (r relayed) Handle(context.Context, events.DynamoDBEvent) (events.DynamoDBEventResponse, relay.Result) {
	return events.DynamoDBEventResponse{}, relay.Result(r)
}

// A batch's record is its metric line (EventsRelayed, EventsFailed,
// WebhooksQueued, EventLagMaxMs, EventsTooLargeForBus): a batch relayed
// whole writes no other line, one with failures or with events too large
// for the bus a warning with every count.
func TestABatchLogsItsMetricsAndWarnsOnFailures(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		res  relay.Result
		want string
	}{
		{"relayed whole", relay.Result{Relayed: 3, MaxLag: time.Second}, ""},
		{"with failures", relay.Result{Relayed: 2, Failed: 1}, `"level":"WARN","msg":"relayed a stream batch with failures"`},
		{"too large for the bus", relay.Result{Relayed: 3, TooLarge: 1}, `"level":"WARN","msg":"relayed a stream batch with events too large for the bus"`},
	} {
		var logs, emf bytes.Buffer
		h := handler.RelayHandler(relayed(c.res), handler.NewEmitter(&emf, "test", time.Now), slog.New(slog.NewJSONHandler(&logs, nil)))
		if _, err := h(context.Background(), events.DynamoDBEvent{Records: make([]events.DynamoDBEventRecord, 3)}); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(emf.String(), `"EventsRelayed":`) {
			t.Errorf("%s: metric line %q, want EventsRelayed", c.name, emf.String())
		}
		if got := logs.String(); (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("%s: log %q, want %q", c.name, got, c.want)
		}
	}
}
