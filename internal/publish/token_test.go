package publish_test

import (
	"testing"
	"time"

	"github.com/conveyor/conveyor/localstack/stack"
	"github.com/conveyor/conveyor/localstack/stacktest"
)

// TestRevokedAccessTokenIsRefreshedOnce: the API answers 401 to an access
// token that has not reached its stated expiry (revoked); the publisher
// forces one refresh, retries once and the job succeeds in its first
// attempt.
func TestRevokedAccessTokenIsRefreshedOnce(t *testing.T) {
	t.Parallel()
	b := stacktest.Setup(t, nil, stack.Options{})
	tok := b.Token("u-revoked", "user", "pro")
	b.Must(b.Call("PUT", "/v1/account/connection", tok, map[string]any{
		"provider": "deviantart", "refreshToken": b.Stack.Simulator.MintRefreshToken(),
		"accessToken": "revoked-access-token", "expiresAt": time.Now().Add(time.Hour).UTC().Format(time.RFC3339),
	}), 204)
	id := submit(b, tok, "revoked", 1)
	r := b.WaitStatus(tok, id, "succeeded")
	if got := r.Body["attempts"].(float64); got != 1 {
		t.Errorf("attempts = %v, want 1 (the 401 is handled inside the attempt)", got)
	}
	if got := b.Stack.Simulator.Stats().Refreshes; got != 1 {
		t.Errorf("refreshes = %d, want exactly 1", got)
	}
}
