// Package pipeline wires the submission half of the pipeline: the tier
// queues' sender, the kinds' fronts and the jobs service (Submission). It
// runs no job, so the functions that submit, validate or re-queue jobs (the
// api, recovery's schedule ticks) link neither the external API's client,
// nor the breaker, nor the publisher's run loop, nor S3 through it; those
// that create jobs give it a sealer for the http jobs' headers (KMS).
// The half that runs jobs is internal/handler/runner's (the publisher
// function; internal/app builds both for the local stack).
package pipeline

import (
	"github.com/conveyor/conveyor/internal/handler"
	"github.com/conveyor/conveyor/internal/httpjob"
	"github.com/conveyor/conveyor/internal/jobs"
	"github.com/conveyor/conveyor/internal/kind"
	"github.com/conveyor/conveyor/internal/publishjob"
	"github.com/conveyor/conveyor/internal/queue"
	"github.com/conveyor/conveyor/internal/store"
)

// Submission is the half of the pipeline that submits and re-queues jobs.
// It runs none: it holds the kinds' fronts only (kind.Front).
type Submission struct {
	Sender *queue.Sender
	// Fronts are the kinds of job users may submit.
	Fronts *kind.Fronts
	Jobs   *jobs.Service
}

// Fronts are the built-in kinds' fronts, publish and http, the publish one
// explaining refusals from st, the http one sealing its jobs' headers with
// s (nil: a function that only checks submissions, which seals nothing; a
// job with headers is then refused). A function that submits registers
// these; the kinds the publisher runs (runner.Runner.Kinds) carry the same
// fronts.
func Fronts(st *store.Store, s httpjob.Sealer) *kind.Fronts {
	return kind.NewFronts(publishjob.New(publishjob.Config{Store: st}), httpjob.Front{Sealer: s})
}

// NewSubmission wires the submission half on the table st and the queues
// of client, accepting the kinds of fronts.
func NewSubmission(env handler.Env, st *store.Store, client *queue.Client, fronts *kind.Fronts) *Submission {
	cfg := env.Config
	s := &Submission{Sender: queue.NewSender(client, cfg.QueueURLs, cfg.Fairness), Fronts: fronts}
	s.Jobs = jobs.New(jobs.Config{
		Store: st, Sender: s.Sender, Kinds: fronts, Env: cfg.Env, MaxAttempts: cfg.MaxAttempts, Now: env.Now, Logger: env.Log(),
	})
	return s
}
