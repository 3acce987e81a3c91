// Command api is the HTTP API function behind API Gateway (HTTP API,
// payload v2): uploads, account connection, jobs, schedules, webhooks and
// the dashboard (the admin routes are the admin function's).
package main

import (
	"github.com/conveyor/conveyor/internal/handler"
	fn "github.com/conveyor/conveyor/internal/handler/apifn"
	"github.com/conveyor/conveyor/internal/job"
)

func main() { handler.Start(fn.Name, fn.Resolve, fn.NewWith(platform)) }

// platform is AWS's, except under the local stack, which runs this very
// binary on plain HTTP: there it injects the local stand-in.
func platform(env handler.Env) fn.Platform {
	if env.Config.Env == job.Local {
		return fn.Local(env)
	}
	return fn.AWS(env)
}
