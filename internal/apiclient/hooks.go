package apiclient

import (
	"context"
	"net/http"
	"net/url"

	"github.com/conveyor/conveyor/internal/schedule"
	"github.com/conveyor/conveyor/internal/webhook"
)

// CreateSchedule calls POST /v1/schedules.
func (c *Client) CreateSchedule(ctx context.Context, req schedule.Request) (schedule.Schedule, error) {
	var s schedule.Schedule
	_, err := c.call(ctx, http.MethodPost, "/v1/schedules", req, &s)
	return s, err
}

// ListSchedules calls GET /v1/schedules.
func (c *Client) ListSchedules(ctx context.Context) ([]schedule.Schedule, error) {
	var res struct {
		Schedules []schedule.Schedule `json:"schedules"`
	}
	_, err := c.call(ctx, http.MethodGet, "/v1/schedules", nil, &res)
	return res.Schedules, err
}

// GetSchedule calls GET /v1/schedules/{id} (with its last runs).
func (c *Client) GetSchedule(ctx context.Context, id string) (schedule.Schedule, error) {
	return c.scheduleCall(ctx, http.MethodGet, "/v1/schedules/"+url.PathEscape(id))
}

// PauseSchedule calls POST /v1/schedules/{id}/pause.
func (c *Client) PauseSchedule(ctx context.Context, id string) (schedule.Schedule, error) {
	return c.scheduleCall(ctx, http.MethodPost, "/v1/schedules/"+url.PathEscape(id)+"/pause")
}

// ResumeSchedule calls POST /v1/schedules/{id}/resume.
func (c *Client) ResumeSchedule(ctx context.Context, id string) (schedule.Schedule, error) {
	return c.scheduleCall(ctx, http.MethodPost, "/v1/schedules/"+url.PathEscape(id)+"/resume")
}

// DeleteSchedule calls DELETE /v1/schedules/{id}.
func (c *Client) DeleteSchedule(ctx context.Context, id string) error {
	_, err := c.call(ctx, http.MethodDelete, "/v1/schedules/"+url.PathEscape(id), nil, nil)
	return err
}

func (c *Client) scheduleCall(ctx context.Context, method, path string) (schedule.Schedule, error) {
	var s schedule.Schedule
	_, err := c.call(ctx, method, path, nil, &s)
	return s, err
}

// WebhookSecret calls GET /v1/webhooks/secret (created on first use).
func (c *Client) WebhookSecret(ctx context.Context) (webhook.Secret, error) {
	var s webhook.Secret
	_, err := c.call(ctx, http.MethodGet, "/v1/webhooks/secret", nil, &s)
	return s, err
}

// RotateWebhookSecret calls POST /v1/webhooks/secret/rotate: the new
// secret (the old one keeps signing alongside for a while).
func (c *Client) RotateWebhookSecret(ctx context.Context) (webhook.Secret, error) {
	var s webhook.Secret
	_, err := c.call(ctx, http.MethodPost, "/v1/webhooks/secret/rotate", nil, &s)
	return s, err
}

// CreateWebhook calls POST /v1/webhooks.
func (c *Client) CreateWebhook(ctx context.Context, req webhook.CreateRequest) (webhook.Endpoint, error) {
	var e webhook.Endpoint
	_, err := c.call(ctx, http.MethodPost, "/v1/webhooks", req, &e)
	return e, err
}

// ListWebhooks calls GET /v1/webhooks.
func (c *Client) ListWebhooks(ctx context.Context) ([]webhook.Endpoint, error) {
	var res struct {
		Webhooks []webhook.Endpoint `json:"webhooks"`
	}
	_, err := c.call(ctx, http.MethodGet, "/v1/webhooks", nil, &res)
	return res.Webhooks, err
}

// DeleteWebhook calls DELETE /v1/webhooks/{id}.
func (c *Client) DeleteWebhook(ctx context.Context, id string) error {
	_, err := c.call(ctx, http.MethodDelete, "/v1/webhooks/"+url.PathEscape(id), nil, nil)
	return err
}

// UpdateWebhook calls PATCH /v1/webhooks/{id}: enables (its failures
// forgotten, its circuit closed) or disables the endpoint.
func (c *Client) UpdateWebhook(ctx context.Context, id string, req webhook.UpdateRequest) (webhook.Endpoint, error) {
	var e webhook.Endpoint
	_, err := c.call(ctx, http.MethodPatch, "/v1/webhooks/"+url.PathEscape(id), req, &e)
	return e, err
}

// RedeliverWebhook calls POST /v1/webhooks/{id}/redeliver: one delivery
// made again, or the failed ones since a time (100 a call: go on with
// NextCursor as Cursor, the same Since).
func (c *Client) RedeliverWebhook(ctx context.Context, id string, req webhook.RedeliverRequest) (webhook.RedeliverResult, error) {
	var res webhook.RedeliverResult
	_, err := c.call(ctx, http.MethodPost, "/v1/webhooks/"+url.PathEscape(id)+"/redeliver", req, &res)
	return res, err
}
