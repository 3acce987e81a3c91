package recovery

import (
	"context"
	"fmt"
	"time"

	"github.com/conveyor/conveyor/internal/uploads"
)

// expireMedia is the retention sweep of uploads: media is referenced, not
// owned. An upload no job refers to any more — its last job went stale, or
// no job named it within its use window — is marked expired (conditional on
// still being unreferenced, so a submission racing it either kept it or
// gets 422) and only then is its object deleted. The record stays readable
// as expired for DeleteAfter.
func (r *Recoverer) expireMedia(ctx context.Context, now time.Time, shards []int, until time.Time) (SweepStats, error) {
	scan := r.cfg.Store.ScanDueUploads(now).OnShards(shards)
	st, err := sweep(ctx, r, SweepMedia, scan, scan.Uploads, until, r.cfg.Concurrency, func(ctx context.Context, u uploads.Upload) (outcome, error) {
		expired, ok, err := r.cfg.Store.ExpireUpload(ctx, u.ID, now, r.cfg.DeleteAfter)
		if err != nil {
			return lost, err
		}
		if !ok {
			return skipped, nil // referenced again, or already gone
		}
		r.removeObject(ctx, expired)
		return acted, nil
	})
	if err != nil {
		return st, fmt.Errorf("expiring unreferenced uploads: %w", err)
	}
	return st, nil
}

// removeObject deletes an expired upload's object (best effort: the
// bucket's lifecycle rule removes what is left).
func (r *Recoverer) removeObject(ctx context.Context, u uploads.Upload) {
	if r.cfg.Objects == nil || u.Key == "" {
		return
	}
	if err := r.cfg.Objects.Delete(ctx, u.Key); err != nil {
		r.cfg.Logger.WarnContext(ctx, "deleting an expired upload's object failed; the bucket lifecycle will", "upload_id", u.ID, "key", u.Key, "error", err)
		return
	}
	r.cfg.Logger.InfoContext(ctx, "expired upload deleted", "upload_id", u.ID, "key", u.Key)
}
