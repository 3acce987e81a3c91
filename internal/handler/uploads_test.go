package handler_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/conveyor/conveyor/internal/handler"
	"github.com/conveyor/conveyor/internal/resources"
	"github.com/conveyor/conveyor/localstack/awstest"
)

// TestServesTheUploadsRoutes wires the function as its binary does,
// against the emulator: a user signs an upload and reads it back, the
// object not being there yet confirms to 422, a service token may read but
// not sign, a missing token is refused, and the other groups' routes are
// not this function's.
func TestServesTheUploadsRoutes(t *testing.T) {
	t.Parallel()
	f := awstest.Provision(t).HTTPFunc(t, resources.FuncUploads, handler.NewUploads)
	user := f.Token("u-uploads", "user")
	signed := f.Call(http.MethodPost, "/v1/uploads/sign", user, `{"filename":"cat.png","contentType":"image/png","size":12345}`)
	var s struct {
		UploadID string `json:"uploadId"`
		URL      string `json:"url"`
	}
	if err := json.Unmarshal([]byte(signed.Body), &s); signed.StatusCode != http.StatusCreated || err != nil || s.UploadID == "" || s.URL == "" {
		t.Fatalf("sign: %d %s (%v)", signed.StatusCode, signed.Body, err)
	}
	for _, c := range []struct {
		method, path, token, body string
		want                      int
		code                      string
	}{
		{http.MethodGet, "/v1/uploads/" + s.UploadID, user, "", http.StatusOK, ""},
		{http.MethodGet, "/v1/uploads/" + s.UploadID, f.Token("someone-else", "user"), "", http.StatusNotFound, "not_found"},
		{http.MethodGet, "/v1/uploads/" + s.UploadID, f.Token("mon", "service"), "", http.StatusNotFound, "not_found"},
		{http.MethodPost, "/v1/uploads/" + s.UploadID + "/confirm", user, "", http.StatusUnprocessableEntity, "upload_missing"},
		{http.MethodPost, "/v1/uploads/sign", f.Token("mon", "service"), `{"filename":"a.png","contentType":"image/png","size":1}`, http.StatusForbidden, "forbidden"},
		{http.MethodPost, "/v1/uploads/sign", "", `{}`, http.StatusUnauthorized, "unauthorized"},
		{http.MethodPost, "/v1/uploads/sign", user, `{"filename":"a.exe","contentType":"application/x-msdownload","size":1}`, http.StatusBadRequest, ""},
		{http.MethodGet, "/v1/uploads/sign", user, "", http.StatusMethodNotAllowed, "method_not_allowed"},
		{http.MethodGet, "/v1/jobs", user, "", http.StatusNotFound, "not_found"},
		{http.MethodGet, "/v1/schedules", user, "", http.StatusNotFound, "not_found"},
	} {
		got := f.Call(c.method, c.path, c.token, c.body)
		var e struct {
			Error struct{ Code string } `json:"error"`
		}
		_ = json.Unmarshal([]byte(got.Body), &e)
		if got.StatusCode != c.want || (c.code != "" && e.Error.Code != c.code) {
			t.Errorf("%s %s: %d %s, want %d %s", c.method, c.path, got.StatusCode, got.Body, c.want, c.code)
		}
	}
}
