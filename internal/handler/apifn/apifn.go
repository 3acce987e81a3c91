// Package apifn is the API function behind API Gateway (HTTP API, payload
// v2): every path resources.FunctionForPath gives it (API Gateway's
// $default route): health, account connection, jobs, webhooks and the
// operations dashboard. Its handler is the router (httpapi.Router.Serve).
// The admin, uploads and schedules routes are their own functions'
// (adminfn, uploadsfn, schedulesfn), so this one creates no S3, Scheduler
// or Lambda client and its role may call none of them.
package apifn

import (
	"context"

	"github.com/aws/aws-lambda-go/events"

	"github.com/conveyor/conveyor/internal/accounts"
	"github.com/conveyor/conveyor/internal/handler"
	"github.com/conveyor/conveyor/internal/handler/pipeline"
	"github.com/conveyor/conveyor/internal/handler/systemfn"
	"github.com/conveyor/conveyor/internal/httpapi"
	"github.com/conveyor/conveyor/internal/resources"
	"github.com/conveyor/conveyor/internal/sealer"
)

// Name is the function's name in the resource definition.
const Name = resources.FuncAPI

// Resolve reads no secret at cold start (httpapi.Resolve).
var Resolve = httpapi.Resolve

// Handler is the API function's handler: the router's.
func Handler(rt *httpapi.Router) func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	return rt.Serve
}

// Router registers the users' API and the dashboard (served with dash's
// headers) on a new router.
func Router(env handler.Env, s httpapi.UserServices, dash httpapi.DashboardOptions) *httpapi.Router {
	rt := httpapi.RouterFor(env)
	httpapi.RegisterUsers(rt, s)
	// The operations dashboard: served by the api function, in AWS as here.
	httpapi.RegisterDashboard(rt, dash)
	return rt
}

// Platform is what the API function does differently in AWS and under the
// local stack: how the dashboard is served. The caller chooses (AWS or
// Local); this package never looks at the environment's name. (The DLQ
// mover and the tier switch are the admin function's: adminfn.Platform.)
type Platform struct {
	// Dashboard sets the dashboard's headers.
	Dashboard httpapi.DashboardOptions
}

// AWS is the API function's platform in AWS: the dashboard served over
// HTTPS (HSTS).
func AWS(handler.Env) Platform { return Platform{} }

// Local is the local stack's: the dashboard is plain HTTP on 127.0.0.1.
func Local(handler.Env) Platform { return Platform{Dashboard: LocalDashboard} }

// LocalDashboard serves the dashboard without HSTS, and lets it reach a
// stream on another local port.
var LocalDashboard = httpapi.DashboardOptions{Local: true}

// New wires the API function from env for AWS.
func New(ctx context.Context, env handler.Env) (func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error), error) {
	return NewWith(AWS)(ctx, env)
}

// NewWith wires the API function from env on the platform made by
// platform.
func NewWith(platform func(handler.Env) Platform) func(context.Context, handler.Env) (func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error), error) {
	return func(_ context.Context, env handler.Env) (func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error), error) {
		return build(env, platform(env))
	}
}

func build(env handler.Env, pf Platform) (func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error), error) {
	db, sqsc := env.DynamoDB(), env.SQS()
	st := env.Store(db)
	// Submission only: the api validates and stores jobs and runs none, so
	// it holds the kinds' fronts and accounts that are connected here but
	// never refreshed (no external API client, no breaker). No bucket: the
	// uploads are the uploads function's.
	seal := sealer.For(env.AWS, env.Config.KMSKeyID)
	sub := pipeline.NewSubmission(env, st, sqsc, pipeline.Fronts(st, seal))
	accts := accounts.New(accounts.Config{Store: st, Sealer: seal, Now: env.Now, Logger: env.Log()})
	keys, endpoints, err := systemfn.Webhooks(env, st)
	if err != nil {
		return nil, err
	}
	s := httpapi.UserServices{Jobs: sub.Jobs, Accounts: accts, Keys: keys, Endpoints: endpoints, Idempotency: httpapi.IdempotencyFor(env, st)}
	return Handler(Router(env, s, pf.Dashboard)), nil
}
