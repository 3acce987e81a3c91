// Package adminfn is the admin function behind API Gateway (HTTP API,
// payload v2): every route under resources.AdminPathPrefix (API.md,
// "Admin": overview, inspector, restart and stop, DLQ peek and redrive,
// tier pause and resume, breakers, stats). Its handler is a router with
// only the admin routes, verified exactly as the api function verifies
// (httpapi.AdminOnly, httpapi.ReadOnly). It is the only function that
// links the Lambda client (the tiers' event source mappings) and uses SQS
// move tasks; it links neither S3 nor KMS nor the external API's client,
// since re-queuing a job needs only the table and the queues.
package adminfn

import (
	"context"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/conveyor/conveyor/internal/admin"
	"github.com/conveyor/conveyor/internal/admin/esm"
	"github.com/conveyor/conveyor/internal/adminapi"
	"github.com/conveyor/conveyor/internal/auth"
	"github.com/conveyor/conveyor/internal/handler"
	"github.com/conveyor/conveyor/internal/httpapi"
	"github.com/conveyor/conveyor/internal/ids"
	"github.com/conveyor/conveyor/internal/jobs"
	"github.com/conveyor/conveyor/internal/kind"
	"github.com/conveyor/conveyor/internal/queue"
	"github.com/conveyor/conveyor/internal/resources"
	"github.com/conveyor/conveyor/internal/secretref"
)

// Name is the function's name in the resource definition.
const Name = resources.FuncAdmin

// Resolve reads the JWT key named by ARN at cold start.
var Resolve handler.Resolver = secretref.FromAWS

// Handler is the admin function's handler: the router's.
func Handler(rt *httpapi.Router) func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	return rt.Serve
}

// Router registers the admin routes on a new router.
func Router(env handler.Env, adm *admin.Service) *httpapi.Router {
	rt := httpapi.NewRouter(httpapi.Options{Verifier: auth.NewVerifier(env.Config.JWTSecret, env.Now), Logger: env.Log()})
	adminapi.Register(rt, adm)
	return rt
}

// New wires the admin function from env.
func New(_ context.Context, env handler.Env) (func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error), error) {
	db, sqsc := env.DynamoDB(), env.SQS()
	st := env.Store(db)
	sender := queue.NewSender(sqsc, env.Config.QueueURLs)
	// Restarts re-queue through the state machine (jobs.Service.Requeue);
	// nothing here submits, so no kind of job is registered.
	js := jobs.New(jobs.Config{Store: st, Sender: sender, Kinds: &kind.Registry{}, Env: env.Config.Env,
		MaxAttempts: env.Config.MaxAttempts, Now: env.Now, Logger: env.Log()})
	breakers, err := env.Breaker(db, ids.New("wrk"), env.Emitter())
	if err != nil {
		return nil, err
	}
	mover, sw := Movers(env, sqsc)
	adm, err := env.Admin(handler.AdminParts{Store: st, Jobs: js, Sender: sender, Breakers: breakers, SQS: sqsc, Mover: mover, Switch: sw})
	if err != nil {
		return nil, err
	}
	return Handler(Router(env, adm)), nil
}

// Movers are AWS's DLQ mover (SQS move tasks, falling back to
// receive/send/delete for a selection) and the switch of the tiers' event
// source mappings. In the local environment both are nil: admin's
// receive/send/delete mover, and the pollers read the tier flag.
func Movers(env handler.Env, client *sqs.Client) (admin.Mover, admin.Switch) {
	if env.Config.Env == resources.Local {
		return nil, nil
	}
	log := env.Log()
	mover := admin.TaskMover{SQS: client, Fallback: admin.SQSMover{SQS: client, Logger: log}, Logger: log}
	return mover, esm.Switch{Lambda: lambda.NewFromConfig(env.AWS), UUIDs: env.Config.ESMUUIDs}
}
