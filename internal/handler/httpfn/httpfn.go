// Package httpfn is what the functions behind the HTTP API share (api,
// admin, uploads, schedules: resources.HTTPRoutes): the router each starts
// from, with one set of middleware (internal/httpapi: request ids, the JWT
// check with the key read in the background and the OIDC issuer's tokens
// when one is configured, roles, the error contract,
// body limits, the access log) and the creating routes' Idempotency-Key
// guard, so each function registers only its route group and every group
// answers alike. It is apart from internal/handler because every function
// imports that one: a router built there would make each of them link the
// whole HTTP surface and the domains its routes call.
package httpfn

import (
	"context"

	"github.com/aws/aws-lambda-go/events"

	"github.com/conveyor/conveyor/internal/handler"
	"github.com/conveyor/conveyor/internal/httpapi"
	"github.com/conveyor/conveyor/internal/secretref"
	"github.com/conveyor/conveyor/internal/store"
)

// Handler is an HTTP API function's handler (payload v2).
type Handler = func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error)

// Resolve reads no secret at cold start: the JWT key is read in the
// background (secretref.JWTKey) and the first request that needs it waits.
var Resolve handler.Resolver = secretref.ExceptJWT

// Router returns a router without routes that verifies tokens with env's
// JWT key (read in the background from now on) and, when configured, with
// env's OIDC issuer (handler.Env.Verifier), and logs with env's logger.
func Router(env handler.Env) *httpapi.Router {
	return httpapi.NewRouter(httpapi.Options{Verifier: env.Verifier(secretref.JWTKey(env.Config, env.AWS).Get), Logger: env.Log()})
}

// Idempotency is the creating routes' Idempotency-Key guard, keeping its
// keys in st for CONVEYOR_IDEMPOTENCY_WINDOW.
func Idempotency(env handler.Env, st *store.Store) httpapi.Idempotency {
	return httpapi.Idempotency{Records: st, Window: env.Config.IdempotencyWindow, Now: env.Now, Logger: env.Log()}
}
