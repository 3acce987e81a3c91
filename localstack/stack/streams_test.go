package stack_test

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/conveyor/conveyor/localstack/awstest"
	"github.com/conveyor/conveyor/localstack/stack"
)

// TestClosedStreamsFreeTheirSlotsAtOnce runs the stream function as its
// binary: a user opens as many streams as allowed, closes them all (a
// dashboard reloaded), and at once opens as many again: every one is
// served, none gets 429 while the closed streams' slots wait out their
// lease.
func TestClosedStreamsFreeTheirSlotsAtOnce(t *testing.T) {
	t.Parallel()
	const max = 3
	b := setupBinaries(t, map[string]string{"CONVEYOR_STREAM_MAX_PER_USER": "3", "CONVEYOR_STREAM_PING": "15s"}, stack.Options{})
	s := b.Stack
	tok := b.Token("u-slots", "user", "free")

	open := func(ctx context.Context) (*http.Response, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.StreamURL+"/v1/events", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		return http.DefaultClient.Do(req)
	}
	for round := range 3 {
		ctx, cancel := context.WithCancel(context.Background())
		for i := range max {
			resp, err := open(ctx)
			if err != nil {
				cancel()
				t.Fatalf("round %d, stream %d: %v", round, i, err)
			}
			if resp.StatusCode != http.StatusOK {
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				cancel()
				t.Fatalf("round %d, stream %d: %s %s, want 200 (the previous round's streams were closed)", round, i, resp.Status, body)
			}
			// Read the snapshot, so the stream is really running.
			frames := awstest.ReadSSE(resp.Body)
			select {
			case f := <-frames:
				if f.Event != "snapshot" {
					t.Fatalf("round %d, stream %d: first frame %q, want snapshot", round, i, f.Event)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("round %d, stream %d: no snapshot", round, i)
			}
		}
		cancel() // the client goes away from every stream at once
	}
}
