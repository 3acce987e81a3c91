package httpapi

import (
	"net/http"

	"github.com/conveyor/conveyor/internal/webhook"
)

// registerWebhooks adds the per-user webhook routes (API.md "Webhooks"):
// the caller's signing secret and endpoints. Reads are open to any role on
// the caller's own data; changes need a user or admin token.
func registerWebhooks(rt *Router, s UserServices) {
	rt.Handle(http.MethodGet, "/v1/webhooks/secret", AnyUser, s.getWebhookSecret)
	rt.Handle(http.MethodPost, "/v1/webhooks/secret/rotate", Writer, s.rotateWebhookSecret)
	rt.Handle(http.MethodPost, "/v1/webhooks", Writer, s.Idempotency.Wrap("POST /v1/webhooks", s.createWebhook))
	rt.Handle(http.MethodGet, "/v1/webhooks", AnyUser, s.listWebhooks)
	rt.Handle(http.MethodPatch, "/v1/webhooks/{id}", Writer, s.updateWebhook)
	rt.Handle(http.MethodDelete, "/v1/webhooks/{id}", Writer, s.deleteWebhook)
	rt.Handle(http.MethodPost, "/v1/webhooks/{id}/redeliver", Writer, s.redeliverWebhook)
}

func noStore(resp Response) Response {
	// A secret must not linger in caches between the caller and us.
	resp.Headers["Cache-Control"] = "no-store"
	return resp
}

func (s UserServices) getWebhookSecret(r *Request) (Response, error) {
	sec, err := s.Keys.Get(r.Ctx, r.Claims.Subject)
	if err != nil {
		return Response{}, err
	}
	return noStore(JSON(http.StatusOK, sec)), nil
}

func (s UserServices) rotateWebhookSecret(r *Request) (Response, error) {
	sec, err := s.Keys.Rotate(r.Ctx, r.Claims.Subject)
	if err != nil {
		return Response{}, err
	}
	return noStore(JSON(http.StatusOK, sec)), nil
}

func (s UserServices) createWebhook(r *Request) (Response, error) {
	var req webhook.CreateRequest
	if err := DecodeNoNulls(r, &req); err != nil {
		return Response{}, err
	}
	ep, err := s.Endpoints.Create(r.Ctx, r.Claims.Subject, req)
	if err != nil {
		return Response{}, clientError(err)
	}
	resp := JSON(http.StatusCreated, ep)
	resp.Headers["Location"] = "/v1/webhooks/" + ep.ID
	return resp, nil
}

func (s UserServices) listWebhooks(r *Request) (Response, error) {
	eps, err := s.Endpoints.List(r.Ctx, r.Claims.Subject)
	if err != nil {
		return Response{}, err
	}
	return JSON(http.StatusOK, map[string]any{"webhooks": eps}), nil
}

func (s UserServices) updateWebhook(r *Request) (Response, error) {
	var req webhook.UpdateRequest
	if err := DecodeNoNulls(r, &req); err != nil {
		return Response{}, err
	}
	ep, err := s.Endpoints.Update(r.Ctx, r.Claims.Subject, r.Params["id"], req)
	if err != nil {
		return Response{}, clientError(err)
	}
	return JSON(http.StatusOK, ep), nil
}

func (s UserServices) deleteWebhook(r *Request) (Response, error) {
	if err := s.Endpoints.Delete(r.Ctx, r.Claims.Subject, r.Params["id"]); err != nil {
		return Response{}, clientError(err)
	}
	return Response{StatusCode: http.StatusNoContent, Headers: map[string]string{}}, nil
}

// redeliverWebhook makes deliveries to the endpoint again: 202, with how
// many were queued (webhook.Redeliveries).
func (s UserServices) redeliverWebhook(r *Request) (Response, error) {
	var req webhook.RedeliverRequest
	if err := DecodeNoNulls(r, &req); err != nil {
		return Response{}, err
	}
	res, err := s.Redeliveries.Redeliver(r.Ctx, r.Claims.Subject, r.Params["id"], req)
	if err != nil {
		return Response{}, clientError(err)
	}
	return JSON(http.StatusAccepted, res), nil
}
