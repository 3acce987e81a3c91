package api

import (
	"net/http"

	"github.com/conveyor/conveyor/internal/httpapi"
	"github.com/conveyor/conveyor/internal/jobs"
	"github.com/conveyor/conveyor/internal/schedule"
)

// registerSchedules adds the recurring schedules' routes.
func registerSchedules(rt *httpapi.Router, svc *schedule.Service) {
	h := scheduleRoutes{svc}
	rt.Handle(http.MethodPost, "/v1/schedules", httpapi.Writer, h.create)
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
