package handler

import (
	"context"

	"github.com/conveyor/conveyor/internal/accounts"
	"github.com/conveyor/conveyor/internal/aws/sealer"
	"github.com/conveyor/conveyor/internal/httpapi"
	"github.com/conveyor/conveyor/internal/ratelimit"
	"github.com/conveyor/conveyor/internal/resources"
	"github.com/conveyor/conveyor/web"
)

// API is the API function behind API Gateway (HTTP API, payload v2) on the
// platform made by platform: every path resources.FunctionForPath gives it
// (API Gateway's $default route): health, account connection, jobs,
// webhooks and the operations dashboard. Its handler is the router
// (httpapi.Router.Serve), which admits each user token's request by its
// owner's rate (RateLimiter), as the uploads and schedules functions do.
// The admin, uploads and schedules routes are their own functions'
// (Admin, Uploads, Schedules), so this one creates no S3,
// Scheduler or Lambda client and its role may call none of them. It reads
// no secret at cold start (ResolveHTTP).
func API(platform func(Env) APIPlatform) Function[HTTPHandler] {
	return Function[HTTPHandler]{Name: resources.FuncAPI, Resolve: ResolveHTTP, New: NewAPIWith(platform)}
}

// APIRouter registers the users' API and the dashboard (the embedded app,
// web.Files, served with dash's headers) on a new router whose user
// tokens' requests lim admits by their owner's rate (RateLimiter).
func APIRouter(env Env, s httpapi.UserServices, dash httpapi.DashboardOptions, lim *ratelimit.Limiter) *httpapi.Router {
	rt := routerWith(env, lim)
	httpapi.RegisterUsers(rt, s)
	// The operations dashboard: served by the api function, in AWS as here.
	httpapi.RegisterDashboard(rt, web.Files(), dash)
	return rt
}

// APIPlatform is what the API function does differently in AWS and under
// the local stack: how the dashboard is served. The caller chooses
// (APIOnAWS or APILocal): the wiring never picks a platform by the
// environment's name. (The DLQ mover and the tier switch are the admin function's:
// AdminPlatform.)
type APIPlatform struct {
	// Dashboard sets the dashboard's headers.
	Dashboard httpapi.DashboardOptions
}

// APIOnAWS is the API function's platform in AWS: the dashboard served
// over HTTPS (HSTS).
func APIOnAWS(Env) APIPlatform { return APIPlatform{} }

// APILocal is the local stack's: the dashboard is plain HTTP on 127.0.0.1.
func APILocal(Env) APIPlatform { return APIPlatform{Dashboard: LocalDashboard} }

// LocalDashboard serves the dashboard without HSTS, and lets it reach a
// stream on another local port.
var LocalDashboard = httpapi.DashboardOptions{Local: true}

// NewAPI wires the API function from env for AWS.
func NewAPI(ctx context.Context, env Env) (HTTPHandler, error) {
	return NewAPIWith(APIOnAWS)(ctx, env)
}

// NewAPIWith wires the API function from env on the platform made by
// platform.
func NewAPIWith(platform func(Env) APIPlatform) func(context.Context, Env) (HTTPHandler, error) {
	return func(_ context.Context, env Env) (HTTPHandler, error) {
		return buildAPI(env, platform(env))
	}
}

func buildAPI(env Env, pf APIPlatform) (HTTPHandler, error) {
	db, sqsc := env.DynamoDB(), env.SQS()
	st := env.Store(db)
	// Submission only: the api validates and stores jobs and runs none, so
	// it holds the kinds' fronts and accounts that are connected here but
	// never refreshed (no external API client, no breaker). No bucket: the
	// uploads are the uploads function's.
	seal := sealer.For(env.AWS, env.Config.KMSKeyID)
	sub := NewSubmission(env, st, sqsc, Fronts(st, seal))
	accts := accounts.New(accounts.Config{Store: st, Sealer: seal, Now: env.Now, Logger: env.Log()})
	keys, endpoints, err := Webhooks(env, st)
	if err != nil {
		return nil, err
	}
	redeliveries, err := Redeliveries(env, st, sub.Sender, endpoints)
	if err != nil {
		return nil, err
	}
	lim, err := RateLimiter(env, st)
	if err != nil {
		return nil, err
	}
	s := httpapi.UserServices{Jobs: sub.Jobs, Accounts: accts, Keys: keys, Endpoints: endpoints, Redeliveries: redeliveries, Idempotency: IdempotencyFor(env, st)}
	return APIRouter(env, s, pf.Dashboard, lim).Serve, nil
}
