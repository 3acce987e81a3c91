package httpapi

import (
	"context"

	"github.com/aws/aws-lambda-go/events"

	"github.com/conveyor/conveyor/internal/handler"
	"github.com/conveyor/conveyor/internal/secretref"
	"github.com/conveyor/conveyor/internal/store"
)

// FunctionHandler is the handler of a function behind the HTTP API
// (payload v2): api, admin, uploads and schedules (resources.HTTPRoutes).
// Each starts from RouterFor and registers its route group, so every group
// answers alike; a router built in internal/handler, which every function
// imports, would make each function link the whole HTTP surface.
type FunctionHandler = func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error)

// Resolve, the HTTP functions' cold start, reads no secret: the JWT key is
// read in the background (secretref.JWTKey) and the first request that
// needs it waits.
var Resolve handler.Resolver = secretref.ExceptJWT

// RouterFor returns a router without routes that verifies tokens with env's
// JWT key (read in the background from now on) and, when configured, with
// env's OIDC issuer (handler.Env.Verifier), and logs with env's logger.
func RouterFor(env handler.Env) *Router {
	return NewRouter(Options{Verifier: env.Verifier(secretref.JWTKey(env.Config, env.AWS).Get), Logger: env.Log()})
}

// IdempotencyFor is the creating routes' Idempotency-Key guard, keeping its
// keys in st for CONVEYOR_IDEMPOTENCY_WINDOW.
func IdempotencyFor(env handler.Env, st *store.Store) Idempotency {
	return Idempotency{Records: st, Window: env.Config.IdempotencyWindow, Now: env.Now, Logger: env.Log()}
}
