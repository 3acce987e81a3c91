// Package uploadsapi is the uploads routes of the HTTP API (API.md,
// "Uploads"): sign a presigned PUT, confirm an upload on demand, read one,
// over uploads.Service. The uploads function serves them (API Gateway sends
// it every path under resources.UploadsPathPrefix); the package is apart
// from api so that only the uploads function links and may call S3, and it
// none of the jobs' or accounts' services.
package uploadsapi

import (
	"errors"
	"net/http"

	"github.com/conveyor/conveyor/internal/httpapi"
	"github.com/conveyor/conveyor/internal/invalid"
	"github.com/conveyor/conveyor/internal/store"
	"github.com/conveyor/conveyor/internal/uploads"
)

// Register adds the uploads routes of the contract to rt: a user or admin
// signs and confirms, any role reads.
func Register(rt *httpapi.Router, svc *uploads.Service) {
	u := uploadRoutes{svc}
	rt.Handle(http.MethodPost, "/v1/uploads/sign", httpapi.Writer, u.sign)
	rt.Handle(http.MethodPost, "/v1/uploads/{id}/confirm", httpapi.Writer, u.confirm)
	rt.Handle(http.MethodGet, "/v1/uploads/{id}", httpapi.AnyUser, u.get)
}

type uploadRoutes struct{ svc *uploads.Service }

func (u uploadRoutes) sign(r *httpapi.Request) (httpapi.Response, error) {
	var req uploads.SignRequest
	if err := httpapi.Decode(r, &req); err != nil {
		return httpapi.Response{}, err
	}
	signed, err := u.svc.Sign(r.Ctx, r.Claims.Subject, req)
	if err != nil {
		return httpapi.Response{}, clientError(err)
	}
	return httpapi.JSON(http.StatusCreated, signed), nil
}

func (u uploadRoutes) confirm(r *httpapi.Request) (httpapi.Response, error) {
	up, err := u.svc.Confirm(r.Ctx, r.Claims.Subject, r.Params["id"])
	if err != nil {
		return httpapi.Response{}, clientError(err)
	}
	return httpapi.JSON(http.StatusOK, up), nil
}

func (u uploadRoutes) get(r *httpapi.Request) (httpapi.Response, error) {
	up, err := u.svc.Get(r.Ctx, r.Claims.Subject, r.Params["id"])
	if err != nil {
		return httpapi.Response{}, clientError(err)
	}
	return httpapi.JSON(http.StatusOK, up), nil
}

// clientError renders the uploads service's errors in the contract's
// terms: input to correct → 400 naming the field; an object not in S3 yet
// → 422; an unknown or another user's upload → 404. Any other error
// passes through and becomes a 500 whose detail is only logged.
func clientError(err error) error {
	if fe, ok := invalid.As(err); ok {
		return httpapi.BadRequest(fe.Field, "%s", fe.Error())
	}
	switch {
	case errors.Is(err, uploads.ErrNotUploaded):
		return httpapi.Unprocessable("upload_missing", "", "the object has not been uploaded yet")
	case errors.Is(err, store.ErrNotFound):
		return httpapi.NotFound()
	}
	return err
}
