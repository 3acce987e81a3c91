package handler

import (
	"github.com/conveyor/conveyor/internal/aws/queue"
	"github.com/conveyor/conveyor/internal/aws/store"
	"github.com/conveyor/conveyor/internal/httpkind"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/publish"
	"github.com/conveyor/conveyor/internal/submission"
)

// The store keeps the jobs of submission, the queue sends them.
var (
	_ submission.Store  = (*store.Store)(nil)
	_ submission.Sender = (*queue.Sender)(nil)
)

// Submission is the half of the pipeline that submits and re-queues jobs:
// the tier queues' sender, the kinds' fronts and the jobs service. It runs
// none: it holds the kinds' fronts only (job.Front), so the functions that
// submit, validate or re-queue jobs (the api, schedules, recovery's
// schedule ticks) build no external API client, breaker or run loop; those
// that create jobs give it a sealer for the http jobs' headers (KMS). The
// half that runs jobs is Runner (runner.go); App builds both.
type Submission struct {
	Sender *queue.Sender
	// Fronts are the kinds of job users may submit.
	Fronts *job.Fronts
	Jobs   *submission.Service
}

// KindConfigs configure the built-in kinds: a function that only submits
// sets what their fronts use (the table, the sealer); the publisher's
// runner sets everything their Work needs too.
type KindConfigs struct {
	// Publish configures the publish kind.
	Publish publish.Config
	// HTTP configures the http kind.
	HTTP httpkind.Config
}

// Kinds are the built-in kinds of job, each whole (front and Work): the one
// place a new kind is registered. The functions that submit hold their
// fronts (Fronts) and the publisher runs them (NewRunner).
func Kinds(c KindConfigs) []job.Kind {
	return []job.Kind{
		publish.New(c.Publish),
		httpkind.New(c.HTTP),
	}
}

// Fronts are the built-in kinds (Kinds) as submission sees them, the
// publish one explaining refusals from st, the http one sealing its jobs'
// headers with s (nil: a function that only checks submissions, which
// seals nothing; a job with headers is then refused).
func Fronts(st *store.Store, s httpkind.Sealer) *job.Fronts {
	return job.NewRegistry(Kinds(KindConfigs{Publish: publish.Config{Store: st}, HTTP: httpkind.Config{Sealer: s}})...).Fronts()
}

// NewSubmission wires the submission half on the table st and the queues
// of client, accepting the kinds of fronts.
func NewSubmission(env Env, st *store.Store, client *queue.Client, fronts *job.Fronts) *Submission {
	cfg := env.Config
	s := &Submission{Sender: queue.NewSender(client, cfg.QueueURLs, queue.Fairness(cfg.Fairness)), Fronts: fronts}
	s.Jobs = submission.New(submission.Config{
		Store: st, Sender: s.Sender, Kinds: fronts, Env: cfg.Env, MaxAttempts: cfg.MaxAttempts, Now: env.Now, Logger: env.Log(),
	})
	return s
}
