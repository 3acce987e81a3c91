package api

import (
	"net/http"

	"github.com/conveyor/conveyor/internal/httpapi"
	"github.com/conveyor/conveyor/internal/webhook"
)

// registerWebhooks adds the per-user webhook routes (API.md "Webhooks"):
// the caller's signing secret and endpoints. Reads are open to any role on
// the caller's own data; changes need a user or admin token.
func registerWebhooks(rt *httpapi.Router, s Services) {
	rt.Handle(http.MethodGet, "/v1/webhooks/secret", httpapi.AnyUser, s.getWebhookSecret)
	rt.Handle(http.MethodPost, "/v1/webhooks/secret/rotate", httpapi.Writer, s.rotateWebhookSecret)
	rt.Handle(http.MethodPost, "/v1/webhooks", httpapi.Writer, s.Idempotency.Wrap("POST /v1/webhooks", s.createWebhook))
	rt.Handle(http.MethodGet, "/v1/webhooks", httpapi.AnyUser, s.listWebhooks)
	rt.Handle(http.MethodDelete, "/v1/webhooks/{id}", httpapi.Writer, s.deleteWebhook)
}

func noStore(resp httpapi.Response) httpapi.Response {
	// A secret must not linger in caches between the caller and us.
	resp.Headers["Cache-Control"] = "no-store"
	return resp
}

func (s Services) getWebhookSecret(r *httpapi.Request) (httpapi.Response, error) {
	sec, err := s.Keys.Get(r.Ctx, r.Claims.Subject)
	if err != nil {
		return httpapi.Response{}, err
	}
	return noStore(httpapi.JSON(http.StatusOK, sec)), nil
}

func (s Services) rotateWebhookSecret(r *httpapi.Request) (httpapi.Response, error) {
	sec, err := s.Keys.Rotate(r.Ctx, r.Claims.Subject)
	if err != nil {
		return httpapi.Response{}, err
	}
	return noStore(httpapi.JSON(http.StatusOK, sec)), nil
}

func (s Services) createWebhook(r *httpapi.Request) (httpapi.Response, error) {
	var req webhook.CreateRequest
	if err := httpapi.Decode(r, &req); err != nil {
		return httpapi.Response{}, err
	}
	ep, err := s.Endpoints.Create(r.Ctx, r.Claims.Subject, req)
	if err != nil {
		return httpapi.Response{}, clientError(err)
	}
	resp := httpapi.JSON(http.StatusCreated, ep)
	resp.Headers["Location"] = "/v1/webhooks/" + ep.ID
	return resp, nil
}

func (s Services) listWebhooks(r *httpapi.Request) (httpapi.Response, error) {
	eps, err := s.Endpoints.List(r.Ctx, r.Claims.Subject)
	if err != nil {
		return httpapi.Response{}, err
	}
	return httpapi.JSON(http.StatusOK, map[string]any{"webhooks": eps}), nil
}

func (s Services) deleteWebhook(r *httpapi.Request) (httpapi.Response, error) {
	if err := s.Endpoints.Delete(r.Ctx, r.Claims.Subject, r.Params["id"]); err != nil {
		return httpapi.Response{}, clientError(err)
	}
	return httpapi.Response{StatusCode: http.StatusNoContent, Headers: map[string]string{}}, nil
}
