package handler

import (
	"context"

	"github.com/conveyor/conveyor/internal/aws/bucket"
	"github.com/conveyor/conveyor/internal/httpapi"
	"github.com/conveyor/conveyor/internal/ratelimit"
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

// UploadsRouter registers the uploads routes on a new router, whose user
// tokens' requests lim admits by their owner's rate (RateLimiter: the same
// buckets as the api function's).
func UploadsRouter(env Env, svc *uploads.Service, lim *ratelimit.Limiter) *httpapi.Router {
	rt := routerWith(env, lim)
	httpapi.RegisterUploads(rt, svc)
	return rt
}

// NewUploads wires the uploads function from env: the table and the bucket.
func NewUploads(_ context.Context, env Env) (HTTPHandler, error) {
	st := env.Store(env.DynamoDB())
	lim, err := RateLimiter(env, st)
	if err != nil {
		return nil, err
	}
	return UploadsRouter(env, UploadsService(env, st, bucket.New(env.AWS, env.Config.Bucket)), lim).Serve, nil
}
