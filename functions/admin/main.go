// Command admin is the admin function behind API Gateway (HTTP API,
// payload v2): the operators' routes under /v1/admin/.
package main

import (
	"github.com/conveyor/conveyor/internal/handler"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/queue"
)

func main() { handler.Start(handler.Admin(platform)) }

// platform is AWS's, except under the local stack, which runs this very
// binary against an emulator that has neither SQS move tasks nor event
// source mappings: there it injects the local stand-ins.
func platform(env handler.Env, client *queue.Client) handler.AdminPlatform {
	if env.Config.Env == job.Local {
		return handler.AdminLocal(env, client)
	}
	return handler.AdminOnAWS(env, client)
}
