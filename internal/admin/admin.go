// Package admin is what operators do with a running Conveyor environment:
// read its overview (queue depths per tier, DLQ depth, pause flags, jobs per
// status, orphans, breakers, hourly outcomes), restart and stop jobs in
// bulk or restart one item, peek into and redrive the tiers' dead-letter
// queues, pause and resume a whole tier, and reset a circuit breaker.
//
// It is the inspector beside the worker: it reads the same table and
// queues, changes jobs only through the job state machine and conditional
// writes, and never touches a job's outputs.
package admin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/conveyor/conveyor/internal/aws/queue"
	"github.com/conveyor/conveyor/internal/aws/store"
	"github.com/conveyor/conveyor/internal/breaker"
	"github.com/conveyor/conveyor/internal/fault"
	"github.com/conveyor/conveyor/internal/invalid"
	"github.com/conveyor/conveyor/internal/job"
)

// Defaults and bounds.
const (
	// PauseCacheDefault is how long Paused trusts its last read of the flags.
	PauseCacheDefault = time.Second
	// MaxBulk is the most job ids one bulk call takes.
	MaxBulk = 100
	// BulkConcurrency is how many jobs of a bulk call are handled at once.
	BulkConcurrency = 8
	// PeekDefault / MaxPeek bound DLQPeek's limit.
	PeekDefault = 10
	MaxPeek     = 100
	// StatsHoursDefault / MaxStatsHours bound Stats' window.
	StatsHoursDefault = 24
	MaxStatsHours     = 168
	// RedriveDefault is the most messages one redrive moves.
	RedriveDefault = queue.RedriveDefault
)

// Queues reads the tier queues and their DLQs without consuming their
// messages (queue.Inspector).
type Queues interface {
	// Depth is the queue at url's approximate depth.
	Depth(ctx context.Context, url string) (queue.Depth, error)
	// Peek returns up to limit messages of the queue at url, visible
	// again when it returns.
	Peek(ctx context.Context, url string, limit int) ([]queue.Peeked, error)
}

// Mover moves DLQ messages back to their tier's queue and reports how many
// it moved (or, for an asynchronous move, started moving): queue.SQSMover
// receives, sends and deletes; queue.TaskMover starts an SQS move task.
type Mover interface {
	Move(ctx context.Context, r queue.Redrive) (int, error)
}

// Requeuer re-queues a job through the state machine and sends its message,
// and stops one (submission.Service).
type Requeuer interface {
	Requeue(ctx context.Context, id string, a job.Action) (job.Job, error)
	// Stop cancels the job with why as its error; a run in progress
	// keeps its lease until its call ended, and what it may have done is
	// reconciled (submission.Service.Stop).
	Stop(ctx context.Context, id string, why *job.Error) (job.Job, error)
}

// Sender puts a job's message on its tier's queue (queue.Sender).
type Sender interface {
	Send(ctx context.Context, tier job.Tier, m queue.Message) error
}

// Breakers lists and resets the shared circuit breakers (breaker.Breaker).
type Breakers interface {
	List(ctx context.Context) ([]breaker.Record, error)
	Reset(ctx context.Context, key string) error
}

// Config configures a Service.
type Config struct {
	// Env names the environment in the overview.
	Env job.Env
	// Store is the table.
	Store *store.Store
	// Jobs re-queues jobs (bulk restart).
	Jobs Requeuer
	// Sender sends a restarted item's job.
	Sender Sender
	// Queues reads queue depths and peeks into DLQs.
	Queues Queues
	// QueueURLs and DLQURLs per tier; a tier without a queue URL is unknown.
	QueueURLs, DLQURLs map[job.Tier]string
	// Breakers lists and resets the circuit breakers.
	Breakers Breakers
	// Mover redrives DLQs (locally a queue.SQSMover: receive → send →
	// delete; in AWS a queue.TaskMover using StartMessageMoveTask).
	Mover Mover
	// Switch, when set, also turns a tier's consumer off and on (in AWS its
	// event source mapping). Locally nil: the pollers read the flag through
	// Paused.
	Switch Switch
	// StuckAfter: a queued job not received, or a running job without a
	// heartbeat, for this long is an orphan (required: CONVEYOR_STUCK_AFTER,
	// the same threshold recovery uses).
	StuckAfter time.Duration
	// BulkSyncMax is the most matching jobs a bulk call by filter without
	// limit acts on inside its request; more start an operation (default
	// BulkSyncMaxDefault, at most MaxBulk).
	BulkSyncMax int
	// PauseCache is how long Paused trusts its last read (default
	// PauseCacheDefault).
	PauseCache time.Duration
	// Now defaults to time.Now.
	Now func() time.Time
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// Service implements the admin operations.
type Service struct {
	cfg   Config
	pause pauseCache
}

// New returns a Service, or an error naming what the configuration lacks.
func New(cfg Config) (*Service, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.PauseCache == 0 {
		cfg.PauseCache = PauseCacheDefault
	}
	if cfg.BulkSyncMax == 0 {
		cfg.BulkSyncMax = BulkSyncMaxDefault
	}
	return &Service{cfg: cfg}, nil
}

func (c Config) validate() error {
	var missing []string
	for name, absent := range map[string]bool{
		"Store": c.Store == nil, "Jobs": c.Jobs == nil, "Sender": c.Sender == nil, "Queues": c.Queues == nil,
		"Mover": c.Mover == nil, "Breakers": c.Breakers == nil,
	} {
		if absent {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		return fmt.Errorf("admin: the configuration lacks %s", strings.Join(missing, ", "))
	}
	if c.StuckAfter <= 0 {
		return fmt.Errorf("admin: StuckAfter must be positive, got %s", c.StuckAfter)
	}
	if c.BulkSyncMax < 0 || c.BulkSyncMax > MaxBulk {
		return fmt.Errorf("admin: BulkSyncMax must be between 0 and %d, got %d", MaxBulk, c.BulkSyncMax)
	}
	if c.PauseCache < 0 {
		return errors.New("admin: PauseCache must not be negative")
	}
	return nil
}

// ErrUnknownTier is returned for a tier that does not exist or has no
// queue in this environment.
var ErrUnknownTier error = &fault.NotFound{Msg: "no such tier", Code: "unknown_tier", Detail: "no such tier (want one of high, medium, low, system)"}

// ConflictError is an operation the resource's state does not allow (409).
type ConflictError struct{ Code, Message string }

func (e *ConflictError) Error() string { return e.Message }

// tier parses name and checks the environment has its queue.
func (s *Service) tier(name string) (job.Tier, error) {
	t, err := job.ParseTier(name)
	if err != nil {
		return "", ErrUnknownTier
	}
	if s.cfg.QueueURLs[t] == "" {
		return "", ErrUnknownTier
	}
	return t, nil
}

// Tiers returns the tiers this environment has queues for, highest first.
func (s *Service) Tiers() []job.Tier {
	var out []job.Tier
	for _, t := range job.Tiers {
		if s.cfg.QueueURLs[t] != "" {
			out = append(out, t)
		}
	}
	return out
}

// checkIDs validates a bulk call's job ids: 1 to MaxBulk entries;
// duplicates are dropped, the order kept. An entry that is no job id is
// kept too, for bulk to skip with the reason: one bad id never fails the
// call for the others.
func checkIDs(in []string) ([]string, error) {
	switch {
	case len(in) == 0:
		return nil, invalid.Field("jobIds", "must hold at least one job id")
	case len(in) > MaxBulk:
		return nil, invalid.Field("jobIds", fmt.Sprintf("must hold at most %d job ids", MaxBulk))
	}
	out := make([]string, 0, len(in))
	for _, id := range in {
		if !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out, nil
}

// parallel runs fn for every index in [0,n) with at most limit at once.
func parallel(n, limit int, fn func(i int)) {
	sem := make(chan struct{}, limit)
	var wg sync.WaitGroup
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			fn(i)
		})
	}
	wg.Wait()
}

// BreakerView is one circuit breaker as operators see it.
type BreakerView struct {
	Key string `json:"key"`
	// State is the effective state now (an open breaker past its cooldown
	// is half_open).
	State     breaker.State `json:"state"`
	Failures  int           `json:"failures"`
	OpenUntil *time.Time    `json:"openUntil"`
	UpdatedAt time.Time     `json:"updatedAt"`
}

// Breakers returns every breaker with a record (the others are closed with
// no failures), sorted by key.
func (s *Service) Breakers(ctx context.Context) ([]BreakerView, error) {
	recs, err := s.cfg.Breakers.List(ctx)
	if err != nil {
		return nil, err
	}
	now := s.cfg.Now()
	out := make([]BreakerView, 0, len(recs))
	for _, r := range recs {
		v := BreakerView{Key: r.Key, State: r.Effective(now), Failures: r.Failures, UpdatedAt: r.UpdatedAt}
		if !r.OpenUntil.IsZero() {
			t := r.OpenUntil.UTC()
			v.OpenUntil = &t
		}
		out = append(out, v)
	}
	slices.SortFunc(out, func(a, b BreakerView) int {
		switch {
		case a.Key < b.Key:
			return -1
		case a.Key > b.Key:
			return 1
		}
		return 0
	})
	return out, nil
}

// MaxBreakerKey bounds a breaker key's length, in characters (openapi.yaml's maxLength).
const MaxBreakerKey = 256

// ErrUnknownBreaker is ResetBreaker's answer for a key no breaker has: a
// key is known while its breaker has a record (Breakers lists them); any
// other is closed with no failures already, and most likely mistyped.
var ErrUnknownBreaker error = &fault.NotFound{Msg: "no breaker has this key", Detail: "no breaker has this key (GET /v1/admin/breakers lists them)"}

// ResetBreaker closes key's breaker and forgets its failures, or returns
// ErrUnknownBreaker when no breaker has the key (so a second reset of the
// same key is ErrUnknownBreaker too: there is nothing left to reset).
func (s *Service) ResetBreaker(ctx context.Context, key, by string) error {
	if key == "" || utf8.RuneCountInString(key) > MaxBreakerKey {
		return invalid.Field("key", fmt.Sprintf("must be 1 to %d characters", MaxBreakerKey))
	}
	recs, err := s.cfg.Breakers.List(ctx)
	if err != nil {
		return err
	}
	if !slices.ContainsFunc(recs, func(r breaker.Record) bool { return r.Key == key }) {
		// No record (never opened, or gone since): a key is still known
		// while jobs wait parked for its circuit — release them.
		n, err := s.releaseParked(ctx, job.WaitCircuitOpen, key, "")
		if err != nil {
			return err
		}
		if n == 0 {
			return ErrUnknownBreaker
		}
		s.cfg.Logger.InfoContext(ctx, "breaker reset by an operator: no record, its parked jobs released", "breaker", key, "by", by, "released_jobs", n)
		return nil
	}
	if err := s.cfg.Breakers.Reset(ctx, key); err != nil {
		return err
	}
	// The jobs the open circuit parked run now, not at its old openUntil.
	n, err := s.releaseParked(ctx, job.WaitCircuitOpen, key, "")
	s.cfg.Logger.InfoContext(ctx, "breaker reset by an operator", "breaker", key, "by", by, "released_jobs", n)
	if err != nil {
		return fmt.Errorf("the breaker is reset, but releasing the jobs it parked failed (they run when due; repeat the call): %w", err)
	}
	return nil
}
