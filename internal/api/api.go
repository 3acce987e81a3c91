// Package api maps the users' part of the HTTP contract (shared/API.md)
// that the api function serves onto the domain: health, account
// connection, jobs, webhooks and the dashboard. It registers those routes
// on an httpapi.Router, decodes requests, calls the services and renders
// their answers and errors. The other route groups have packages (and
// functions) of their own, by resources.HTTPRoutes: adminapi, uploadsapi,
// schedulesapi; so the api function creates neither an S3 client for
// uploads nor an EventBridge Scheduler client, and links no Scheduler.
package api

import (
	"context"
	"errors"
	"net/http"

	"github.com/conveyor/conveyor/internal/accounts"
	"github.com/conveyor/conveyor/internal/httpapi"
	"github.com/conveyor/conveyor/internal/invalid"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/jobs"
	"github.com/conveyor/conveyor/internal/kind"
	"github.com/conveyor/conveyor/internal/store"
	"github.com/conveyor/conveyor/internal/webhook"
)

// Services are what the routes call.
type Services struct {
	Jobs     *jobs.Service
	Accounts *accounts.Service
	// Keys and Endpoints are the users' webhook secrets and endpoints.
	Keys      *webhook.Keys
	Endpoints *webhook.Endpoints
	// Ready reports whether the dependencies answer (GET /healthz).
	Ready func(context.Context) error
	// Idempotency gives POST /v1/jobs and POST /v1/webhooks the
	// Idempotency-Key semantics (required: its Records).
	Idempotency httpapi.Idempotency
}

// Register adds the api function's routes of the contract to rt: every
// route that resources.FunctionForPath gives the api function (the
// dashboard's are RegisterDashboard's).
func Register(rt *httpapi.Router, s Services) {
	rt.Handle(http.MethodGet, "/healthz", httpapi.Public, s.healthz)
	rt.Handle(http.MethodPut, "/v1/account/connection", httpapi.Writer, s.connectAccount)
	rt.Handle(http.MethodGet, "/v1/account/connection", httpapi.AnyUser, s.getConnection)
	rt.Handle(http.MethodPost, "/v1/jobs", httpapi.Writer, s.Idempotency.Wrap("POST /v1/jobs", s.submitJob))
	rt.Handle(http.MethodGet, "/v1/jobs", httpapi.AnyUser, s.listJobs)
	rt.Handle(http.MethodGet, "/v1/jobs/{id}", httpapi.AnyUser, s.getJob)
	rt.Handle(http.MethodGet, "/v1/jobs/{id}/attempts", httpapi.AnyUser, s.jobAttempts)
	rt.Handle(http.MethodPost, "/v1/jobs/{id}/cancel", httpapi.Writer, s.cancelJob)
	rt.Handle(http.MethodPost, "/v1/jobs/{id}/retry", httpapi.Writer, s.retryJob)
	registerWebhooks(rt, s)
}

func (s Services) healthz(r *httpapi.Request) (httpapi.Response, error) {
	if s.Ready != nil {
		if err := s.Ready(r.Ctx); err != nil {
			return httpapi.JSON(http.StatusServiceUnavailable, map[string]any{"status": "unavailable"}), nil
		}
	}
	return httpapi.JSON(http.StatusOK, map[string]any{"status": "ok"}), nil
}

// clientError renders the services' errors in the contract's terms, in
// one place for every route of this package: input to correct
// (*invalid.FieldError, from any service) → 400 naming the field; unusable
// input → 422; a transition the state does not allow → 409; unknown or
// another user's resource → 404. Any other error passes through and
// becomes a 500 whose detail is only logged.
func clientError(err error) error {
	var (
		unusable   *kind.UnusableError
		transition *job.TransitionError
		hookLimit  *webhook.LimitError
	)
	if fe, ok := invalid.As(err); ok {
		return httpapi.BadRequest(fe.Field, "%s", fe.Error())
	}
	switch {
	case errors.As(err, &unusable):
		return httpapi.Unprocessable(unusable.Code, unusable.Field, unusable.Message)
	case errors.As(err, &hookLimit):
		return httpapi.Unprocessable("webhook_limit", "", hookLimit.Error())
	case errors.As(err, &transition):
		return httpapi.Conflict("invalid_transition", transition.Error())
	case errors.Is(err, store.ErrNotFound), errors.Is(err, webhook.ErrNotFound):
		return httpapi.NotFound()
	case errors.Is(err, store.ErrBadCursor):
		return httpapi.InvalidCursor("the cursor does not continue this list (%v); use the nextCursor of the same query, or start without one", err)
	}
	return err
}

func (s Services) connectAccount(r *httpapi.Request) (httpapi.Response, error) {
	var req accounts.ConnectRequest
	if err := httpapi.Decode(r, &req); err != nil {
		return httpapi.Response{}, err
	}
	if err := s.Accounts.Connect(r.Ctx, r.Claims.Subject, req); err != nil {
		return httpapi.Response{}, clientError(err)
	}
	return httpapi.Response{StatusCode: http.StatusNoContent, Headers: map[string]string{}}, nil
}

// getConnection answers the caller's connection (never a token), 404 when
// the caller has connected none.
func (s Services) getConnection(r *httpapi.Request) (httpapi.Response, error) {
	c, err := s.Accounts.Connection(r.Ctx, r.Claims.Subject)
	if err != nil {
		return httpapi.Response{}, clientError(err)
	}
	return httpapi.JSON(http.StatusOK, c), nil
}

func (s Services) submitJob(r *httpapi.Request) (httpapi.Response, error) {
	var req jobs.SubmitRequest
	if err := httpapi.Decode(r, &req); err != nil {
		return httpapi.Response{}, err
	}
	j, created, err := s.Jobs.Submit(r.Ctx, jobs.Caller{Owner: r.Claims.Subject, Plan: r.Claims.Plan}, req)
	if err != nil {
		return httpapi.Response{}, clientError(err)
	}
	if !created {
		return httpapi.JSON(http.StatusOK, j), nil
	}
	resp := httpapi.JSON(http.StatusCreated, j)
	resp.Headers["Location"] = "/v1/jobs/" + j.ID
	return resp, nil
}

func (s Services) getJob(r *httpapi.Request) (httpapi.Response, error) {
	j, err := s.Jobs.Get(r.Ctx, r.Claims.Subject, r.Params["id"])
	if err != nil {
		return httpapi.Response{}, clientError(err)
	}
	return httpapi.JSON(http.StatusOK, j), nil
}

// jobAttempts answers GET /v1/jobs/{id}/attempts: {"jobId","attempts":[…]}.
func (s Services) jobAttempts(r *httpapi.Request) (httpapi.Response, error) {
	as, err := s.Jobs.Attempts(r.Ctx, r.Claims.Subject, r.Params["id"])
	if err != nil {
		return httpapi.Response{}, clientError(err)
	}
	return httpapi.JSON(http.StatusOK, map[string]any{"jobId": r.Params["id"], "attempts": as}), nil
}

func (s Services) listJobs(r *httpapi.Request) (httpapi.Response, error) {
	v, err := r.Queries("status", "updatedSince", "cursor")
	if err != nil {
		return httpapi.Response{}, err
	}
	q := jobs.ListRequest{Status: v["status"], UpdatedSince: v["updatedSince"], Cursor: v["cursor"]}
	if q.Limit, err = r.OptionalInt("limit"); err != nil {
		return httpapi.Response{}, err
	}
	res, err := s.Jobs.List(r.Ctx, r.Claims.Subject, q)
	if err != nil {
		return httpapi.Response{}, clientError(err)
	}
	return httpapi.JobsPage(res.Jobs, res.NextCursor, res.Total), nil
}

func (s Services) cancelJob(r *httpapi.Request) (httpapi.Response, error) {
	j, err := s.Jobs.Cancel(r.Ctx, r.Claims.Subject, r.Params["id"])
	if err != nil {
		return httpapi.Response{}, clientError(err)
	}
	return httpapi.JSON(http.StatusOK, j), nil
}

func (s Services) retryJob(r *httpapi.Request) (httpapi.Response, error) {
	j, err := s.Jobs.Retry(r.Ctx, r.Claims.Subject, r.Params["id"])
	if err != nil {
		return httpapi.Response{}, clientError(err)
	}
	return httpapi.JSON(http.StatusOK, j), nil
}
