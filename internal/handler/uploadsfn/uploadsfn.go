// Package uploadsfn is the uploads function behind API Gateway (HTTP API,
// payload v2): every path under resources.UploadsPathPrefix (API.md,
// "Uploads": sign, confirm on demand, get). Its handler is a router with
// only the uploads routes (httpapi.RegisterUploads), verified exactly as
// the api function verifies. It is the only HTTP function that creates an
// S3 client and may call S3 (presigned PUTs and the ranged GET of a
// confirm); it creates the table's and the bucket's clients and
// nothing else: no queue is sent to, no token sealed, no job validated.
package uploadsfn

import (
	"context"

	"github.com/conveyor/conveyor/internal/aws/bucket"
	"github.com/conveyor/conveyor/internal/handler"
	"github.com/conveyor/conveyor/internal/handler/confirmfn"
	"github.com/conveyor/conveyor/internal/httpapi"
	"github.com/conveyor/conveyor/internal/resources"
	"github.com/conveyor/conveyor/internal/uploads"
)

// Name is the function's name in the resource definition.
const Name = resources.FuncUploads

// Resolve reads no secret at cold start (httpapi.Resolve).
var Resolve = httpapi.Resolve

// Router registers the uploads routes on a new router.
func Router(env handler.Env, svc *uploads.Service) *httpapi.Router {
	rt := httpapi.RouterFor(env)
	httpapi.RegisterUploads(rt, svc)
	return rt
}

// New wires the uploads function from env: the table and the bucket.
func New(_ context.Context, env handler.Env) (httpapi.FunctionHandler, error) {
	db := env.DynamoDB()
	return Router(env, confirmfn.Uploads(env, env.Store(db), bucket.New(env.AWS, env.Config.Bucket))).Serve, nil
}
