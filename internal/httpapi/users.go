package httpapi

import (
	"context"
	"net/http"

	"github.com/conveyor/conveyor/internal/accounts"
	"github.com/conveyor/conveyor/internal/submission"
	"github.com/conveyor/conveyor/internal/webhook"
)

// UserServices are what the users' routes call.
type UserServices struct {
	Jobs     *submission.Service
	Accounts *accounts.Service
	// Keys and Endpoints are the users' webhook secrets and endpoints.
	Keys      *webhook.Keys
	Endpoints *webhook.Endpoints
	// Redeliveries make an endpoint's deliveries again on request.
	Redeliveries *webhook.Redeliveries
	// Ready reports whether the dependencies answer (GET /healthz).
	Ready func(context.Context) error
	// Idempotency gives POST /v1/jobs and POST /v1/webhooks the
	// Idempotency-Key semantics (required: its Records).
	Idempotency Idempotency
}

// RegisterUsers adds the users' routes of the contract to rt: health,
// account connection, jobs and webhooks — every route that
// resources.FunctionForPath gives the api function (the dashboard's are
// RegisterDashboard's).
func RegisterUsers(rt *Router, s UserServices) {
	rt.Handle(http.MethodGet, "/healthz", Public, s.healthz)
	rt.Handle(http.MethodPut, "/v1/account/connection", Writer, s.connectAccount)
	rt.Handle(http.MethodGet, "/v1/account/connection", AnyUser, s.getConnection)
	rt.Handle(http.MethodPost, "/v1/jobs", Writer, s.Idempotency.Wrap("POST /v1/jobs", s.submitJob))
	rt.Handle(http.MethodGet, "/v1/jobs", AnyUser, s.listJobs)
	rt.Handle(http.MethodGet, "/v1/jobs/{id}", AnyUser, s.getJob)
	rt.Handle(http.MethodGet, "/v1/jobs/{id}/attempts", AnyUser, s.jobAttempts)
	rt.Handle(http.MethodPost, "/v1/jobs/{id}/cancel", Writer, s.cancelJob)
	rt.Handle(http.MethodPost, "/v1/jobs/{id}/retry", Writer, s.retryJob)
	registerWebhooks(rt, s)
}

func (s UserServices) healthz(r *Request) (Response, error) {
	if s.Ready != nil {
		if err := s.Ready(r.Ctx); err != nil {
			return JSON(http.StatusServiceUnavailable, map[string]any{"status": "unavailable"}), nil
		}
	}
	return JSON(http.StatusOK, map[string]any{"status": "ok"}), nil
}

func (s UserServices) connectAccount(r *Request) (Response, error) {
	var req accounts.ConnectRequest
	if err := Decode(r, &req); err != nil {
		return Response{}, err
	}
	if err := s.Accounts.Connect(r.Ctx, r.Claims.Subject, req); err != nil {
		return Response{}, clientError(err)
	}
	return Response{StatusCode: http.StatusNoContent, Headers: map[string]string{}}, nil
}

// getConnection answers the caller's connection (never a token), 404 when
// the caller has connected none.
func (s UserServices) getConnection(r *Request) (Response, error) {
	c, err := s.Accounts.Connection(r.Ctx, r.Claims.Subject)
	if err != nil {
		return Response{}, clientError(err)
	}
	return JSON(http.StatusOK, c), nil
}

func (s UserServices) submitJob(r *Request) (Response, error) {
	var req submission.SubmitRequest
	if err := Decode(r, &req); err != nil {
		return Response{}, err
	}
	j, created, err := s.Jobs.Submit(r.Ctx, submission.Caller{Owner: r.Claims.Subject, Plan: r.Claims.Plan}, req)
	if err != nil {
		return Response{}, clientError(err)
	}
	if !created {
		return JSON(http.StatusOK, j), nil
	}
	resp := JSON(http.StatusCreated, j)
	resp.Headers["Location"] = "/v1/jobs/" + j.ID
	return resp, nil
}

func (s UserServices) getJob(r *Request) (Response, error) {
	j, err := s.Jobs.Get(r.Ctx, r.Claims.Subject, r.Params["id"])
	if err != nil {
		return Response{}, clientError(err)
	}
	return JSON(http.StatusOK, j), nil
}

// jobAttempts answers GET /v1/jobs/{id}/attempts: {"jobId","attempts":[…]}.
func (s UserServices) jobAttempts(r *Request) (Response, error) {
	as, err := s.Jobs.Attempts(r.Ctx, r.Claims.Subject, r.Params["id"])
	if err != nil {
		return Response{}, clientError(err)
	}
	return JSON(http.StatusOK, map[string]any{"jobId": r.Params["id"], "attempts": as}), nil
}

func (s UserServices) listJobs(r *Request) (Response, error) {
	v, err := r.Queries("status", "updatedSince", "cursor")
	if err != nil {
		return Response{}, err
	}
	if err := checkCursorShape(v["cursor"]); err != nil {
		return Response{}, err
	}
	q := submission.ListRequest{Status: v["status"], UpdatedSince: v["updatedSince"], Cursor: v["cursor"]}
	if q.Limit, err = r.OptionalInt("limit"); err != nil {
		return Response{}, err
	}
	res, err := s.Jobs.List(r.Ctx, r.Claims.Subject, q)
	if err != nil {
		return Response{}, clientError(err)
	}
	return JobsPage(res.Jobs, res.NextCursor, res.Total), nil
}

func (s UserServices) cancelJob(r *Request) (Response, error) {
	j, err := s.Jobs.Cancel(r.Ctx, r.Claims.Subject, r.Params["id"])
	if err != nil {
		return Response{}, clientError(err)
	}
	return JSON(http.StatusOK, j), nil
}

func (s UserServices) retryJob(r *Request) (Response, error) {
	j, err := s.Jobs.Retry(r.Ctx, r.Claims.Subject, r.Params["id"])
	if err != nil {
		return Response{}, clientError(err)
	}
	return JSON(http.StatusOK, j), nil
}
