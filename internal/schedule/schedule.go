// Package schedule is recurring schedules: a cron or rate expression in a
// time zone that submits a job template as its owner, with the owner's
// tier, once per tick. In AWS each definition is one EventBridge Scheduler
// schedule (Backend) whose target is the recovery function with the tick
// in its input; locally the runtime reads the same schedules back from the
// emulator and fires them (localstack/lambdaruntime). Whoever fires, a tick is
// idempotent: its job's id is derived from the schedule's secret seed and
// the tick time, so a tick that fires twice creates one job. A paused
// schedule's ticks are skipped, never replayed.
//
// Time zones are loaded with time.LoadLocation; the package does not embed
// the zone database (time/tzdata): a program that creates, resumes or
// shows schedules imports it (the schedules function's main does; firing
// a tick needs no zone, so recovery does not link it).
package schedule

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base32"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/conveyor/conveyor/internal/envelope"
	"github.com/conveyor/conveyor/internal/fault"
	"github.com/conveyor/conveyor/internal/ids"
	"github.com/conveyor/conveyor/internal/invalid"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/submission"
)

// Prefix of schedule ids.
const Prefix = "sch"

// Statuses of a schedule.
const (
	Active = "active"
	Paused = "paused"
)

// Defaults and limits.
const (
	// MaxPerOwnerDefault bounds one user's schedules (each is one
	// EventBridge Scheduler schedule of the account's quota).
	MaxPerOwnerDefault = 100
	// MaxName is the longest name, in characters.
	MaxName = 200
	// KeepRuns is how many of the last runs a schedule keeps.
	KeepRuns = 20
)

// Run is one tick that submitted a job.
type Run struct {
	At    time.Time `json:"at"`
	JobID string    `json:"jobId"`
}

// Schedule is one recurring schedule.
type Schedule struct {
	ID        string     `json:"id"`
	Name      string     `json:"name"`
	Cron      string     `json:"cron,omitempty"`
	Rate      string     `json:"rate,omitempty"`
	Timezone  string     `json:"timezone"`
	Job       job.Doc    `json:"job"`
	Status    string     `json:"status"`
	NextRunAt *time.Time `json:"nextRunAt"`
	CreatedAt time.Time  `json:"createdAt"`
	UpdatedAt time.Time  `json:"updatedAt"`
	// LastRuns are the latest ticks and their jobs, newest first.
	LastRuns []Run `json:"lastRuns"`

	// Owner and Plan: who the jobs are submitted as, and their tier.
	Owner string `json:"-"`
	Plan  string `json:"-"`
	// ActiveFrom is when the schedule was last created or resumed: a
	// tick before it (fired late, or while paused) is skipped.
	ActiveFrom time.Time `json:"-"`
	// Seed is the secret from which tick job ids are derived.
	Seed string `json:"-"`
	// Sealed holds the template's secret values (an http job's header
	// values), sealed under SealContext; Job shows them redacted.
	Sealed  *envelope.Envelope `json:"-"`
	Version int64              `json:"-"`
}

// Expr returns the schedule's recurrence.
func (s Schedule) Expr() (Expr, error) {
	loc, err := time.LoadLocation(s.Timezone)
	if err != nil {
		return Expr{}, err
	}
	if s.Cron != "" {
		return ParseCron(s.Cron, loc)
	}
	return ParseRate(s.Rate, s.CreatedAt)
}

// Request is the body of POST /v1/schedules.
type Request struct {
	Name     string                   `json:"name"`
	Cron     string                   `json:"cron"`
	Rate     string                   `json:"rate"`
	Timezone string                   `json:"timezone"`
	Job      submission.SubmitRequest `json:"job"`
}

// Jobs is what a schedule needs of the job service.
type Jobs interface {
	Check(ctx context.Context, req submission.SubmitRequest) error
	SubmitWith(ctx context.Context, c submission.Caller, req submission.SubmitRequest, o submission.SubmitOptions) (job.Job, bool, error)
	// SplitSecrets and JoinSecrets take a template's secret values out
	// (to be sealed apart) and put them back (job.SecretsFront).
	SplitSecrets(req submission.SubmitRequest) (submission.SubmitRequest, []byte, error)
	JoinSecrets(req submission.SubmitRequest, secrets []byte) (submission.SubmitRequest, error)
}

// Sealer seals a template's secret values when the schedule is made and
// opens them when a tick submits its job (sealer.Sealer).
type Sealer interface {
	Seal(ctx context.Context, plaintext []byte, aad map[string]string) (envelope.Envelope, error)
	Open(ctx context.Context, e envelope.Envelope, aad map[string]string) ([]byte, error)
}

// SealContext is the encryption context of a schedule's sealed template
// values: its owner, the schedule and the purpose. An envelope copied to
// another schedule, or used for a job's headers, does not open.
func SealContext(owner, scheduleID string) map[string]string {
	return map[string]string{"user": owner, "schedule": scheduleID, envelope.ContextPurpose: envelope.PurposeScheduleTemplate}
}

// ErrNoSealer is Create's answer to a template with secrets and no way
// to seal them: the schedule is not made rather than kept in the clear.
var ErrNoSealer = errors.New("schedule: the job template holds secrets but no sealer is configured")

// Backend makes the schedule fire: EventBridge Scheduler in AWS (and in
// the emulator, whose schedules the local runtime fires), through
// internal/aws/scheduler.
type Backend interface {
	// Put creates or replaces the schedule's trigger (enabled or not as
	// its status says).
	Put(ctx context.Context, s Schedule, e Expr) error
	// Delete removes it; a missing one is not an error.
	Delete(ctx context.Context, id string) error
}

// Config configures a Service.
type Config struct {
	// Store holds the schedules (required).
	Store Records
	// Jobs validates templates and submits the ticks' jobs.
	Jobs Jobs
	// Backend fires the schedules (nil: nothing fires them but Fire).
	Backend Backend
	// Sealer seals the templates' secret values (on Create) and opens
	// them (on Fire); required for a template that holds any.
	Sealer Sealer
	// MaxPerOwner bounds one user's schedules (default MaxPerOwnerDefault).
	MaxPerOwner int
	// Now defaults to time.Now.
	Now func() time.Time
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// Service implements the schedules of the API and their ticks.
type Service struct{ cfg Config }

// New returns a Service.
func New(cfg Config) *Service {
	if cfg.MaxPerOwner == 0 {
		cfg.MaxPerOwner = MaxPerOwnerDefault
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Service{cfg: cfg}
}

// ErrNotFound is an unknown schedule, or another user's.
var ErrNotFound error = &fault.NotFound{Msg: "schedule not found"}

// LimitCode is the code of the answer to a user who has as many schedules
// as allowed (a *fault.Limit, 422).
const LimitCode = "schedule_limit"

// Create validates r and creates an active schedule for c.
func (s *Service) Create(ctx context.Context, c submission.Caller, r Request) (Schedule, error) {
	now := s.cfg.Now().UTC().Truncate(time.Second)
	sc := Schedule{
		ID: ids.New(Prefix), Name: strings.TrimSpace(r.Name), Cron: strings.Join(strings.Fields(r.Cron), " "), Rate: strings.TrimSpace(r.Rate),
		Timezone: strings.TrimSpace(r.Timezone), Status: Active, CreatedAt: now, UpdatedAt: now, ActiveFrom: now,
		Owner: c.Owner, Plan: c.Plan, Seed: newSeed(), LastRuns: []Run{},
	}
	if sc.Timezone == "" {
		sc.Timezone = "UTC"
	}
	switch {
	case sc.Name == "":
		return Schedule{}, invalid.Field("name", "is required")
	case utf8.RuneCountInString(sc.Name) > MaxName:
		return Schedule{}, invalid.Field("name", fmt.Sprintf("must be at most %d characters", MaxName))
	case (sc.Cron == "") == (sc.Rate == ""):
		return Schedule{}, invalid.Field("cron", "give either cron or rate")
	}
	if _, err := time.LoadLocation(sc.Timezone); err != nil || strings.EqualFold(sc.Timezone, "local") {
		return Schedule{}, invalid.Field("timezone", "must be an IANA time zone such as Europe/Moscow")
	}
	e, err := sc.Expr()
	if err != nil {
		field := "cron"
		if sc.Rate != "" {
			field = "rate"
		}
		return Schedule{}, invalid.Field(field, err.Error())
	}
	if e.Next(now).IsZero() {
		return Schedule{}, invalid.Field("cron", "never fires")
	}
	if r.Job.ScheduleAt != nil {
		return Schedule{}, invalid.Field("job.scheduleAt", "is not allowed in a schedule's job (the tick is its time)")
	}
	if err := s.cfg.Jobs.Check(ctx, r.Job); err != nil {
		return Schedule{}, invalid.Under("job", err)
	}
	// The template is kept with its secrets redacted (what GET shows and
	// the idempotency record keeps) and the values sealed apart.
	kept, secrets, err := s.cfg.Jobs.SplitSecrets(r.Job)
	if err != nil {
		return Schedule{}, err
	}
	if secrets != nil {
		if s.cfg.Sealer == nil {
			clear(secrets)
			return Schedule{}, ErrNoSealer
		}
		env, err := s.cfg.Sealer.Seal(ctx, secrets, SealContext(c.Owner, sc.ID))
		clear(secrets)
		if err != nil {
			return Schedule{}, fmt.Errorf("sealing schedule %s's template: %w", sc.ID, err)
		}
		sc.Sealed = &env
	}
	tmpl, err := job.Marshal(kept)
	if err != nil {
		return Schedule{}, err
	}
	sc.Job = job.Doc(tmpl)
	n, err := s.count(ctx, c.Owner)
	if err != nil {
		return Schedule{}, err
	}
	if n >= s.cfg.MaxPerOwner {
		return Schedule{}, &fault.Limit{Code: LimitCode, Max: s.cfg.MaxPerOwner, Msg: fmt.Sprintf("at most %d schedules per user: delete one first", s.cfg.MaxPerOwner)}
	}
	if err := s.put(ctx, &sc, false); err != nil {
		return Schedule{}, err
	}
	if s.cfg.Backend != nil {
		if err := s.cfg.Backend.Put(ctx, sc, e); err != nil {
			// Nothing fires it: take the definition back.
			if derr := s.delete(context.WithoutCancel(ctx), sc.Owner, sc.ID); derr != nil {
				s.cfg.Logger.ErrorContext(ctx, "removing a schedule whose trigger failed", "schedule_id", sc.ID, "error", derr)
			}
			return Schedule{}, err
		}
	}
	s.cfg.Logger.InfoContext(ctx, "schedule created", "schedule_id", sc.ID, "expression", e.AWS(), "timezone", sc.Timezone)
	return s.withNext(sc), nil
}

// withNext fills NextRunAt (nil while paused).
func (s *Service) withNext(sc Schedule) Schedule {
	sc.NextRunAt = nil
	if sc.Status != Active {
		return sc
	}
	if e, err := sc.Expr(); err == nil {
		from := s.cfg.Now()
		if sc.ActiveFrom.After(from) {
			from = sc.ActiveFrom
		}
		if t := e.Next(from); !t.IsZero() {
			sc.NextRunAt = &t
		}
	}
	return sc
}

// Get returns owner's schedule id.
func (s *Service) Get(ctx context.Context, owner, id string) (Schedule, error) {
	if !ids.Valid(Prefix, id) {
		return Schedule{}, ErrNotFound
	}
	sc, err := s.get(ctx, owner, id)
	if err != nil {
		return Schedule{}, err
	}
	return s.withNext(sc), nil
}

// List returns owner's schedules, oldest first.
func (s *Service) List(ctx context.Context, owner string) ([]Schedule, error) {
	list, err := s.list(ctx, owner)
	if err != nil {
		return nil, err
	}
	for i := range list {
		list[i] = s.withNext(list[i])
	}
	return list, nil
}

// Pause stops owner's schedule from submitting jobs; its ticks until the
// resume are skipped, not replayed. Pausing a paused schedule is a no-op.
func (s *Service) Pause(ctx context.Context, owner, id string) (Schedule, error) {
	return s.setStatus(ctx, owner, id, Paused)
}

// Resume lets a paused schedule submit again from its next tick.
func (s *Service) Resume(ctx context.Context, owner, id string) (Schedule, error) {
	return s.setStatus(ctx, owner, id, Active)
}

func (s *Service) setStatus(ctx context.Context, owner, id, status string) (Schedule, error) {
	if !ids.Valid(Prefix, id) {
		return Schedule{}, ErrNotFound
	}
	sc, err := s.update(ctx, owner, id, func(sc *Schedule) bool {
		if sc.Status == status {
			return false
		}
		now := s.cfg.Now().UTC()
		sc.Status, sc.UpdatedAt = status, now
		if status == Active {
			sc.ActiveFrom = now
		}
		return true
	})
	if err != nil {
		return Schedule{}, err
	}
	if s.cfg.Backend != nil {
		e, err := sc.Expr()
		if err != nil {
			return Schedule{}, err
		}
		// The table is the truth (a tick checks it): a failed update of
		// the trigger only costs ticks that Fire skips.
		if err := s.cfg.Backend.Put(ctx, sc, e); err != nil {
			return Schedule{}, err
		}
	}
	s.cfg.Logger.InfoContext(ctx, "schedule "+status, "schedule_id", id)
	return s.withNext(sc), nil
}

// Delete removes owner's schedule and its trigger.
func (s *Service) Delete(ctx context.Context, owner, id string) error {
	if !ids.Valid(Prefix, id) {
		return ErrNotFound
	}
	if _, err := s.get(ctx, owner, id); err != nil {
		return err
	}
	if s.cfg.Backend != nil {
		if err := s.cfg.Backend.Delete(ctx, id); err != nil {
			return err
		}
	}
	if err := s.delete(ctx, owner, id); err != nil {
		return err
	}
	s.cfg.Logger.InfoContext(ctx, "schedule deleted", "schedule_id", id)
	return nil
}

// Tick is one firing of a schedule, as the trigger's input names it.
type Tick struct {
	ScheduleID string    `json:"scheduleId"`
	Owner      string    `json:"owner"`
	At         time.Time `json:"at"`
}

// FireResult says what a tick did.
type FireResult struct {
	// JobID is the tick's job ("" when skipped).
	JobID string
	// Created: the job is new (false: the tick fired before, or an
	// identical job of the owner is active).
	Created bool
	// Skipped says why no job was submitted ("" when one was).
	Skipped string
}

// Fire submits the schedule's job for tick t.At, once: the job id is
// derived from the schedule's seed and the tick, so a second firing of the
// same tick finds the first job. A deleted schedule, a paused one, and a
// tick from before the schedule was (re)activated submit nothing.
func (s *Service) Fire(ctx context.Context, t Tick) (FireResult, error) {
	sc, err := s.get(ctx, t.Owner, t.ScheduleID)
	if errors.Is(err, ErrNotFound) {
		return FireResult{Skipped: "deleted"}, nil
	}
	if err != nil {
		return FireResult{}, err
	}
	at := t.At.UTC().Truncate(time.Second)
	log := s.cfg.Logger.With("schedule_id", sc.ID, "tick", at)
	switch {
	case sc.Status != Active:
		log.InfoContext(ctx, "tick skipped: the schedule is paused")
		return FireResult{Skipped: "paused"}, nil
	case at.Before(sc.ActiveFrom):
		log.InfoContext(ctx, "tick skipped: it fell before the schedule was active")
		return FireResult{Skipped: "before active"}, nil
	}
	var req submission.SubmitRequest
	if err := json.Unmarshal(sc.Job, &req); err != nil {
		return FireResult{}, fmt.Errorf("reading schedule %s's job: %w", sc.ID, err)
	}
	if sc.Sealed != nil {
		if req, err = s.open(ctx, sc, req); err != nil {
			return FireResult{}, err
		}
	}
	key := sc.ID + "@" + at.Format(time.RFC3339)
	j, created, err := s.cfg.Jobs.SubmitWith(ctx, submission.Caller{Owner: sc.Owner, Plan: sc.Plan}, req,
		submission.SubmitOptions{JobID: TickJobID(sc.Seed, at), HashKey: key})
	var ue *submission.UnusableError
	if _, bad := invalid.As(err); bad || errors.As(err, &ue) {
		// The template stopped being usable (an upload expired, the
		// account was disconnected): nothing to retry.
		log.WarnContext(ctx, "tick refused by validation", "error", err)
		return FireResult{Skipped: "refused: " + err.Error()}, nil
	}
	if err != nil {
		return FireResult{}, err
	}
	if _, err := s.update(ctx, sc.Owner, sc.ID, func(sc *Schedule) bool {
		for _, r := range sc.LastRuns {
			if r.At.Equal(at) {
				return false
			}
		}
		sc.LastRuns = append([]Run{{At: at, JobID: j.ID}}, sc.LastRuns...)
		if len(sc.LastRuns) > KeepRuns {
			sc.LastRuns = sc.LastRuns[:KeepRuns]
		}
		return true
	}); err != nil && !errors.Is(err, ErrNotFound) {
		log.WarnContext(ctx, "recording the run failed", "error", err)
	}
	log.InfoContext(ctx, "tick submitted a job", "job_id", j.ID, "created", created)
	return FireResult{JobID: j.ID, Created: created}, nil
}

// open puts the template's sealed values back into req.
func (s *Service) open(ctx context.Context, sc Schedule, req submission.SubmitRequest) (submission.SubmitRequest, error) {
	if s.cfg.Sealer == nil {
		return req, fmt.Errorf("schedule %s's template holds sealed values and no sealer is configured", sc.ID)
	}
	secrets, err := s.cfg.Sealer.Open(ctx, *sc.Sealed, SealContext(sc.Owner, sc.ID))
	if err != nil {
		return req, fmt.Errorf("opening schedule %s's template: %w", sc.ID, err)
	}
	defer clear(secrets)
	return s.cfg.Jobs.JoinSecrets(req, secrets)
}

// TickJobID is the id of the job of the tick at: the job prefix and 128
// bits of HMAC-SHA256(seed, tick), unguessable without the seed.
func TickJobID(seed string, at time.Time) string {
	key, _ := hex.DecodeString(seed)
	m := hmac.New(sha256.New, key)
	m.Write([]byte(at.UTC().Format(time.RFC3339)))
	sum := m.Sum(nil)
	return ids.Job + "_" + enc.EncodeToString(sum[:16])
}

var enc = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

func newSeed() string { return ids.Hex(32) }
