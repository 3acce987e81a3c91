// Package apifn is the API function behind API Gateway (HTTP API, payload
// v2): uploads, accounts, jobs, schedules, webhooks and the operations
// dashboard. Its handler is the router (httpapi.Router.Serve). The admin
// routes are the admin function's (adminfn), so this one links none of
// the operators' clients.
package apifn

import (
	"context"
	// The schedules' time zones: the api validates them and computes next
	// runs (time.LoadLocation), and provided.al2023 is built on the AL2023
	// minimal image, which has shipped without /usr/share/zoneinfo. Only the
	// functions that load zones link the database (0.45 MB): Go's advice is
	// to import it from a program, not from a library such as schedule.
	_ "time/tzdata"

	"github.com/aws/aws-lambda-go/events"

	"github.com/conveyor/conveyor/internal/accounts"
	"github.com/conveyor/conveyor/internal/api"
	"github.com/conveyor/conveyor/internal/auth"
	"github.com/conveyor/conveyor/internal/handler"
	"github.com/conveyor/conveyor/internal/handler/bucket"
	"github.com/conveyor/conveyor/internal/handler/pipeline"
	"github.com/conveyor/conveyor/internal/handler/recoveryfn"
	"github.com/conveyor/conveyor/internal/handler/systemfn"
	"github.com/conveyor/conveyor/internal/httpapi"
	"github.com/conveyor/conveyor/internal/resources"
	"github.com/conveyor/conveyor/internal/sealer"
	"github.com/conveyor/conveyor/internal/secretref"
)

// Name is the function's name in the resource definition.
const Name = resources.FuncAPI

// Resolve reads no secret at cold start: the JWT key is read in the
// background (secretref.JWTKey) and the first request that needs it waits.
var Resolve handler.Resolver = secretref.ExceptJWT

// Handler is the API function's handler: the router's.
func Handler(rt *httpapi.Router) func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	return rt.Serve
}

// Router registers the users' API and the dashboard (served with dash's
// headers) on a new router.
func Router(env handler.Env, s api.Services, dash api.DashboardOptions) *httpapi.Router {
	rt := httpapi.NewRouter(httpapi.Options{Verifier: auth.NewVerifierFunc(secretref.JWTKey(env.Config, env.AWS).Get, env.Now), Logger: env.Log()})
	api.Register(rt, s)
	// The operations dashboard: served by the api function, in AWS as here.
	api.RegisterDashboard(rt, dash)
	return rt
}

// Platform is what the API function does differently in AWS and under the
// local stack: how the dashboard is served. The caller chooses (AWS or
// Local); this package never looks at the environment's name. (The DLQ
// mover and the tier switch are the admin function's: adminfn.Platform.)
type Platform struct {
	// Dashboard sets the dashboard's headers.
	Dashboard api.DashboardOptions
}

// AWS is the API function's platform in AWS: the dashboard served over
// HTTPS (HSTS).
func AWS(handler.Env) Platform { return Platform{} }

// Local is the local stack's: the dashboard is plain HTTP on 127.0.0.1.
func Local(handler.Env) Platform { return Platform{Dashboard: LocalDashboard} }

// LocalDashboard serves the dashboard without HSTS, and lets it reach a
// stream on another local port.
var LocalDashboard = api.DashboardOptions{Local: true}

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
	db, sqsc, s3c := env.DynamoDB(), env.SQS(), bucket.S3(env)
	st := env.Store(db)
	// Submission only: the api validates and stores jobs and runs none, so
	// it holds the kinds' fronts and accounts that are connected here but
	// never refreshed (no external API client, no breaker).
	sub := pipeline.NewSubmission(env, st, sqsc, pipeline.Fronts(st))
	accts := accounts.New(accounts.Config{Store: st, Sealer: sealer.For(env.AWS, env.Config.KMSKeyID), Now: env.Now, Logger: env.Log()})
	keys, endpoints, err := systemfn.Webhooks(env, db)
	if err != nil {
		return nil, err
	}
	s := api.Services{Jobs: sub.Jobs, Uploads: bucket.Uploads(env, st, s3c), Accounts: accts,
		Schedules: recoveryfn.Schedules(env, db, sub.Jobs), Keys: keys, Endpoints: endpoints}
	return Handler(Router(env, s, pf.Dashboard)), nil
}
