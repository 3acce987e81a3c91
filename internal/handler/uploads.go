package handler

import (
	"context"

	"github.com/conveyor/conveyor/internal/aws/bucket"
	"github.com/conveyor/conveyor/internal/httpapi"
	"github.com/conveyor/conveyor/internal/resources"
	"github.com/conveyor/conveyor/internal/uploads"
)

// Uploads is the uploads function behind API Gateway (HTTP API, payload
// v2): every path under resources.UploadsPathPrefix (API.md, "Uploads":
// sign, confirm on demand, get). Its handler is a router with only the
// uploads routes (httpapi.RegisterUploads), verified exactly as the api
// function verifies. It is the only HTTP function that creates an S3 client
// and may call S3 (presigned PUTs and the ranged GET of a
// confirm); it creates the table's and the bucket's clients and nothing
// else: no queue is sent to, no token sealed, no job validated. It reads no
// secret at cold start (ResolveHTTP).
var Uploads = Function[HTTPHandler]{Name: resources.FuncUploads, Resolve: ResolveHTTP, New: NewUploads}

// UploadsRouter registers the uploads routes on a new router.
func UploadsRouter(env Env, svc *uploads.Service) *httpapi.Router {
	rt := RouterFor(env)
	httpapi.RegisterUploads(rt, svc)
	return rt
}

// NewUploads wires the uploads function from env: the table and the bucket.
func NewUploads(_ context.Context, env Env) (HTTPHandler, error) {
	db := env.DynamoDB()
	return UploadsRouter(env, UploadsService(env, env.Store(db), bucket.New(env.AWS, env.Config.Bucket))).Serve, nil
}
