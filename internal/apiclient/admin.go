package apiclient

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/conveyor/conveyor/internal/admin"
	"github.com/conveyor/conveyor/internal/job"
)

// Overview calls GET /v1/admin/overview.
func (c *Client) Overview(ctx context.Context) (admin.Overview, error) {
	var ov admin.Overview
	_, err := c.call(ctx, http.MethodGet, "/v1/admin/overview", nil, &ov)
	return ov, err
}

// jobIDs is the body of the bulk calls.
type jobIDs struct {
	JobIDs []string `json:"jobIds"`
}

// RestartJobs calls POST /v1/admin/jobs/restart (at most admin.MaxBulk ids).
func (c *Client) RestartJobs(ctx context.Context, ids []string) (admin.Restarted, error) {
	var r admin.Restarted
	_, err := c.call(ctx, http.MethodPost, "/v1/admin/jobs/restart", jobIDs{nonNil(ids)}, &r)
	return r, err
}

// StopJobs calls POST /v1/admin/jobs/stop (at most admin.MaxBulk ids).
func (c *Client) StopJobs(ctx context.Context, ids []string) (admin.Stopped, error) {
	var r admin.Stopped
	_, err := c.call(ctx, http.MethodPost, "/v1/admin/jobs/stop", jobIDs{nonNil(ids)}, &r)
	return r, err
}

// BulkFilter is a bulk call by filter (docs/operations.md, "Bulk actions
// by filter"): the jobs Filter selects, at most Limit in the request, or
// with Limit nil every match (in the request when they are few, else as an
// operation the API starts); DryRun changes nothing.
type BulkFilter struct {
	Filter admin.Filter `json:"filter"`
	Limit  *int         `json:"limit,omitempty"`
	DryRun bool         `json:"dryRun,omitempty"`
}

// RestartMatching calls POST /v1/admin/jobs/restart with a filter; the
// answer's Selection says what matched and what the call took. A filter
// without Limit that matches more jobs than the API acts on inside a
// request (CONVEYOR_BULK_SYNC_MAX) restarts none itself: the API answers
// 202 with an operation that restarts them in the background, returned
// instead (non-nil; follow it with WaitOperation).
func (c *Client) RestartMatching(ctx context.Context, f BulkFilter) (admin.Restarted, *admin.Operation, error) {
	var r admin.Restarted
	op, err := c.bulkMatching(ctx, "/v1/admin/jobs/restart", f, &r)
	return r, op, err
}

// StopMatching calls POST /v1/admin/jobs/stop with a filter; a large
// match starts an operation, as for RestartMatching.
func (c *Client) StopMatching(ctx context.Context, f BulkFilter) (admin.Stopped, *admin.Operation, error) {
	var r admin.Stopped
	op, err := c.bulkMatching(ctx, "/v1/admin/jobs/stop", f, &r)
	return r, op, err
}

// bulkMatching sends a bulk call by filter and decodes a 200 into out, or
// a 202 into the operation it returns.
func (c *Client) bulkMatching(ctx context.Context, path string, f BulkFilter, out any) (*admin.Operation, error) {
	r, err := c.do(ctx, c.base, http.MethodPost, path, f, nil)
	if err != nil {
		return nil, err
	}
	if err := r.Err(); err != nil {
		return nil, err
	}
	if r.Status == http.StatusAccepted {
		var op admin.Operation
		if err := decode(http.MethodPost, path, r.Body, &op); err != nil {
			return nil, err
		}
		return &op, nil
	}
	return nil, decode(http.MethodPost, path, r.Body, out)
}

// GetOperation calls GET /v1/admin/operations/{id}: a bulk operation's
// status and progress.
func (c *Client) GetOperation(ctx context.Context, id string) (admin.Operation, error) {
	var op admin.Operation
	_, err := c.call(ctx, http.MethodGet, "/v1/admin/operations/"+url.PathEscape(id), nil, &op)
	return op, err
}

// OperationPollDefault is how often WaitOperation reads the operation
// when every is zero.
const OperationPollDefault = time.Second

// WaitOperationFailures is how many reads in a row WaitOperation lets fail
// (each one that may pass) before it gives up with the last error.
const WaitOperationFailures = 5

// WaitOperation reads operation id every every (0: OperationPollDefault)
// until it has finished, and returns it as it finished (succeeded or
// failed: see its Status and Error). progress, when not nil, is told each
// read that differs from the one before, the first and the last included.
// A failed read that may pass (APIError.Temporary, or the transport's) is
// tried again at the next tick, up to WaitOperationFailures in a row; ctx
// bounds the wait.
func (c *Client) WaitOperation(ctx context.Context, id string, every time.Duration, progress func(admin.Operation)) (admin.Operation, error) {
	if every <= 0 {
		every = OperationPollDefault
	}
	var last admin.Operation
	seen, failures := false, 0
	for {
		op, err := c.GetOperation(ctx, id)
		if err != nil {
			failures++
		}
		switch {
		case err == nil:
			failures = 0
			if progress != nil && (!seen || op.Done != last.Done || op.Progress != last.Progress || op.Status != last.Status ||
				skippedSum(op.Skipped) != skippedSum(last.Skipped)) {
				progress(op)
			}
			last, seen = op, true
			if op.Finished() {
				return op, nil
			}
		case ctx.Err() != nil:
			return last, ctx.Err()
		case !temporary(err) || failures >= WaitOperationFailures:
			return last, fmt.Errorf("waiting for operation %s: %w", id, err)
		}
		t := time.NewTimer(every)
		select {
		case <-ctx.Done():
			t.Stop()
			return last, ctx.Err()
		case <-t.C:
		}
	}
}

func skippedSum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// temporary reports whether err, from a read, may pass on its own: an
// answer the API marks retryable, or no answer at all.
func temporary(err error) bool {
	var apiErr *APIError
	if errors.As(err, &apiErr) {
		return apiErr.Temporary()
	}
	return true
}

// RestartItem calls POST /v1/admin/jobs/{id}/items/{itemId}/restart.
func (c *Client) RestartItem(ctx context.Context, jobID, itemID string) (job.Job, error) {
	return c.jobCall(ctx, http.MethodPost, "/v1/admin/jobs/"+url.PathEscape(jobID)+"/items/"+url.PathEscape(itemID)+"/restart")
}

// DLQPeek calls GET /v1/admin/dlq/{tier}?limit= (limit 0: the API's
// default); the messages stay in the DLQ.
func (c *Client) DLQPeek(ctx context.Context, tier string, limit int) ([]admin.DLQMessage, error) {
	v := url.Values{}
	if limit != 0 {
		v.Set("limit", strconv.Itoa(limit))
	}
	var res struct {
		Messages []admin.DLQMessage `json:"messages"`
	}
	_, err := c.call(ctx, http.MethodGet, withQuery("/v1/admin/dlq/"+url.PathEscape(tier), v), nil, &res)
	return res.Messages, err
}

// RedriveRequest is what a redrive moves.
type RedriveRequest struct {
	// JobIDs selects these jobs' messages (1 to admin.MaxBulk); nil: every
	// message. An empty, non-nil slice is sent as it is (and refused),
	// never taken for "every message".
	JobIDs []string
	// Max bounds the messages moved by this call (0: the API's default,
	// admin.RedriveDefault).
	Max int
}

// DLQRedrive calls POST /v1/admin/dlq/{tier}/redrive; the zero request
// sends no body (every message, the API's default batch).
func (c *Client) DLQRedrive(ctx context.Context, tier string, req RedriveRequest) (admin.Redriven, error) {
	body := map[string]any{}
	if req.JobIDs != nil {
		body["jobIds"] = req.JobIDs
	}
	if req.Max != 0 {
		body["max"] = req.Max
	}
	var send any
	if len(body) > 0 {
		send = body
	}
	var r admin.Redriven
	_, err := c.call(ctx, http.MethodPost, "/v1/admin/dlq/"+url.PathEscape(tier)+"/redrive", send, &r)
	return r, err
}

// PauseTier calls POST /v1/admin/tiers/{tier}/pause.
func (c *Client) PauseTier(ctx context.Context, tier string) (admin.TierState, error) {
	return c.tierCall(ctx, tier, "pause")
}

// ResumeTier calls POST /v1/admin/tiers/{tier}/resume.
func (c *Client) ResumeTier(ctx context.Context, tier string) (admin.TierState, error) {
	return c.tierCall(ctx, tier, "resume")
}

func (c *Client) tierCall(ctx context.Context, tier, verb string) (admin.TierState, error) {
	var st admin.TierState
	_, err := c.call(ctx, http.MethodPost, "/v1/admin/tiers/"+url.PathEscape(tier)+"/"+verb, nil, &st)
	return st, err
}

// Breakers calls GET /v1/admin/breakers.
func (c *Client) Breakers(ctx context.Context) ([]admin.BreakerView, error) {
	var res struct {
		Breakers []admin.BreakerView `json:"breakers"`
	}
	_, err := c.call(ctx, http.MethodGet, "/v1/admin/breakers", nil, &res)
	return res.Breakers, err
}

// BreakerReset is the answer of a breaker reset.
type BreakerReset struct {
	Key   string `json:"key"`
	State string `json:"state"`
}

// ResetBreaker calls POST /v1/admin/breakers/{key}/reset.
func (c *Client) ResetBreaker(ctx context.Context, key string) (BreakerReset, error) {
	var r BreakerReset
	_, err := c.call(ctx, http.MethodPost, "/v1/admin/breakers/"+url.PathEscape(key)+"/reset", nil, &r)
	return r, err
}

// Stats calls GET /v1/admin/stats?hours= (0: the API's default).
func (c *Client) Stats(ctx context.Context, hours int) (admin.Stats, error) {
	v := url.Values{}
	if hours != 0 {
		v.Set("hours", strconv.Itoa(hours))
	}
	var st admin.Stats
	_, err := c.call(ctx, http.MethodGet, withQuery("/v1/admin/stats", v), nil, &st)
	return st, err
}

// InspectorPage is one page of the inspector's search.
type InspectorPage struct {
	Jobs []admin.InspectedJob `json:"jobs"`
	// NextCursor continues the search; empty on the last page.
	NextCursor string `json:"-"`
	// Total is X-Total-Count, every match; -1 when the answer had none.
	Total int `json:"-"`
}

// SearchJobs calls GET /v1/admin/jobs: any user's jobs by q's filters.
func (c *Client) SearchJobs(ctx context.Context, q admin.SearchRequest) (InspectorPage, error) {
	v := url.Values{}
	for _, p := range [][2]string{{"status", q.Status}, {"tier", q.Tier}, {"owner", q.Owner}, {"type", q.Type}, {"errorCode", q.ErrorCode}, {"createdFrom", q.CreatedFrom}, {"createdTo", q.CreatedTo}, {"cursor", q.Cursor}} {
		set(v, p[0], p[1])
	}
	if q.Limit != nil {
		v.Set("limit", strconv.Itoa(*q.Limit))
	}
	var page struct {
		InspectorPage
		NextCursor *string `json:"nextCursor"`
	}
	h, err := c.call(ctx, http.MethodGet, withQuery("/v1/admin/jobs", v), nil, &page)
	if err != nil {
		return InspectorPage{}, err
	}
	out := page.InspectorPage
	if out.Jobs == nil {
		out.Jobs = []admin.InspectedJob{}
	}
	if page.NextCursor != nil {
		out.NextCursor = *page.NextCursor
	}
	out.Total = total(h)
	return out, nil
}

// InspectJob calls GET /v1/admin/jobs/{id}: any user's job with its owner
// and events.
func (c *Client) InspectJob(ctx context.Context, id string) (admin.JobWithEvents, error) {
	var j admin.JobWithEvents
	_, err := c.call(ctx, http.MethodGet, "/v1/admin/jobs/"+url.PathEscape(id), nil, &j)
	return j, err
}

// Orphans calls GET /v1/admin/orphans.
func (c *Client) Orphans(ctx context.Context) ([]admin.Orphan, error) {
	var res struct {
		Orphans []admin.Orphan `json:"orphans"`
	}
	_, err := c.call(ctx, http.MethodGet, "/v1/admin/orphans", nil, &res)
	return res.Orphans, err
}
