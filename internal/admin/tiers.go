package admin

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/conveyor/conveyor/internal/job"
)

// Switch turns a tier's consumer off and on. In AWS it disables and
// enables the tier's event source mapping (esm.Switch); locally there is
// none, the pollers ask Paused instead.
type Switch interface {
	SetEnabled(ctx context.Context, tier job.Tier, enabled bool) error
}

// TierState is the answer of pause and resume.
type TierState struct {
	Tier   job.Tier `json:"tier"`
	Paused bool     `json:"paused"`
}

// PauseTier stops the tier's consumers: its flag is set first (the overview
// and the local pollers follow it; recovery does not call a paused tier's
// waiting jobs orphans), then, in AWS, its event source mapping is
// disabled. Submissions are still accepted and wait in the queue.
// Idempotent.
func (s *Service) PauseTier(ctx context.Context, tier, by string) (TierState, error) {
	return s.setPaused(ctx, tier, true, by)
}

// ResumeTier undoes PauseTier. Idempotent.
func (s *Service) ResumeTier(ctx context.Context, tier, by string) (TierState, error) {
	return s.setPaused(ctx, tier, false, by)
}

func (s *Service) setPaused(ctx context.Context, name string, paused bool, by string) (TierState, error) {
	t, err := s.tier(name)
	if err != nil {
		return TierState{}, err
	}
	if _, err := s.cfg.Store.SetTierPaused(ctx, t, paused, by); err != nil {
		return TierState{}, err
	}
	s.pause.forget()
	if s.cfg.Switch != nil {
		if err := s.cfg.Switch.SetEnabled(ctx, t, !paused); err != nil {
			return TierState{}, fmt.Errorf("the %s tier's flag is set, but switching its consumer failed (repeat the call): %w", t, err)
		}
	}
	verb := "resumed"
	if paused {
		verb = "paused"
	}
	released := 0
	if !paused {
		// The jobs the pause parked in the table run now, not at the
		// release sweep's next pass.
		if released, err = s.releaseParked(ctx, job.WaitPaused, "", t); err != nil {
			return TierState{}, fmt.Errorf("the %s tier is resumed, but releasing its parked jobs failed (the release sweep sends them; repeat the call): %w", t, err)
		}
	}
	s.cfg.Logger.InfoContext(ctx, "tier "+verb, "tier", t, "by", by, "released_jobs", released)
	return TierState{Tier: t, Paused: paused}, nil
}

// Paused reports whether tier is paused. It reads the flags at most once
// per PauseCache (one Query for every tier), so consumers may call it
// before every receive. When the flags cannot be read it keeps its last
// answer (never paused if it never read them).
func (s *Service) Paused(ctx context.Context, tier job.Tier) bool {
	return s.pause.get(ctx, s, tier)
}

// PausedFunc returns Paused bound to tier, the shape of a local poller's
// Paused hook.
func (s *Service) PausedFunc(tier job.Tier) func(context.Context) bool {
	return func(ctx context.Context) bool { return s.Paused(ctx, tier) }
}

type pauseCache struct {
	mu     sync.Mutex
	at     time.Time
	paused map[job.Tier]bool
}

func (c *pauseCache) forget() {
	c.mu.Lock()
	c.at = time.Time{}
	c.mu.Unlock()
}

func (c *pauseCache) get(ctx context.Context, s *Service, tier job.Tier) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := s.cfg.Now()
	if c.paused != nil && !c.at.IsZero() && now.Sub(c.at) < s.cfg.PauseCache && !now.Before(c.at) {
		return c.paused[tier]
	}
	flags, err := s.cfg.Store.TierFlags(ctx)
	if err != nil {
		if ctx.Err() == nil {
			s.cfg.Logger.WarnContext(ctx, "reading the tier flags failed; keeping the last answer", "error", err)
		}
		return c.paused[tier]
	}
	c.paused = make(map[job.Tier]bool, len(flags))
	for t, f := range flags {
		c.paused[t] = f.Paused
	}
	c.at = now
	return c.paused[tier]
}

// pausedTiers returns the flags fresh from the table.
func (s *Service) pausedTiers(ctx context.Context) (map[job.Tier]bool, error) {
	flags, err := s.cfg.Store.TierFlags(ctx)
	if err != nil {
		return nil, err
	}
	out := map[job.Tier]bool{}
	for t, f := range flags {
		out[t] = f.Paused
	}
	return out, nil
}
