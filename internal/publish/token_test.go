package publish_test

import (
	"context"
	"testing"
	"time"

	"github.com/conveyor/conveyor/internal/accounts"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/testfactory"
	"github.com/conveyor/conveyor/internal/worker"
)

// TestRevokedAccessTokenIsRefreshedOnce: the API answers 401 to an access
// token that has not reached its stated expiry (revoked); the publisher
// forces one refresh, retries once and the job succeeds in its first
// attempt.
func TestRevokedAccessTokenIsRefreshedOnce(t *testing.T) {
	t.Parallel()
	b := setupPublisher(t)
	ctx := context.Background()
	owner := testfactory.Owner()
	expires := b.clk.Now().Add(time.Hour)
	if err := b.tokens.Connect(ctx, owner, accounts.ConnectRequest{Provider: accounts.Provider,
		RefreshToken: b.sim.MintRefreshToken(), AccessToken: "revoked-access-token", ExpiresAt: &expires}); err != nil {
		t.Fatal(err)
	}
	j := b.jobOf(t, owner, job.Medium, 1)
	if v, err := b.pub.Run(ctx, worker.Delivery{JobID: j.ID, Receives: 1}); err != nil || !v.Done {
		t.Fatalf("run: %+v, %v", v, err)
	}
	got := b.get(t, j.ID)
	if got.Status != job.Succeeded || got.Attempts != 1 {
		t.Errorf("job: %s after %d attempts, want succeeded in 1 (the 401 is handled inside the attempt)", got.Status, got.Attempts)
	}
	if n := b.sim.Stats().Refreshes; n != 1 {
		t.Errorf("refreshes = %d, want exactly 1", n)
	}
}
