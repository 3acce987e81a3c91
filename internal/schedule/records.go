package schedule

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/conveyor/conveyor/internal/envelope"
	"github.com/conveyor/conveyor/internal/fault"
	"github.com/conveyor/conveyor/internal/job"
)

// Records keeps the schedules (*store.Store: one item per schedule under
// its owner's partition).
type Records interface {
	CreateSchedule(ctx context.Context, r Record) error
	ReplaceSchedule(ctx context.Context, r Record, prev int64) error
	GetSchedule(ctx context.Context, owner, id string) (Record, error)
	ListSchedules(ctx context.Context, owner string) ([]Record, error)
	CountSchedules(ctx context.Context, owner string) (int, error)
	DeleteSchedule(ctx context.Context, owner, id string) error
}

// Record is a recurring schedule as the table keeps it (the store's
// item: the dynamodbav tags are its attribute names).
type Record struct {
	ID       string  `dynamodbav:"id"`
	Name     string  `dynamodbav:"name"`
	Cron     string  `dynamodbav:"cron,omitempty"`
	Rate     string  `dynamodbav:"rate,omitempty"`
	Timezone string  `dynamodbav:"timezone"`
	Job      job.Doc `dynamodbav:"job"`
	Status   string  `dynamodbav:"status"`
	// CreatedAt, UpdatedAt and ActiveFrom (the last create or resume).
	CreatedAt  time.Time `dynamodbav:"createdAt"`
	UpdatedAt  time.Time `dynamodbav:"updatedAt"`
	ActiveFrom time.Time `dynamodbav:"activeFrom"`
	// Runs are the latest ticks that submitted a job, newest first.
	Runs []RecordRun `dynamodbav:"runs"`
	// Owner and Plan: who the ticks' jobs are submitted as.
	Owner string `dynamodbav:"owner"`
	Plan  string `dynamodbav:"plan"`
	// Seed is the secret the ticks' job ids are derived from.
	Seed string `dynamodbav:"seed"`
	// Sealed holds the template's secret values (SealContext).
	Sealed *envelope.Envelope `dynamodbav:"sealed,omitempty"`
	// Version counts the writes of the item: a replace is conditional on
	// the version read.
	Version int64 `dynamodbav:"version"`
}

// RecordRun is one tick of a schedule and the job it submitted, as kept.
type RecordRun struct {
	At    time.Time `dynamodbav:"at"`
	JobID string    `dynamodbav:"jobId"`
}

func recordOf(sc Schedule) Record {
	r := Record{
		ID: sc.ID, Name: sc.Name, Cron: sc.Cron, Rate: sc.Rate, Timezone: sc.Timezone, Job: sc.Job, Status: sc.Status,
		CreatedAt: sc.CreatedAt, UpdatedAt: sc.UpdatedAt, ActiveFrom: sc.ActiveFrom, Owner: sc.Owner, Plan: sc.Plan,
		Seed: sc.Seed, Sealed: sc.Sealed, Version: sc.Version,
	}
	if sc.LastRuns != nil {
		r.Runs = make([]RecordRun, len(sc.LastRuns))
		for i, run := range sc.LastRuns {
			r.Runs[i] = RecordRun{At: run.At, JobID: run.JobID}
		}
	}
	return r
}

func scheduleOf(r Record) Schedule {
	sc := Schedule{
		ID: r.ID, Name: r.Name, Cron: r.Cron, Rate: r.Rate, Timezone: r.Timezone, Job: r.Job, Status: r.Status,
		CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt, ActiveFrom: r.ActiveFrom, Owner: r.Owner, Plan: r.Plan,
		Seed: r.Seed, Sealed: r.Sealed, Version: r.Version, LastRuns: make([]Run, len(r.Runs)),
	}
	for i, run := range r.Runs {
		sc.LastRuns[i] = Run{At: run.At, JobID: run.JobID}
	}
	return sc
}

// put writes sc: a new item (replace=false) or, replacing, the version
// read; sc.Version counts the write when it succeeds.
func (s *Service) put(ctx context.Context, sc *Schedule, replace bool) error {
	prev := sc.Version
	r := recordOf(*sc)
	r.Version = prev + 1
	var err error
	if replace {
		err = s.cfg.Store.ReplaceSchedule(ctx, r, prev)
	} else {
		err = s.cfg.Store.CreateSchedule(ctx, r)
	}
	switch {
	case errors.Is(err, fault.ErrConflict):
		return errConflict
	case err != nil:
		return err
	}
	sc.Version = r.Version
	return nil
}

var errConflict = errors.New("schedule changed meanwhile")

func (s *Service) get(ctx context.Context, owner, id string) (Schedule, error) {
	r, err := s.cfg.Store.GetSchedule(ctx, owner, id)
	switch {
	case errors.Is(err, fault.ErrNotFound):
		return Schedule{}, ErrNotFound
	case err != nil:
		return Schedule{}, fmt.Errorf("reading schedule %s: %w", id, err)
	}
	return scheduleOf(r), nil
}

func (s *Service) list(ctx context.Context, owner string) ([]Schedule, error) {
	recs, err := s.cfg.Store.ListSchedules(ctx, owner)
	if err != nil {
		return nil, err
	}
	list := make([]Schedule, len(recs))
	for i, r := range recs {
		list[i] = scheduleOf(r)
	}
	return list, nil
}

func (s *Service) count(ctx context.Context, owner string) (int, error) {
	return s.cfg.Store.CountSchedules(ctx, owner)
}

// update applies fn to the schedule and writes it when fn reports a
// change, re-reading on a race.
func (s *Service) update(ctx context.Context, owner, id string, fn func(*Schedule) bool) (Schedule, error) {
	for range 5 {
		sc, err := s.get(ctx, owner, id)
		if err != nil {
			return Schedule{}, err
		}
		if !fn(&sc) {
			return sc, nil
		}
		switch err := s.put(ctx, &sc, true); {
		case err == nil:
			return sc, nil
		case !errors.Is(err, errConflict):
			return Schedule{}, err
		}
	}
	return Schedule{}, fmt.Errorf("updating schedule %s: %w", id, errConflict)
}

func (s *Service) delete(ctx context.Context, owner, id string) error {
	return s.cfg.Store.DeleteSchedule(ctx, owner, id)
}
