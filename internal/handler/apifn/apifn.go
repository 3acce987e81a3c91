// Package apifn is the API function behind API Gateway (HTTP API, payload
// v2): uploads, accounts, jobs, schedules, webhooks, the admin API and the
// operations dashboard. Its handler is the router (httpapi.Router.Serve).
package apifn

import (
	"context"
	"log/slog"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/conveyor/conveyor/internal/admin"
	"github.com/conveyor/conveyor/internal/admin/esm"
	"github.com/conveyor/conveyor/internal/api"
	"github.com/conveyor/conveyor/internal/auth"
	"github.com/conveyor/conveyor/internal/handler"
	"github.com/conveyor/conveyor/internal/handler/pipeline"
	"github.com/conveyor/conveyor/internal/handler/recoveryfn"
	"github.com/conveyor/conveyor/internal/handler/systemfn"
	"github.com/conveyor/conveyor/internal/httpapi"
	"github.com/conveyor/conveyor/internal/resources"
	"github.com/conveyor/conveyor/internal/secretref"
)

// Name is the function's name in the resource definition.
const Name = resources.FuncAPI

// Resolve reads the JWT key named by ARN at cold start.
var Resolve handler.Resolver = secretref.FromAWS

// Handler is the API function's handler: the router's.
func Handler(rt *httpapi.Router) func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	return rt.Serve
}

// Router registers every route on a new router: the users' API, the admin
// API and the dashboard (served with dash's headers).
func Router(env handler.Env, s api.Services, adm *admin.Service, dash api.DashboardOptions) *httpapi.Router {
	rt := httpapi.NewRouter(httpapi.Options{Verifier: auth.NewVerifier(env.Config.JWTSecret, env.Now), Logger: env.Log()})
	api.Register(rt, s)
	api.RegisterAdmin(rt, adm)
	// The operations dashboard: served by the api function, in AWS as here.
	api.RegisterDashboard(rt, dash)
	return rt
}

// Platform is what the API function does differently in AWS and under the
// local stack: how DLQs are redriven, how tiers are paused and how the
// dashboard is served. The caller chooses (AWS or Local); this package
// never looks at the environment's name.
type Platform struct {
	// Mover redrives a tier's DLQ (nil: admin's receive/send/delete mover).
	Mover admin.Mover
	// Switch turns a tier's consumer off and on (nil: none; the local
	// pollers read the tier flag).
	Switch admin.Switch
	// Dashboard sets the dashboard's headers.
	Dashboard api.DashboardOptions
}

// PlatformFunc makes the Platform at cold start from the function's
// environment and its SQS client.
type PlatformFunc func(env handler.Env, client *sqs.Client) Platform

// New wires the API function from env for AWS.
func New(ctx context.Context, env handler.Env) (func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error), error) {
	return NewWith(AWS)(ctx, env)
}

// NewWith wires the API function from env on the platform made by
// platform.
func NewWith(platform PlatformFunc) func(context.Context, handler.Env) (func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error), error) {
	return func(_ context.Context, env handler.Env) (func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error), error) {
		db, sqsc, s3c := env.DynamoDB(), env.SQS(), pipeline.S3(env)
		st := env.Store(db)
		p, err := pipeline.New(pipeline.Config{Env: env, DB: db, SQS: sqsc, S3: s3c, Sealer: env.Sealer(), Store: st, Metrics: env.Emitter()})
		if err != nil {
			return nil, err
		}
		pf := platform(env, sqsc)
		adm, err := pipeline.Admin(env, p, st, sqsc, pf.Mover, pf.Switch)
		if err != nil {
			return nil, err
		}
		keys, endpoints, err := systemfn.Webhooks(env, db)
		if err != nil {
			return nil, err
		}
		s := api.Services{Jobs: p.Jobs, Uploads: pipeline.Uploads(env, st, s3c), Accounts: p.Accounts,
			Schedules: recoveryfn.Schedules(env, db, p.Jobs), Keys: keys, Endpoints: endpoints}
		return Handler(Router(env, s, adm, pf.Dashboard)), nil
	}
}

// AWS is the API function's platform in AWS: DLQs redriven by SQS move
// tasks (receive/send/delete for a selection), tiers switched through
// their event source mappings (config.Config.ESMUUIDs), the dashboard
// served over HTTPS (HSTS).
func AWS(env handler.Env, client *sqs.Client) Platform {
	log := env.Log()
	return Platform{
		Mover:  admin.TaskMover{SQS: client, Fallback: admin.SQSMover{SQS: client, Logger: log}, Logger: log},
		Switch: esm.Switch{Lambda: lambda.NewFromConfig(env.AWS), UUIDs: env.Config.ESMUUIDs},
	}
}

// Local is the local stack's stand-ins: the emulator has no move tasks
// (DLQs are redriven by receive/send/delete) and no event source mappings
// (the local pollers read the tier flag, so there is nothing to switch),
// and the dashboard is plain HTTP on 127.0.0.1.
func Local(env handler.Env, client *sqs.Client) Platform {
	return Platform{Mover: LocalMover(client, env.Log()), Dashboard: LocalDashboard}
}

// LocalMover is the local stack's DLQ mover: receive → send → delete.
func LocalMover(client admin.SQSAPI, log *slog.Logger) admin.Mover {
	return admin.SQSMover{SQS: client, Logger: log}
}

// LocalDashboard serves the dashboard without HSTS, and lets it reach a
// stream on another local port.
var LocalDashboard = api.DashboardOptions{Local: true}
