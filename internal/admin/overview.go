package admin

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/conveyor/conveyor/internal/aws/store"
	"github.com/conveyor/conveyor/internal/invalid"
	"github.com/conveyor/conveyor/internal/job"
)

// TierStats is one tier's queue as SQS approximates it.
type TierStats struct {
	// Waiting: messages available to receive.
	Waiting int `json:"waiting"`
	// InFlight: messages received and not yet deleted (being worked on,
	// or backing off: the publisher delays a retry by the visibility).
	InFlight int `json:"inFlight"`
	// Delayed: the tier's jobs waiting for a time, from the table —
	// scheduled jobs before their scheduleAt, and queued jobs before their
	// retryAt (backing off in the queue or parked in the table).
	Delayed int `json:"delayed"`
	// DLQ: messages in the tier's dead-letter queue.
	DLQ int `json:"dlq"`
	// Paused: the operator paused the tier.
	Paused bool `json:"paused"`
}

// Overview is one environment at a glance.
type Overview struct {
	Environment string    `json:"environment"`
	GeneratedAt time.Time `json:"generatedAt"`
	// Tiers by name.
	Tiers map[string]TierStats `json:"tiers"`
	// Jobs per status: the active ones (scheduled, queued, running) now,
	// counted from the sweep index (the cost follows the work in progress,
	// not the table); the finished ones (succeeded, failed, cancelled) as
	// the jobs that reached them in the last StatsHoursDefault hours, from
	// the hourly counters (Stats). Stale jobs are not counted.
	Jobs map[string]int `json:"jobs"`
	// Parked: the queued jobs waiting in the table (their message let
	// go), by the reason they wait: backoff, circuit_open, rate_limited,
	// paused, oauth_client_not_set…
	Parked map[string]int `json:"parked,omitempty"`
	// Blocked: the reasons among Parked that an operator must act on
	// (the OAuth client secret not set), with what to do; empty when none.
	Blocked []Blocked `json:"blocked,omitempty"`
	// Orphans: queued jobs nobody received (outside paused tiers) and
	// running jobs without a heartbeat, for longer than StuckAfter — what
	// recovery would take back on its next run.
	Orphans int `json:"orphans"`
	// Recovery is the last recovery run, when one was recorded.
	Recovery *store.RecoveryRun `json:"recovery"`
	// Breakers with a record (failures or open).
	Breakers []BreakerView `json:"breakers"`
	// Stats: outcomes of the last StatsHoursDefault hours, per hour and in
	// total, from the hourly counters written with each finish.
	Stats Stats `json:"stats"`
}

// activeStatuses are the statuses the overview counts jobs of.
var activeStatuses = []job.Status{job.Scheduled, job.Queued, job.Running}

// Overview gathers everything at once (the reads run concurrently).
func (s *Service) Overview(ctx context.Context) (Overview, error) {
	now := s.cfg.Now().UTC()
	ov := Overview{Environment: string(s.cfg.Env), GeneratedAt: now, Tiers: map[string]TierStats{}, Jobs: map[string]int{}, Breakers: []BreakerView{}}
	paused, err := s.pausedTiers(ctx)
	if err != nil {
		return Overview{}, err
	}
	var r reads
	s.readQueues(ctx, &r, &ov, paused)
	var census store.Census
	s.readTable(ctx, &r, &ov, &census, now)
	if err := r.wait(); err != nil {
		return Overview{}, err
	}
	for _, st := range activeStatuses {
		ov.Jobs[string(st)] = census.Jobs[st]
	}
	ov.Parked = census.Parked
	ov.Blocked = blockedOf(ov.Parked)
	ov.Orphans = orphans(census, paused)
	for t, st := range ov.Tiers {
		st.Delayed = census.Delayed[t]
		ov.Tiers[t] = st
	}
	ov.Jobs[string(job.Succeeded)] = ov.Stats.Succeeded
	ov.Jobs[string(job.Failed)] = ov.Stats.Failed
	ov.Jobs[string(job.Cancelled)] = ov.Stats.Cancelled
	return ov, nil
}

// readQueues starts reading each tier's queues into ov.Tiers.
func (s *Service) readQueues(ctx context.Context, r *reads, ov *Overview, paused map[job.Tier]bool) {
	for _, t := range s.Tiers() {
		r.do("reading the "+string(t)+" queues", func() error {
			st, err := s.tierStats(ctx, t)
			if err != nil {
				return err
			}
			st.Paused = paused[t]
			r.locked(func() { ov.Tiers[string(t)] = st })
			return nil
		})
	}
}

// readTable starts reading the table's side of the overview: the census
// of the active jobs at now into census; the last recovery run, the
// breakers and the hourly counters into ov.
func (s *Service) readTable(ctx context.Context, r *reads, ov *Overview, census *store.Census, now time.Time) {
	r.do("counting the active jobs", func() error {
		c, err := s.cfg.Store.Census(ctx, now, now.Add(-s.cfg.StuckAfter))
		*census = c
		return err
	})
	r.do("reading the last recovery run", func() error {
		rec, err := s.cfg.Store.LastRecovery(ctx)
		switch {
		case errors.Is(err, store.ErrNotFound):
			return nil
		case err != nil:
			return err
		}
		ov.Recovery = &rec
		return nil
	})
	r.do("reading the breakers", func() error {
		b, err := s.Breakers(ctx)
		ov.Breakers = b
		return err
	})
	r.do("reading the hourly counters", func() error {
		st, err := s.Stats(ctx, StatsHoursDefault)
		ov.Stats = st
		return err
	})
}

// reads runs reads concurrently and keeps every failure, named by what
// was being read. The zero value is ready.
type reads struct {
	mu   sync.Mutex
	wg   sync.WaitGroup
	errs []error
}

// do starts fn; a failure is kept as "what: error".
func (r *reads) do(what string, fn func() error) {
	r.wg.Go(func() {
		if err := fn(); err != nil {
			r.locked(func() { r.errs = append(r.errs, fmt.Errorf("%s: %w", what, err)) })
		}
	})
}

// locked runs fn under the lock the reads share (for the maps they fill).
func (r *reads) locked(fn func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	fn()
}

// wait waits for every read and returns their failures joined (nil when
// none failed).
func (r *reads) wait() error {
	r.wg.Wait()
	return errors.Join(r.errs...)
}

// orphans is what recovery would call stuck now: the queued jobs nobody
// received outside the paused tiers, and the running jobs that stopped
// beating, since before StuckAfter.
func orphans(c store.Census, paused map[job.Tier]bool) int {
	n := c.StuckRunning
	for t, k := range c.StuckQueued {
		if !paused[t] {
			n += k
		}
	}
	return n
}

// tierStats reads a tier's queue and DLQ depths.
func (s *Service) tierStats(ctx context.Context, t job.Tier) (TierStats, error) {
	var st TierStats
	d, err := s.cfg.Queues.Depth(ctx, s.cfg.QueueURLs[t])
	if err != nil {
		return st, err
	}
	st.Waiting, st.InFlight = d.Visible, d.InFlight
	if u := s.cfg.DLQURLs[t]; u != "" {
		dlq, err := s.cfg.Queues.Depth(ctx, u)
		if err != nil {
			return st, err
		}
		// Messages being peeked at or redriven are still in the DLQ.
		st.DLQ = dlq.Visible + dlq.InFlight
	}
	return st, nil
}

// HourStats is one hour's outcomes.
type HourStats struct {
	// Hour is the start of the hour (UTC).
	Hour      time.Time `json:"hour"`
	Succeeded int       `json:"succeeded"`
	Failed    int       `json:"failed"`
	Cancelled int       `json:"cancelled"`
}

// Stats is the outcome of every hour of a window, oldest first, with totals.
type Stats struct {
	Hours     []HourStats `json:"hours"`
	Succeeded int         `json:"succeeded"`
	Failed    int         `json:"failed"`
	Cancelled int         `json:"cancelled"`
}

// Stats returns the last hours hours (1 to MaxStatsHours, the current one
// included) of finished-job counters.
func (s *Service) Stats(ctx context.Context, hours int) (Stats, error) {
	if hours < 1 || hours > MaxStatsHours {
		return Stats{}, invalid.Field("hours", fmt.Sprintf("must be between 1 and %d", MaxStatsHours))
	}
	now := s.cfg.Now()
	counts, err := s.cfg.Store.FinishedCounts(ctx, now.Add(-time.Duration(hours-1)*time.Hour), now)
	if err != nil {
		return Stats{}, err
	}
	st := Stats{Hours: make([]HourStats, 0, len(counts))}
	for _, c := range counts {
		st.Hours = append(st.Hours, HourStats{Hour: c.Hour, Succeeded: c.Succeeded, Failed: c.Failed, Cancelled: c.Cancelled})
		st.Succeeded += c.Succeeded
		st.Failed += c.Failed
		st.Cancelled += c.Cancelled
	}
	return st, nil
}
