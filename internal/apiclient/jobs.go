package apiclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/conveyor/conveyor/internal/accounts"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/publish"
	"github.com/conveyor/conveyor/internal/submission"
	"github.com/conveyor/conveyor/internal/uploads"
)

// SignUpload calls POST /v1/uploads/sign: a presigned PUT for one object.
func (c *Client) SignUpload(ctx context.Context, req uploads.SignRequest) (uploads.Signed, error) {
	var s uploads.Signed
	_, err := c.call(ctx, http.MethodPost, "/v1/uploads/sign", req, &s)
	return s, err
}

// PutObject PUTs data to a signed slot with exactly its headers (to S3,
// not to the API: no bearer token). A refusal is an *APIError whose
// Message is the start of S3's XML answer.
func (c *Client) PutObject(ctx context.Context, s uploads.Signed, data []byte) error {
	method := s.Method
	if method == "" {
		method = http.MethodPut
	}
	req, err := http.NewRequestWithContext(ctx, method, s.URL, bytes.NewReader(data))
	if err != nil {
		return err
	}
	for k, v := range s.Headers {
		req.Header.Set(k, v)
	}
	req.ContentLength = int64(len(data))
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("presigned %s: %w", method, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 200 && resp.StatusCode <= 299 {
		return nil
	}
	r := &Response{Status: resp.StatusCode, Header: resp.Header}
	r.Body, _ = readSome(resp.Body, 4096)
	return apiError(method, "(presigned URL)", r, c.now())
}

// ConfirmUpload calls POST /v1/uploads/{id}/confirm (idempotent; 422
// upload_missing while the object is not in S3).
func (c *Client) ConfirmUpload(ctx context.Context, id string) (uploads.Upload, error) {
	var u uploads.Upload
	_, err := c.call(ctx, http.MethodPost, "/v1/uploads/"+url.PathEscape(id)+"/confirm", nil, &u)
	return u, err
}

// GetUpload calls GET /v1/uploads/{id}.
func (c *Client) GetUpload(ctx context.Context, id string) (uploads.Upload, error) {
	var u uploads.Upload
	_, err := c.call(ctx, http.MethodGet, "/v1/uploads/"+url.PathEscape(id), nil, &u)
	return u, err
}

// Upload signs a slot for data, PUTs it and confirms it: the upload, ready
// to name in a job.
func (c *Client) Upload(ctx context.Context, filename, contentType string, data []byte) (uploads.Upload, error) {
	s, err := c.SignUpload(ctx, uploads.SignRequest{Filename: filename, ContentType: contentType, Size: int64(len(data))})
	if err != nil {
		return uploads.Upload{}, err
	}
	if err := c.PutObject(ctx, s, data); err != nil {
		return uploads.Upload{}, err
	}
	return c.ConfirmUpload(ctx, s.UploadID)
}

// Connect calls PUT /v1/account/connection: stores the caller's tokens of
// the external service (encrypted; never returned).
func (c *Client) Connect(ctx context.Context, req accounts.ConnectRequest) error {
	_, err := c.call(ctx, http.MethodPut, "/v1/account/connection", req, nil)
	return err
}

// SubmitJob calls POST /v1/jobs. created is false when the answer is an
// active job of the caller with the same canonical request (200 instead of
// 201).
func (c *Client) SubmitJob(ctx context.Context, req submission.SubmitRequest) (j job.Job, created bool, err error) {
	r, err := c.do(ctx, c.base, http.MethodPost, "/v1/jobs", req, nil)
	if err != nil {
		return job.Job{}, false, err
	}
	if err := r.Err(); err != nil {
		return job.Job{}, false, err
	}
	if err := decode(http.MethodPost, "/v1/jobs", r.Body, &j); err != nil {
		return job.Job{}, false, err
	}
	return j, r.Status == http.StatusCreated, nil
}

// GetJob calls GET /v1/jobs/{id}.
func (c *Client) GetJob(ctx context.Context, id string) (job.Job, error) {
	return c.jobCall(ctx, http.MethodGet, "/v1/jobs/"+url.PathEscape(id))
}

// CancelJob calls POST /v1/jobs/{id}/cancel (409 once finished).
func (c *Client) CancelJob(ctx context.Context, id string) (job.Job, error) {
	return c.jobCall(ctx, http.MethodPost, "/v1/jobs/"+url.PathEscape(id)+"/cancel")
}

// RetryJob calls POST /v1/jobs/{id}/retry (409 unless failed, cancelled
// or stale).
func (c *Client) RetryJob(ctx context.Context, id string) (job.Job, error) {
	return c.jobCall(ctx, http.MethodPost, "/v1/jobs/"+url.PathEscape(id)+"/retry")
}

func (c *Client) jobCall(ctx context.Context, method, path string) (job.Job, error) {
	var j job.Job
	_, err := c.call(ctx, method, path, nil, &j)
	return j, err
}

// JobPage is one page of GET /v1/jobs.
type JobPage struct {
	Jobs []job.Job `json:"jobs"`
	// NextCursor continues the list; empty on the last page.
	NextCursor string `json:"-"`
	// Total is X-Total-Count: every job matching the status filter; -1
	// when the answer had none.
	Total int `json:"-"`
}

// ListJobs calls GET /v1/jobs with q's filters (a nil Limit: the API's
// default; 0: the count alone).
func (c *Client) ListJobs(ctx context.Context, q submission.ListRequest) (JobPage, error) {
	v := url.Values{}
	set(v, "status", q.Status)
	set(v, "updatedSince", q.UpdatedSince)
	set(v, "cursor", q.Cursor)
	if q.Limit != nil {
		v.Set("limit", strconv.Itoa(*q.Limit))
	}
	var page struct {
		JobPage
		NextCursor *string `json:"nextCursor"`
	}
	h, err := c.call(ctx, http.MethodGet, withQuery("/v1/jobs", v), nil, &page)
	if err != nil {
		return JobPage{}, err
	}
	out := page.JobPage
	if page.NextCursor != nil {
		out.NextCursor = *page.NextCursor
	}
	out.Total = total(h)
	return out, nil
}

// WaitJob polls GET /v1/jobs/{id} every interval until done says the job
// is where the caller wants it, and returns it. An answer of the API that
// will not change by waiting (404, 401 …) ends the wait; a transport error,
// a 429 or a 5xx gateway answer is tried again. ctx bounds the wait.
func (c *Client) WaitJob(ctx context.Context, id string, interval time.Duration, done func(job.Job) bool) (job.Job, error) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		j, err := c.GetJob(ctx, id)
		if err == nil && done(j) {
			return j, nil
		}
		var ae *APIError
		if errors.As(err, &ae) && !ae.Temporary() {
			return j, err
		}
		select {
		case <-ctx.Done():
			return j, fmt.Errorf("waiting for job %s (last seen %s): %w", id, j.Status, ctx.Err())
		case <-t.C:
		}
	}
}

// PublishRequest is the submission of a publish job of the uploads with p
// (type publish; set ScheduleAt or WebhookURL on the result as needed).
func PublishRequest(p publish.Params, uploadIDs ...string) submission.SubmitRequest {
	raw, err := json.Marshal(p)
	if err != nil {
		panic("encoding publish params: " + err.Error()) // strings only: always encodes
	}
	items := make([]submission.SubmitItem, len(uploadIDs))
	for i, id := range uploadIDs {
		items[i] = submission.SubmitItem{UploadID: id}
	}
	return submission.SubmitRequest{Type: publish.Type, Items: items, Params: raw}
}
