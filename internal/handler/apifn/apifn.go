// Package apifn is the API function behind API Gateway (HTTP API, payload
// v2): uploads, accounts, jobs, schedules, webhooks, the admin API and the
// operations dashboard. Its handler is the router (httpapi.Router.Serve).
package apifn

import (
	"context"

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
	"github.com/conveyor/conveyor/internal/job"
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
// API and the dashboard.
func Router(env handler.Env, s api.Services, adm *admin.Service) *httpapi.Router {
	rt := httpapi.NewRouter(httpapi.Options{Verifier: auth.NewVerifier(env.Config.JWTSecret, env.Now), Logger: env.Log()})
	api.Register(rt, s)
	api.RegisterAdmin(rt, adm)
	// The operations dashboard: served by the api function, in AWS as here.
	api.RegisterDashboard(rt, api.DashboardOptions{Local: env.Config.Env == job.Local})
	return rt
}

// New wires the API function from env (Movers says how DLQs are redriven
// and tiers switched).
func New(_ context.Context, env handler.Env) (func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error), error) {
	db, sqsc, s3c := env.DynamoDB(), env.SQS(), pipeline.S3(env)
	st := env.Store(db)
	p, err := pipeline.New(pipeline.Config{Env: env, DB: db, SQS: sqsc, S3: s3c, Sealer: env.Sealer(), Store: st, Metrics: env.Emitter()})
	if err != nil {
		return nil, err
	}
	mover, sw := Movers(env, sqsc)
	adm, err := pipeline.Admin(env, p, st, sqsc, mover, sw)
	if err != nil {
		return nil, err
	}
	keys, endpoints, err := systemfn.Webhooks(env, db)
	if err != nil {
		return nil, err
	}
	s := api.Services{Jobs: p.Jobs, Uploads: pipeline.Uploads(env, st, s3c), Accounts: p.Accounts,
		Schedules: recoveryfn.Schedules(env, db, p.Jobs), Keys: keys, Endpoints: endpoints}
	return Handler(Router(env, s, adm)), nil
}

// Movers are AWS's DLQ mover (SQS move tasks, falling back to
// receive/send/delete for a selection) and the switch of the tiers' event
// source mappings. In the local environment both are nil: admin's
// receive/send/delete mover, and the pollers read the tier flag.
func Movers(env handler.Env, client *sqs.Client) (admin.Mover, admin.Switch) {
	if env.Config.Env == job.Local {
		return nil, nil
	}
	log := env.Log()
	mover := admin.TaskMover{SQS: client, Fallback: admin.SQSMover{SQS: client, Logger: log}, Logger: log}
	return mover, esm.Switch{Lambda: lambda.NewFromConfig(env.AWS), UUIDs: env.Config.ESMUUIDs}
}
