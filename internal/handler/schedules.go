package handler

import (
	"context"

	"github.com/conveyor/conveyor/internal/aws/scheduler"
	"github.com/conveyor/conveyor/internal/aws/sealer"
	"github.com/conveyor/conveyor/internal/aws/store"
	"github.com/conveyor/conveyor/internal/httpapi"
	"github.com/conveyor/conveyor/internal/ratelimit"
	"github.com/conveyor/conveyor/internal/resources"
	"github.com/conveyor/conveyor/internal/schedule"
)

// Schedules is the schedules function behind API Gateway (HTTP API,
// payload v2): resources.SchedulesPath and every path under it (API.md,
// "Recurring schedules": create, list, get, pause, resume, delete). Its
// handler is a router with only those routes (httpapi.RegisterSchedules),
// verified exactly as the api function verifies. It is the only HTTP
// function that creates a Scheduler client and may call EventBridge
// Scheduler, and the only one that loads time zones (its main embeds the
// zone database). Its ticks are not its own: Scheduler invokes the recovery
// function with them. It reads no secret at cold start (ResolveHTTP).
var Schedules = Function[HTTPHandler]{Name: resources.FuncSchedules, Resolve: ResolveHTTP, New: NewSchedules}

// The table keeps the schedules (schedule.Records).
var _ schedule.Records = (*store.Store)(nil)

// SchedulesRouter registers the schedules' routes on a new router; st
// keeps their Idempotency-Keys, and lim admits user tokens' requests by
// their owner's rate (RateLimiter: the same buckets as the api function's).
func SchedulesRouter(env Env, svc *schedule.Service, st *store.Store, lim *ratelimit.Limiter) *httpapi.Router {
	rt := routerWith(env, lim)
	httpapi.RegisterSchedules(rt, svc, IdempotencyFor(env, st))
	return rt
}

// NewSchedules wires the schedules function from env: the table, the queues (the
// job service a template is checked by) and Scheduler. A template is
// validated as a submission would be, which reads only the table: the
// pipeline gets no bucket (nothing here streams media) and no sealer (no
// job is created here), so the function creates no S3 client. Its KMS
// client seals a template's secret values (an http job's headers) apart
// from the template (schedule.SealContext).
func NewSchedules(_ context.Context, env Env) (HTTPHandler, error) {
	db, sqsc := env.DynamoDB(), env.SQS()
	st := env.Store(db)
	sub := NewSubmission(env, st, sqsc, Fronts(st, nil))
	schedules := schedule.New(schedule.Config{Store: st, Jobs: sub.Jobs, Now: env.Now, Logger: env.Log(), Backend: scheduler.For(env.AWS, env.Config),
		Sealer: sealer.For(env.AWS, env.Config.KMSKeyID)})
	lim, err := RateLimiter(env, st)
	if err != nil {
		return nil, err
	}
	return SchedulesRouter(env, schedules, st, lim).Serve, nil
}
