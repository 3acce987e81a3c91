package handler

import (
	"context"
	"log/slog"

	"github.com/conveyor/conveyor/internal/admin"
	"github.com/conveyor/conveyor/internal/aws/queue"
	"github.com/conveyor/conveyor/internal/httpapi"
	"github.com/conveyor/conveyor/internal/ids"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/resources"
	"github.com/conveyor/conveyor/internal/submission"
)

// Admin is the admin function behind API Gateway (HTTP API, payload v2) on
// the platform made by platform: every route under
// resources.AdminPathPrefix (API.md, "Admin": overview, inspector, restart
// and stop, DLQ peek and redrive, tier pause and resume, breakers, stats).
// Its handler is a router with only the admin routes, verified exactly as
// the api function verifies (httpapi.AdminOnly, httpapi.ReadOnly). It is the
// only function that creates a Lambda client (the tiers' event source
// mappings) and uses SQS move tasks; it creates neither an S3 nor a KMS
// client nor the external API's, since re-queuing a job needs only the
// table and the queues. It reads no secret at cold start (ResolveHTTP).
func Admin(platform func(Env, *queue.Client) AdminPlatform) Function[HTTPHandler] {
	return Function[HTTPHandler]{Name: resources.FuncAdmin, Resolve: ResolveHTTP, New: NewAdminWith(platform)}
}

// AdminRouter registers the admin routes on a new router.
func AdminRouter(env Env, adm *admin.Service) *httpapi.Router {
	rt := RouterFor(env)
	httpapi.RegisterAdmin(rt, adm)
	return rt
}

// AdminPlatform is what the admin function does differently in AWS and
// under the local stack: how DLQs are redriven and how tiers are paused.
// The caller chooses (AdminOnAWS or AdminLocal): the wiring never picks a
// platform by the environment's name.
type AdminPlatform struct {
	// Mover redrives a tier's DLQ (nil: the receive/send/delete mover,
	// queue.SQSMover).
	Mover admin.Mover
	// Switch turns a tier's consumer off and on (nil: none; the local
	// pollers read the tier flag).
	Switch admin.Switch
}

// NewAdminWith wires the admin function from env on the platform made by
// platform.
func NewAdminWith(platform func(Env, *queue.Client) AdminPlatform) func(context.Context, Env) (HTTPHandler, error) {
	return func(_ context.Context, env Env) (HTTPHandler, error) {
		return buildAdmin(env, platform)
	}
}

func buildAdmin(env Env, platform func(Env, *queue.Client) AdminPlatform) (HTTPHandler, error) {
	db, sqsc := env.DynamoDB(), env.SQS()
	st := env.Store(db)
	sender := queue.NewSender(sqsc, env.Config.QueueURLs, queue.Fairness(env.Config.Fairness))
	// Restarts re-queue through the state machine (submission.Service.Requeue);
	// nothing here submits, so no kind of job is registered.
	js := submission.New(submission.Config{Store: st, Sender: sender, Kinds: &job.Fronts{}, Env: env.Config.Env,
		MaxAttempts: env.Config.MaxAttempts, Now: env.Now, Logger: env.Log()})
	breakers, err := env.Breaker(db, ids.New("wrk"), env.Emitter())
	if err != nil {
		return nil, err
	}
	pf := platform(env, sqsc)
	adm, err := env.Admin(AdminParts{Store: st, Jobs: js, Sender: sender, Breakers: breakers, SQS: sqsc, Mover: pf.Mover, Switch: pf.Switch})
	if err != nil {
		return nil, err
	}
	return AdminRouter(env, adm).Serve, nil
}

// AdminOnAWS is the admin function's platform in AWS: DLQs redriven by SQS
// move tasks (receive/send/delete for a selection), tiers switched by sw —
// in AWS their event source mappings (internal/aws/esm, with
// config.Config.ESMUUIDs), which the admin function's main makes, so that
// no other function links the Lambda client.
func AdminOnAWS(env Env, client *queue.Client, sw admin.Switch) AdminPlatform {
	log := env.Log()
	return AdminPlatform{
		Mover:  queue.TaskMover{SQS: client, Fallback: queue.SQSMover{SQS: client, Logger: log}, Logger: log},
		Switch: sw,
	}
}

// AdminLocal is the local stack's stand-ins: the emulator has no move tasks
// (DLQs are redriven by receive/send/delete) and no event source mappings
// (the local pollers read the tier flag, so there is nothing to switch).
func AdminLocal(env Env, client *queue.Client) AdminPlatform {
	return AdminPlatform{Mover: LocalMover(client, env.Log())}
}

// LocalMover is the local stack's DLQ mover: receive → send → delete.
func LocalMover(client queue.OperatorAPI, log *slog.Logger) admin.Mover {
	return queue.SQSMover{SQS: client, Logger: log}
}
