// Command api is the HTTP API function behind API Gateway (HTTP API,
// payload v2): uploads, account connection, jobs, schedules, webhooks and
// the dashboard (the admin routes are the admin function's).
package main

import (
	"github.com/conveyor/conveyor/internal/handler"
	"github.com/conveyor/conveyor/internal/job"
)

func main() { handler.Start(handler.API(platform)) }

// platform is AWS's, except under the local stack, which runs this very
// binary on plain HTTP: there it injects the local stand-in.
func platform(env handler.Env) handler.APIPlatform {
	if env.Config.Env == job.Local {
		return handler.APILocal(env)
	}
	return handler.APIOnAWS(env)
}
