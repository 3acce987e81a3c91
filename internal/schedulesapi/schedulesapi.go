// Package schedulesapi is the recurring schedules' routes of the HTTP API
// (API.md, "Recurring schedules"): create, list, read, pause, resume and
// delete, over schedule.Service. The schedules function serves them (API
// Gateway sends it resources.SchedulesPath and every path under it); the
// package is apart from api so that only the schedules function links and
// may call EventBridge Scheduler (and embeds the time zone database).
package schedulesapi

import (
	"errors"
	"net/http"

	"github.com/conveyor/conveyor/internal/httpapi"
	"github.com/conveyor/conveyor/internal/invalid"
	"github.com/conveyor/conveyor/internal/jobs"
	"github.com/conveyor/conveyor/internal/kind"
	"github.com/conveyor/conveyor/internal/schedule"
	"github.com/conveyor/conveyor/internal/store"
)

// Register adds the schedules' routes of the contract to rt: a user or
// admin changes, any role reads; POST /v1/schedules honours an
// Idempotency-Key under idem.
func Register(rt *httpapi.Router, svc *schedule.Service, idem httpapi.Idempotency) {
	h := scheduleRoutes{svc}
	rt.Handle(http.MethodPost, "/v1/schedules", httpapi.Writer, idem.Wrap("POST /v1/schedules", h.create))
	rt.Handle(http.MethodGet, "/v1/schedules", httpapi.AnyUser, h.list)
	rt.Handle(http.MethodGet, "/v1/schedules/{id}", httpapi.AnyUser, h.get)
	rt.Handle(http.MethodPost, "/v1/schedules/{id}/pause", httpapi.Writer, h.pause)
	rt.Handle(http.MethodPost, "/v1/schedules/{id}/resume", httpapi.Writer, h.resume)
	rt.Handle(http.MethodDelete, "/v1/schedules/{id}", httpapi.Writer, h.delete)
}

type scheduleRoutes struct{ svc *schedule.Service }

func (h scheduleRoutes) create(r *httpapi.Request) (httpapi.Response, error) {
	var req schedule.Request
	if err := httpapi.Decode(r, &req); err != nil {
		return httpapi.Response{}, err
	}
	sc, err := h.svc.Create(r.Ctx, jobs.Caller{Owner: r.Claims.Subject, Plan: r.Claims.Plan}, req)
	if err != nil {
		return httpapi.Response{}, clientError(err)
	}
	resp := httpapi.JSON(http.StatusCreated, sc)
	resp.Headers["Location"] = "/v1/schedules/" + sc.ID
	return resp, nil
}

func (h scheduleRoutes) list(r *httpapi.Request) (httpapi.Response, error) {
	list, err := h.svc.List(r.Ctx, r.Claims.Subject)
	if err != nil {
		return httpapi.Response{}, clientError(err)
	}
	return httpapi.JSON(http.StatusOK, map[string]any{"schedules": list}), nil
}

func (h scheduleRoutes) get(r *httpapi.Request) (httpapi.Response, error) {
	sc, err := h.svc.Get(r.Ctx, r.Claims.Subject, r.Params["id"])
	if err != nil {
		return httpapi.Response{}, clientError(err)
	}
	return httpapi.JSON(http.StatusOK, sc), nil
}

func (h scheduleRoutes) pause(r *httpapi.Request) (httpapi.Response, error) {
	sc, err := h.svc.Pause(r.Ctx, r.Claims.Subject, r.Params["id"])
	if err != nil {
		return httpapi.Response{}, clientError(err)
	}
	return httpapi.JSON(http.StatusOK, sc), nil
}

func (h scheduleRoutes) resume(r *httpapi.Request) (httpapi.Response, error) {
	sc, err := h.svc.Resume(r.Ctx, r.Claims.Subject, r.Params["id"])
	if err != nil {
		return httpapi.Response{}, clientError(err)
	}
	return httpapi.JSON(http.StatusOK, sc), nil
}

func (h scheduleRoutes) delete(r *httpapi.Request) (httpapi.Response, error) {
	if err := h.svc.Delete(r.Ctx, r.Claims.Subject, r.Params["id"]); err != nil {
		return httpapi.Response{}, clientError(err)
	}
	return httpapi.NoContent(), nil
}

// clientError renders the schedules service's errors in the contract's
// terms: input to correct (the schedule's or its job template's) → 400
// naming the field; a template that is well-formed but unusable, or a
// user at the limit → 422; an unknown or another user's schedule → 404;
// Scheduler out of capacity → 503. Any other error passes through and
// becomes a 500 whose detail is only logged.
func clientError(err error) error {
	var (
		unusable    *kind.UnusableError
		limit       *schedule.LimitError
		unavailable *schedule.UnavailableError
	)
	if fe, ok := invalid.As(err); ok {
		return httpapi.BadRequest(fe.Field, "%s", fe.Error())
	}
	switch {
	case errors.As(err, &unusable):
		return httpapi.Unprocessable(unusable.Code, unusable.Field, unusable.Message)
	case errors.As(err, &limit):
		return httpapi.Unprocessable("schedule_limit", "", limit.Error())
	case errors.Is(err, schedule.ErrNotFound), errors.Is(err, store.ErrNotFound):
		return httpapi.NotFound()
	case errors.As(err, &unavailable):
		return httpapi.Errorf(http.StatusServiceUnavailable, "scheduler_unavailable", "the scheduler cannot take this schedule now (its quota or rate limit); try again later")
	}
	return err
}
