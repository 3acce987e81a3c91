// Package adminapi is the admin routes of the HTTP API (API.md, "Admin"):
// the operators' overview, inspector, restarts and stops, DLQ peek and
// redrive, tier pause and resume, breakers and stats, over admin.Service.
// The admin function serves them (API Gateway sends it every path under
// resources.AdminPathPrefix); the package is apart from api so that the
// admin function links none of the users' services (uploads, schedules,
// webhooks) and the api function none of the operators'.
package adminapi

import (
	"errors"
	"net/http"
	"strings"

	"github.com/conveyor/conveyor/internal/admin"
	"github.com/conveyor/conveyor/internal/httpapi"
	"github.com/conveyor/conveyor/internal/invalid"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/store"
)

// Register adds the admin routes of the contract (API.md, "Admin") to rt:
// the role service may read (overview, DLQ peek, breakers, stats), the
// role admin may do everything, a user gets 403.
func Register(rt *httpapi.Router, svc *admin.Service) {
	a := adminRoutes{svc: svc}
	rt.Handle(http.MethodGet, "/v1/admin/overview", httpapi.ReadOnly, a.overview)
	rt.Handle(http.MethodPost, "/v1/admin/jobs/restart", httpapi.AdminOnly, a.restartJobs)
	rt.Handle(http.MethodPost, "/v1/admin/jobs/stop", httpapi.AdminOnly, a.stopJobs)
	rt.Handle(http.MethodPost, "/v1/admin/jobs/{id}/items/{itemId}/restart", httpapi.AdminOnly, a.restartItem)
	rt.Handle(http.MethodGet, "/v1/admin/dlq/{tier}", httpapi.ReadOnly, a.peekDLQ)
	rt.Handle(http.MethodPost, "/v1/admin/dlq/{tier}/redrive", httpapi.AdminOnly, a.redriveDLQ)
	rt.Handle(http.MethodPost, "/v1/admin/tiers/{tier}/pause", httpapi.AdminOnly, a.pauseTier)
	rt.Handle(http.MethodPost, "/v1/admin/tiers/{tier}/resume", httpapi.AdminOnly, a.resumeTier)
	rt.Handle(http.MethodGet, "/v1/admin/breakers", httpapi.ReadOnly, a.breakers)
	rt.Handle(http.MethodPost, "/v1/admin/breakers/{key}/reset", httpapi.AdminOnly, a.resetBreaker)
	rt.Handle(http.MethodGet, "/v1/admin/stats", httpapi.ReadOnly, a.stats)
	// The inspector: any user's jobs, read-only.
	rt.Handle(http.MethodGet, "/v1/admin/jobs", httpapi.ReadOnly, a.searchJobs)
	rt.Handle(http.MethodGet, "/v1/admin/jobs/{id}", httpapi.ReadOnly, a.inspectJob)
	rt.Handle(http.MethodGet, "/v1/admin/orphans", httpapi.ReadOnly, a.orphans)
}

type adminRoutes struct{ svc *admin.Service }

// bulkBody is the body of the bulk calls: jobIds, or a filter served from
// the inspector's indexes (with an optional limit per call and dryRun).
// A member given null is absent.
type bulkBody struct {
	JobIDs []string      `json:"jobIds"`
	Filter *admin.Filter `json:"filter"`
	Limit  *int          `json:"limit"`
	DryRun *bool         `json:"dryRun"`
}

func decodeBulk(r *httpapi.Request) (bulkBody, error) {
	var body bulkBody
	if err := httpapi.Decode(r, &body); err != nil {
		return body, err
	}
	switch {
	case body.JobIDs == nil && body.Filter == nil:
		return body, httpapi.BadRequest("jobIds", "jobIds or filter is required")
	case body.JobIDs != nil && body.Filter != nil:
		return body, httpapi.BadRequest("filter", "give jobIds or filter, not both")
	case body.JobIDs != nil && (body.Limit != nil || body.DryRun != nil):
		return body, httpapi.BadRequest("jobIds", "limit and dryRun go with a filter, not with jobIds")
	}
	return body, nil
}

func (a adminRoutes) overview(r *httpapi.Request) (httpapi.Response, error) {
	ov, err := a.svc.Overview(r.Ctx)
	if err != nil {
		return httpapi.Response{}, clientError(err)
	}
	return httpapi.JSON(http.StatusOK, ov), nil
}

func (a adminRoutes) restartJobs(r *httpapi.Request) (httpapi.Response, error) {
	body, err := decodeBulk(r)
	if err != nil {
		return httpapi.Response{}, err
	}
	var res admin.Restarted
	if body.Filter != nil {
		res, err = a.svc.RestartMatching(r.Ctx, *body.Filter, body.Limit, body.DryRun != nil && *body.DryRun, r.Claims.Subject)
	} else {
		res, err = a.svc.RestartJobs(r.Ctx, body.JobIDs, r.Claims.Subject)
	}
	if err != nil {
		return httpapi.Response{}, clientError(err)
	}
	return httpapi.JSON(http.StatusOK, res), nil
}

func (a adminRoutes) stopJobs(r *httpapi.Request) (httpapi.Response, error) {
	body, err := decodeBulk(r)
	if err != nil {
		return httpapi.Response{}, err
	}
	var res admin.Stopped
	if body.Filter != nil {
		res, err = a.svc.StopMatching(r.Ctx, *body.Filter, body.Limit, body.DryRun != nil && *body.DryRun, r.Claims.Subject)
	} else {
		res, err = a.svc.StopJobs(r.Ctx, body.JobIDs, r.Claims.Subject)
	}
	if err != nil {
		return httpapi.Response{}, clientError(err)
	}
	return httpapi.JSON(http.StatusOK, res), nil
}

func (a adminRoutes) restartItem(r *httpapi.Request) (httpapi.Response, error) {
	j, err := a.svc.RestartItem(r.Ctx, r.Params["id"], r.Params["itemId"], r.Claims.Subject)
	if err != nil {
		return httpapi.Response{}, clientError(err)
	}
	return httpapi.JSON(http.StatusOK, j), nil
}

func (a adminRoutes) peekDLQ(r *httpapi.Request) (httpapi.Response, error) {
	limit, err := r.IntQuery("limit", admin.PeekDefault)
	if err != nil {
		return httpapi.Response{}, err
	}
	msgs, err := a.svc.DLQPeek(r.Ctx, r.Params["tier"], limit)
	if err != nil {
		return httpapi.Response{}, clientError(err)
	}
	return httpapi.JSON(http.StatusOK, map[string]any{"messages": msgs}), nil
}

// redriveBody is the optional body of a redrive: without jobIds every
// message moves; max bounds how many move in this call.
type redriveBody struct {
	JobIDs *[]string `json:"jobIds"`
	Max    int       `json:"max"`
}

func (a adminRoutes) redriveDLQ(r *httpapi.Request) (httpapi.Response, error) {
	var body redriveBody
	if strings.TrimSpace(r.Raw.Body) != "" {
		if err := httpapi.Decode(r, &body); err != nil {
			return httpapi.Response{}, err
		}
	}
	var ids []string // nil: every message
	if body.JobIDs != nil {
		ids = append([]string{}, *body.JobIDs...) // present: 1 to admin.MaxBulk ids
	}
	res, err := a.svc.DLQRedrive(r.Ctx, r.Params["tier"], ids, body.Max, r.Claims.Subject)
	if err != nil {
		return httpapi.Response{}, clientError(err)
	}
	return httpapi.JSON(http.StatusAccepted, res), nil
}

func (a adminRoutes) pauseTier(r *httpapi.Request) (httpapi.Response, error) {
	st, err := a.svc.PauseTier(r.Ctx, r.Params["tier"], r.Claims.Subject)
	if err != nil {
		return httpapi.Response{}, clientError(err)
	}
	return httpapi.JSON(http.StatusOK, st), nil
}

func (a adminRoutes) resumeTier(r *httpapi.Request) (httpapi.Response, error) {
	st, err := a.svc.ResumeTier(r.Ctx, r.Params["tier"], r.Claims.Subject)
	if err != nil {
		return httpapi.Response{}, clientError(err)
	}
	return httpapi.JSON(http.StatusOK, st), nil
}

func (a adminRoutes) breakers(r *httpapi.Request) (httpapi.Response, error) {
	bs, err := a.svc.Breakers(r.Ctx)
	if err != nil {
		return httpapi.Response{}, clientError(err)
	}
	return httpapi.JSON(http.StatusOK, map[string]any{"breakers": bs}), nil
}

func (a adminRoutes) resetBreaker(r *httpapi.Request) (httpapi.Response, error) {
	key := r.Params["key"]
	if err := a.svc.ResetBreaker(r.Ctx, key, r.Claims.Subject); err != nil {
		return httpapi.Response{}, clientError(err)
	}
	return httpapi.JSON(http.StatusOK, map[string]any{"key": key, "state": "closed"}), nil
}

func (a adminRoutes) stats(r *httpapi.Request) (httpapi.Response, error) {
	hours, err := r.IntQuery("hours", admin.StatsHoursDefault)
	if err != nil {
		return httpapi.Response{}, err
	}
	st, err := a.svc.Stats(r.Ctx, hours)
	if err != nil {
		return httpapi.Response{}, clientError(err)
	}
	return httpapi.JSON(http.StatusOK, st), nil
}

func (a adminRoutes) searchJobs(r *httpapi.Request) (httpapi.Response, error) {
	v, err := r.Queries("status", "tier", "owner", "type", "errorCode", "createdFrom", "createdTo", "cursor")
	if err != nil {
		return httpapi.Response{}, err
	}
	q := admin.SearchRequest{
		Status: v["status"], Tier: v["tier"], Owner: v["owner"], Type: v["type"],
		ErrorCode: v["errorCode"], CreatedFrom: v["createdFrom"], CreatedTo: v["createdTo"],
		Cursor: v["cursor"],
	}
	if q.Limit, err = r.OptionalInt("limit"); err != nil {
		return httpapi.Response{}, err
	}
	res, err := a.svc.Search(r.Ctx, q)
	if err != nil {
		return httpapi.Response{}, clientError(err)
	}
	return httpapi.JobsPage(res.Jobs, res.NextCursor, res.Total), nil
}

func (a adminRoutes) inspectJob(r *httpapi.Request) (httpapi.Response, error) {
	j, err := a.svc.InspectJob(r.Ctx, r.Params["id"])
	if err != nil {
		return httpapi.Response{}, clientError(err)
	}
	return httpapi.JSON(http.StatusOK, j), nil
}

func (a adminRoutes) orphans(r *httpapi.Request) (httpapi.Response, error) {
	os, err := a.svc.Orphans(r.Ctx)
	if err != nil {
		return httpapi.Response{}, clientError(err)
	}
	return httpapi.JSON(http.StatusOK, map[string]any{"orphans": os}), nil
}

// clientError maps what the admin service refuses to its 4xx answer (the
// same codes the api function gives for the same errors); anything else
// stays an error, a 500 without its message.
func clientError(err error) error {
	var (
		transition *job.TransitionError
		conflict   *admin.ConflictError
	)
	if fe, ok := invalid.As(err); ok {
		return httpapi.BadRequest(fe.Field, "%s", fe.Error())
	}
	switch {
	case errors.As(err, &transition):
		return httpapi.Conflict("invalid_transition", transition.Error())
	case errors.As(err, &conflict):
		return httpapi.Conflict(conflict.Code, conflict.Message)
	case errors.Is(err, admin.ErrUnknownBreaker):
		return httpapi.Errorf(http.StatusNotFound, httpapi.CodeNotFound, "no breaker has this key (GET /v1/admin/breakers lists them)")
	case errors.Is(err, admin.ErrUnknownTier):
		return httpapi.Errorf(http.StatusNotFound, "unknown_tier", "no such tier (want one of high, medium, low, system)")
	case errors.Is(err, store.ErrNotFound):
		return httpapi.NotFound()
	case errors.Is(err, store.ErrBadCursor):
		return httpapi.InvalidCursor("the cursor does not continue this list (%v); use the nextCursor of the same query, or start without one", err)
	}
	return err
}
