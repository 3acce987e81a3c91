package handler

import (
	"context"

	"github.com/aws/aws-lambda-go/events"

	"github.com/conveyor/conveyor/internal/aws/secretref"
	"github.com/conveyor/conveyor/internal/aws/store"
	"github.com/conveyor/conveyor/internal/config"
	"github.com/conveyor/conveyor/internal/httpapi"
	"github.com/conveyor/conveyor/internal/ratelimit"
)

// HTTPHandler is the handler of a function behind the HTTP API (payload
// v2): api, admin, uploads and schedules (resources.HTTPRoutes). Each
// starts from RouterFor and registers its route group, so every group
// answers alike.
type HTTPHandler = func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error)

// ResolveHTTP, the HTTP functions' cold start, reads no secret: the JWT
// key is read in the background (secretref.JWTKey) and the first request
// that needs it waits.
var ResolveHTTP Resolver = secretref.ExceptJWT

// RouterFor returns a router without routes that verifies tokens with env's
// JWT key (read in the background from now on) and, when configured, with
// env's OIDC issuer (Env.Verifier), and logs with env's logger.
func RouterFor(env Env) *httpapi.Router {
	return routerWith(env, nil)
}

// routerWith is RouterFor with lim, when not nil, admitting each user
// token's request by its owner's rate.
func routerWith(env Env, lim *ratelimit.Limiter) *httpapi.Router {
	var l httpapi.Limiter // nil: no rate (a nil *Limiter is not a nil Limiter)
	if lim != nil {
		l = lim
	}
	return httpapi.NewRouter(httpapi.Options{Verifier: env.Verifier(secretref.JWTKey(env.Config, env.AWS).Get), Logger: env.Log(), Limiter: l})
}

// RateLimiter is the per-owner request rate of the functions that serve
// user tokens (api, uploads, schedules)
// (CONVEYOR_RATE_LIMITS, CONVEYOR_OWNER_RATE_LIMITS; docs/limits.md), its
// buckets in st, shared by every instance.
func RateLimiter(env Env, st *store.Store) (*ratelimit.Limiter, error) {
	limits := func(m map[string]config.Rate) map[string]ratelimit.Limit {
		out := make(map[string]ratelimit.Limit, len(m))
		for k, r := range m {
			out[k] = ratelimit.Limit{Rate: r.PerSecond, Burst: r.Burst}
		}
		return out
	}
	return ratelimit.New(ratelimit.Config{Store: st, PerPlan: limits(env.Config.RateLimits.PerPlan), PerOwner: limits(env.Config.RateLimits.PerOwner),
		Fallback: httpapi.PlanDefault, Now: env.Now, Logger: env.Log()})
}

// IdempotencyFor is the creating routes' Idempotency-Key guard, keeping its
// keys in st for CONVEYOR_IDEMPOTENCY_WINDOW.
func IdempotencyFor(env Env, st *store.Store) httpapi.Idempotency {
	return httpapi.Idempotency{Records: st, Window: env.Config.IdempotencyWindow, Now: env.Now, Logger: env.Log()}
}
