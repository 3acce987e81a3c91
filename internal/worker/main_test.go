package worker_test

import (
	"testing"
	"time"

	"github.com/conveyor/conveyor/internal/clock"

	"github.com/conveyor/conveyor/localstack/awstest"
)

func TestMain(m *testing.M) { awstest.Main(m) }

// submit connects the user (once), uploads n images and submits a
// publish job through the API.
func submit(b *awstest.Bundle, tok, title string, n int) string {
	b.T.Helper()
	var items []any
	for i := range n {
		items = append(items, map[string]any{"uploadId": b.Upload(tok, awstest.PNG(b.T, 4+i))})
	}
	r := b.Must(b.Call("POST", "/v1/jobs", tok, map[string]any{"items": items, "params": map[string]any{"title": title}}), 201)
	return r.Body["id"].(string)
}

// newClock returns a simulated clock that starts now.
func newClock() *clock.Simulated { return clock.NewSimulated(time.Now()) }
