package httpapi

import (
	"net/http"

	"github.com/conveyor/conveyor/internal/uploads"
)

// RegisterUploads adds the uploads routes of the contract (API.md,
// "Uploads": sign a presigned PUT, confirm on demand, read one) to rt, over
// uploads.Service, for the uploads function (every path under
// resources.UploadsPathPrefix): a user or admin signs and confirms, any
// role reads.
func RegisterUploads(rt *Router, svc *uploads.Service) {
	u := uploadRoutes{svc}
	rt.Handle(http.MethodPost, "/v1/uploads/sign", Writer, u.sign)
	rt.Handle(http.MethodPost, "/v1/uploads/{id}/confirm", Writer, u.confirm)
	rt.Handle(http.MethodGet, "/v1/uploads/{id}", AnyUser, u.get)
}

type uploadRoutes struct{ svc *uploads.Service }

func (u uploadRoutes) sign(r *Request) (Response, error) {
	var req uploads.SignRequest
	if err := DecodeNoNulls(r, &req); err != nil {
		return Response{}, err
	}
	signed, err := u.svc.Sign(r.Ctx, r.Claims.Subject, req)
	if err != nil {
		return Response{}, clientError(err)
	}
	return JSON(http.StatusCreated, signed), nil
}

func (u uploadRoutes) confirm(r *Request) (Response, error) {
	up, err := u.svc.Confirm(r.Ctx, r.Claims.Subject, r.Params["id"])
	if err != nil {
		return Response{}, clientError(err)
	}
	return JSON(http.StatusOK, up), nil
}

func (u uploadRoutes) get(r *Request) (Response, error) {
	up, err := u.svc.Get(r.Ctx, r.Claims.Subject, r.Params["id"])
	if err != nil {
		return Response{}, clientError(err)
	}
	return JSON(http.StatusOK, up), nil
}
