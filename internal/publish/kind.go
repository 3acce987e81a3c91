package publish

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/kind"
	"github.com/conveyor/conveyor/internal/publishjob"
)

// The publish kind's vocabulary is its front's (internal/publishjob), named
// here too for the run loop and its tests.

// Type is the publish kind's name (publishjob.Type).
const Type = publishjob.Type

// The phases of a publish job, in order (publishjob).
const (
	PhaseToken    = publishjob.PhaseToken
	PhaseDownload = publishjob.PhaseDownload
	PhaseUpload   = publishjob.PhaseUpload
	PhasePublish  = publishjob.PhasePublish
)

// Phases lists the phases of a publish job in order.
var Phases = publishjob.Phases

// Params are a publish job's params (publishjob.Params).
type Params = publishjob.Params

// Kind returns the publish kind, run by p: its front (publishjob, reading
// p's table for the account of p's provider) and its Work.
func (p *Publisher) Kind() kind.Kind {
	cfg := publishjob.Config{Provider: p.cfg.Provider}
	if p.cfg.Store != nil {
		cfg.Store = p.cfg.Store
	}
	return publishKind{Front: publishjob.New(cfg), p: p}
}

// publishKind is the publish front with the publisher's phases as its Work.
type publishKind struct {
	*publishjob.Front
	p *Publisher
}

// Work runs the publish phases. The attempt is always the publisher's own
// run (the publish kind needs its token and its facts-recording writes).
func (k publishKind) Work(ctx context.Context, a kind.Attempt) error {
	r, ok := a.(*run)
	if !ok {
		return errors.New("the publish kind runs only in the publisher's run loop")
	}
	return r.phases(ctx)
}

// The run is the kind.Attempt of every kind's Work.

func (r *run) Job() job.Job         { return r.snapshot() }
func (r *run) Logger() *slog.Logger { return r.log }
func (r *run) Now() time.Time       { return r.p.cfg.Now() }
func (r *run) Tried(i int) bool     { return i >= 0 && i < len(r.tried) && r.tried[i] }
func (r *run) Save(ctx context.Context, mutate func(*job.Job)) error {
	return r.save(ctx, mutate)
}
