// Command admin is the admin function behind API Gateway (HTTP API,
// payload v2): the operators' routes under /v1/admin/.
package main

import (
	"github.com/conveyor/conveyor/internal/aws/esm"
	"github.com/conveyor/conveyor/internal/aws/queue"
	"github.com/conveyor/conveyor/internal/handler"
	"github.com/conveyor/conveyor/internal/job"
)

func main() { handler.Start(handler.Admin(platform)) }

// platform is where the admin function runs: under the local stack its
// stand-ins, in AWS move tasks and the tiers' event source mappings (the
// only function that links the Lambda client).
func platform(env handler.Env, client *queue.Client) handler.AdminPlatform {
	if env.Config.Env == job.Local {
		return handler.AdminLocal(env, client)
	}
	return handler.AdminOnAWS(env, client, esm.New(env.AWS, env.Config.ESMUUIDs))
}
