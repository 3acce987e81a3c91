package httpapi

import (
	"net/http"

	"github.com/conveyor/conveyor/internal/schedule"
	"github.com/conveyor/conveyor/internal/submission"
)

// RegisterSchedules adds the recurring schedules' routes of the contract
// (API.md, "Recurring schedules": create, list, read, pause, resume,
// delete) to rt, over schedule.Service, for the schedules function
// (resources.SchedulesPath and every path under it): a user or admin
// changes, any role reads; POST /v1/schedules honours an Idempotency-Key
// under idem.
func RegisterSchedules(rt *Router, svc *schedule.Service, idem Idempotency) {
	h := scheduleRoutes{svc}
	rt.Handle(http.MethodPost, "/v1/schedules", Writer, idem.Wrap("POST /v1/schedules", h.create))
	rt.Handle(http.MethodGet, "/v1/schedules", AnyUser, h.list)
	rt.Handle(http.MethodGet, "/v1/schedules/{id}", AnyUser, h.get)
	rt.Handle(http.MethodPost, "/v1/schedules/{id}/pause", Writer, h.pause)
	rt.Handle(http.MethodPost, "/v1/schedules/{id}/resume", Writer, h.resume)
	rt.Handle(http.MethodDelete, "/v1/schedules/{id}", Writer, h.delete)
}

type scheduleRoutes struct{ svc *schedule.Service }

func (h scheduleRoutes) create(r *Request) (Response, error) {
	var req schedule.Request
	if err := Decode(r, &req); err != nil {
		return Response{}, err
	}
	sc, err := h.svc.Create(r.Ctx, submission.Caller{Owner: r.Claims.Subject, Plan: r.Claims.Plan}, req)
	if err != nil {
		return Response{}, clientError(err)
	}
	resp := JSON(http.StatusCreated, sc)
	resp.Headers["Location"] = "/v1/schedules/" + sc.ID
	return resp, nil
}

func (h scheduleRoutes) list(r *Request) (Response, error) {
	list, err := h.svc.List(r.Ctx, r.Claims.Subject)
	if err != nil {
		return Response{}, clientError(err)
	}
	return JSON(http.StatusOK, map[string]any{"schedules": list}), nil
}

func (h scheduleRoutes) get(r *Request) (Response, error) {
	sc, err := h.svc.Get(r.Ctx, r.Claims.Subject, r.Params["id"])
	if err != nil {
		return Response{}, clientError(err)
	}
	return JSON(http.StatusOK, sc), nil
}

func (h scheduleRoutes) pause(r *Request) (Response, error) {
	sc, err := h.svc.Pause(r.Ctx, r.Claims.Subject, r.Params["id"])
	if err != nil {
		return Response{}, clientError(err)
	}
	return JSON(http.StatusOK, sc), nil
}

func (h scheduleRoutes) resume(r *Request) (Response, error) {
	sc, err := h.svc.Resume(r.Ctx, r.Claims.Subject, r.Params["id"])
	if err != nil {
		return Response{}, clientError(err)
	}
	return JSON(http.StatusOK, sc), nil
}

func (h scheduleRoutes) delete(r *Request) (Response, error) {
	if err := h.svc.Delete(r.Ctx, r.Claims.Subject, r.Params["id"]); err != nil {
		return Response{}, clientError(err)
	}
	return NoContent(), nil
}
