package handler_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/aws/aws-lambda-go/events"
)

// samplesDir holds the sample trigger payloads (events/README.md): make
// invoke feeds them to the functions of this package.
var samplesDir = filepath.Join("..", "..", "events")

// TestSamplesDecode: every sample payload decodes into the aws-lambda-go
// type its function receives, and every sample has a case here.
func TestSamplesDecode(t *testing.T) {
	t.Parallel()
	samples := map[string]func() any{
		"api-healthz.json":           func() any { return &events.APIGatewayV2HTTPRequest{} },
		"s3-object-created.json":     func() any { return &events.S3Event{} },
		"sqs-publish.json":           func() any { return &events.SQSEvent{} },
		"scheduled-recovery.json":    func() any { return &events.EventBridgeEvent{} },
		"dynamodb-stream-event.json": func() any { return &events.DynamoDBEvent{} },
	}
	entries, err := os.ReadDir(samplesDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() == "README.md" {
			continue
		}
		if _, ok := samples[e.Name()]; !ok {
			t.Errorf("sample %s has no decoding test", e.Name())
		}
	}
	for name, newV := range samples {
		raw, err := os.ReadFile(filepath.Join(samplesDir, name))
		if err != nil {
			t.Fatal(err)
		}
		dec := json.NewDecoder(bytes.NewReader(raw))
		v := newV()
		if err := dec.Decode(v); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}
