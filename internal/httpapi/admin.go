package httpapi

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/conveyor/conveyor/internal/admin"
)

// RegisterAdmin adds the admin routes of the contract (API.md, "Admin":
// the operators' overview, inspector, restarts and stops, DLQ peek and
// redrive, tier pause and resume, breakers and stats) to rt, over
// admin.Service, for the admin function (every path under
// resources.AdminPathPrefix): the role service may read (overview, DLQ
// peek, breakers, stats), the role admin may do everything, a user gets
// 403.
func RegisterAdmin(rt *Router, svc *admin.Service) {
	a := adminRoutes{svc: svc}
	rt.Handle(http.MethodGet, "/v1/admin/overview", ReadOnly, a.overview)
	rt.Handle(http.MethodPost, "/v1/admin/jobs/restart", AdminOnly, a.restartJobs)
	rt.Handle(http.MethodPost, "/v1/admin/jobs/stop", AdminOnly, a.stopJobs)
	rt.Handle(http.MethodPost, "/v1/admin/jobs/{id}/items/{itemId}/restart", AdminOnly, a.restartItem)
	rt.Handle(http.MethodGet, "/v1/admin/dlq/{tier}", ReadOnly, a.peekDLQ)
	rt.Handle(http.MethodPost, "/v1/admin/dlq/{tier}/redrive", AdminOnly, a.redriveDLQ)
	rt.Handle(http.MethodPost, "/v1/admin/tiers/{tier}/pause", AdminOnly, a.pauseTier)
	rt.Handle(http.MethodPost, "/v1/admin/tiers/{tier}/resume", AdminOnly, a.resumeTier)
	rt.Handle(http.MethodGet, "/v1/admin/breakers", ReadOnly, a.breakers)
	rt.Handle(http.MethodPost, "/v1/admin/breakers/{key}/reset", AdminOnly, a.resetBreaker)
	rt.Handle(http.MethodGet, "/v1/admin/stats", ReadOnly, a.stats)
	// The inspector: any user's jobs, read-only.
	rt.Handle(http.MethodGet, "/v1/admin/jobs", ReadOnly, a.searchJobs)
	rt.Handle(http.MethodGet, "/v1/admin/jobs/{id}", ReadOnly, a.inspectJob)
	rt.Handle(http.MethodGet, "/v1/admin/orphans", ReadOnly, a.orphans)
	// Bulk actions by filter that run in the background.
	rt.Handle(http.MethodGet, "/v1/admin/operations/{id}", ReadOnly, a.operation)
}

type adminRoutes struct{ svc *admin.Service }

// bulkBody is the body of the bulk calls: jobIds, or a filter served from
// the inspector's indexes (with an optional limit per call and dryRun).
// A member given null is absent.
type bulkBody struct {
	JobIDs []string      `json:"-"`
	Filter *admin.Filter `json:"filter"`
	Limit  *int          `json:"limit"`
	DryRun *bool         `json:"dryRun"`
	// IDs is jobIds as sent: a null member is refused, not read as "".
	IDs []*string `json:"jobIds"`
}

func decodeBulk(r *Request) (bulkBody, error) {
	var body bulkBody
	if err := Decode(r, &body); err != nil {
		return body, err
	}
	if body.IDs != nil {
		body.JobIDs = make([]string, len(body.IDs))
		for i, id := range body.IDs {
			if id == nil {
				return body, BadRequest(fmt.Sprintf("jobIds[%d]", i), "jobIds[%d] must be a job id, not null", i)
			}
			body.JobIDs[i] = *id
		}
	}
	switch {
	case body.JobIDs == nil && body.Filter == nil:
		return body, BadRequest("jobIds", "jobIds or filter is required")
	case body.JobIDs != nil && body.Filter != nil:
		return body, BadRequest("filter", "give jobIds or filter, not both")
	case body.JobIDs != nil && (body.Limit != nil || body.DryRun != nil):
		return body, BadRequest("jobIds", "limit and dryRun go with a filter, not with jobIds")
	}
	return body, nil
}

func (a adminRoutes) overview(r *Request) (Response, error) {
	ov, err := a.svc.Overview(r.Ctx)
	if err != nil {
		return Response{}, clientError(err)
	}
	return JSON(http.StatusOK, ov), nil
}

func (a adminRoutes) restartJobs(r *Request) (Response, error) {
	body, err := decodeBulk(r)
	if err != nil {
		return Response{}, err
	}
	var res admin.Restarted
	if body.Filter != nil {
		var op *admin.Operation
		res, op, err = a.svc.RestartMatching(r.Ctx, *body.Filter, body.Limit, body.DryRun != nil && *body.DryRun, r.Claims.Subject)
		if err == nil && op != nil {
			return accepted(*op), nil
		}
	} else {
		res, err = a.svc.RestartJobs(r.Ctx, body.JobIDs, r.Claims.Subject)
	}
	if err != nil {
		return Response{}, clientError(err)
	}
	return JSON(http.StatusOK, res), nil
}

func (a adminRoutes) stopJobs(r *Request) (Response, error) {
	body, err := decodeBulk(r)
	if err != nil {
		return Response{}, err
	}
	var res admin.Stopped
	if body.Filter != nil {
		var op *admin.Operation
		res, op, err = a.svc.StopMatching(r.Ctx, *body.Filter, body.Limit, body.DryRun != nil && *body.DryRun, r.Claims.Subject)
		if err == nil && op != nil {
			return accepted(*op), nil
		}
	} else {
		res, err = a.svc.StopJobs(r.Ctx, body.JobIDs, r.Claims.Subject)
	}
	if err != nil {
		return Response{}, clientError(err)
	}
	return JSON(http.StatusOK, res), nil
}

// accepted is the answer of a bulk call by filter that started an
// operation: 202, the operation, and where to follow it.
func accepted(op admin.Operation) Response {
	resp := JSON(http.StatusAccepted, op)
	resp.Headers["Location"] = op.Location()
	return resp
}

func (a adminRoutes) operation(r *Request) (Response, error) {
	op, err := a.svc.GetOperation(r.Ctx, r.Params["id"])
	if err != nil {
		return Response{}, clientError(err)
	}
	return JSON(http.StatusOK, op), nil
}

func (a adminRoutes) restartItem(r *Request) (Response, error) {
	j, err := a.svc.RestartItem(r.Ctx, r.Params["id"], r.Params["itemId"], r.Claims.Subject)
	if err != nil {
		return Response{}, clientError(err)
	}
	return JSON(http.StatusOK, j), nil
}

func (a adminRoutes) peekDLQ(r *Request) (Response, error) {
	limit, err := r.IntQuery("limit", admin.PeekDefault)
	if err != nil {
		return Response{}, err
	}
	msgs, err := a.svc.DLQPeek(r.Ctx, r.Params["tier"], limit)
	if err != nil {
		return Response{}, clientError(err)
	}
	return JSON(http.StatusOK, map[string]any{"messages": msgs}), nil
}

// redriveBody is the optional body of a redrive: without jobIds every
// message moves; max bounds how many move in this call.
type redriveBody struct {
	JobIDs *[]string `json:"jobIds"`
	Max    int       `json:"max"`
}

func (a adminRoutes) redriveDLQ(r *Request) (Response, error) {
	var body redriveBody
	if strings.TrimSpace(r.Raw.Body) != "" {
		if err := Decode(r, &body); err != nil {
			return Response{}, err
		}
	}
	var ids []string // nil: every message
	if body.JobIDs != nil {
		ids = append([]string{}, *body.JobIDs...) // present: 1 to admin.MaxBulk ids
	}
	res, err := a.svc.DLQRedrive(r.Ctx, r.Params["tier"], ids, body.Max, r.Claims.Subject)
	if err != nil {
		return Response{}, clientError(err)
	}
	return JSON(http.StatusAccepted, res), nil
}

func (a adminRoutes) pauseTier(r *Request) (Response, error) {
	st, err := a.svc.PauseTier(r.Ctx, r.Params["tier"], r.Claims.Subject)
	if err != nil {
		return Response{}, clientError(err)
	}
	return JSON(http.StatusOK, st), nil
}

func (a adminRoutes) resumeTier(r *Request) (Response, error) {
	st, err := a.svc.ResumeTier(r.Ctx, r.Params["tier"], r.Claims.Subject)
	if err != nil {
		return Response{}, clientError(err)
	}
	return JSON(http.StatusOK, st), nil
}

func (a adminRoutes) breakers(r *Request) (Response, error) {
	bs, err := a.svc.Breakers(r.Ctx)
	if err != nil {
		return Response{}, clientError(err)
	}
	return JSON(http.StatusOK, map[string]any{"breakers": bs}), nil
}

func (a adminRoutes) resetBreaker(r *Request) (Response, error) {
	key := r.Params["key"]
	if err := a.svc.ResetBreaker(r.Ctx, key, r.Claims.Subject); err != nil {
		return Response{}, clientError(err)
	}
	return JSON(http.StatusOK, map[string]any{"key": key, "state": "closed"}), nil
}

func (a adminRoutes) stats(r *Request) (Response, error) {
	hours, err := r.IntQuery("hours", admin.StatsHoursDefault)
	if err != nil {
		return Response{}, err
	}
	st, err := a.svc.Stats(r.Ctx, hours)
	if err != nil {
		return Response{}, clientError(err)
	}
	return JSON(http.StatusOK, st), nil
}

func (a adminRoutes) searchJobs(r *Request) (Response, error) {
	v, err := r.Queries("status", "tier", "owner", "type", "errorCode", "createdFrom", "createdTo", "cursor")
	if err != nil {
		return Response{}, err
	}
	if err := checkCursorShape(v["cursor"]); err != nil {
		return Response{}, err
	}
	q := admin.SearchRequest{
		Status: v["status"], Tier: v["tier"], Owner: v["owner"], Type: v["type"],
		ErrorCode: v["errorCode"], CreatedFrom: v["createdFrom"], CreatedTo: v["createdTo"],
		Cursor: v["cursor"],
	}
	if q.Limit, err = r.OptionalInt("limit"); err != nil {
		return Response{}, err
	}
	res, err := a.svc.Search(r.Ctx, q)
	if err != nil {
		return Response{}, clientError(err)
	}
	return JobsPage(res.Jobs, res.NextCursor, res.Total), nil
}

func (a adminRoutes) inspectJob(r *Request) (Response, error) {
	j, err := a.svc.InspectJob(r.Ctx, r.Params["id"])
	if err != nil {
		return Response{}, clientError(err)
	}
	return JSON(http.StatusOK, j), nil
}

func (a adminRoutes) orphans(r *Request) (Response, error) {
	os, err := a.svc.Orphans(r.Ctx)
	if err != nil {
		return Response{}, clientError(err)
	}
	return JSON(http.StatusOK, map[string]any{"orphans": os}), nil
}
