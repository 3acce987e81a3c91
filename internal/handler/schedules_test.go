package handler_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/conveyor/conveyor/internal/handler"
	"github.com/conveyor/conveyor/internal/resources"
	"github.com/conveyor/conveyor/localstack/awstest"
)

// TestServesTheSchedulesRoutes wires the function as its binary does,
// against the emulator (Scheduler included): a user creates a schedule in
// a time zone, lists it, pauses and deletes it; a bad template is a 400
// naming its field; a service token may read but not write; the other
// groups' routes are not this function's.
func TestServesTheSchedulesRoutes(t *testing.T) {
	t.Parallel()
	f := awstest.Provision(t).HTTPFunc(t, resources.FuncSchedules, handler.NewSchedules)
	user, service := f.Token("u-schedules", "user"), f.Token("mon", "service")
	created := f.Call(http.MethodPost, "/v1/schedules", user,
		`{"name":"hourly ping","cron":"0 * * * *","timezone":"Europe/Moscow","job":{"type":"http","params":{"method":"POST","url":"https://example.com/hook"}}}`)
	var sc struct {
		ID, Status string
		NextRunAt  *string `json:"nextRunAt"`
	}
	if err := json.Unmarshal([]byte(created.Body), &sc); created.StatusCode != http.StatusCreated || err != nil || sc.ID == "" || sc.NextRunAt == nil {
		t.Fatalf("create: %d %s (%v)", created.StatusCode, created.Body, err)
	}
	type errBody struct {
		Error struct{ Code, Field string } `json:"error"`
	}
	for _, c := range []struct {
		method, path, token, body string
		want                      int
		field                     string
	}{
		{http.MethodGet, "/v1/schedules", user, "", http.StatusOK, ""},
		{http.MethodGet, "/v1/schedules/" + sc.ID, service, "", http.StatusNotFound, ""},
		{http.MethodPost, "/v1/schedules/" + sc.ID + "/pause", service, "", http.StatusForbidden, ""},
		{http.MethodPost, "/v1/schedules/" + sc.ID + "/pause", user, "", http.StatusOK, ""},
		{http.MethodPost, "/v1/schedules", user, `{"name":"x","rate":"5m","job":{"type":"nope"}}`, http.StatusBadRequest, "job.type"},
		{http.MethodPost, "/v1/schedules", user, `{"name":"x","rate":"5m","timezone":"Mars/Olympus","job":{"type":"http","params":{"method":"GET","url":"https://example.com"}}}`, http.StatusBadRequest, "timezone"},
		{http.MethodGet, "/v1/schedules", "", "", http.StatusUnauthorized, ""},
		{http.MethodPut, "/v1/schedules", user, "", http.StatusMethodNotAllowed, ""},
		{http.MethodDelete, "/v1/schedules/" + sc.ID, user, "", http.StatusNoContent, ""},
		{http.MethodGet, "/v1/schedules/" + sc.ID, user, "", http.StatusNotFound, ""},
		{http.MethodPost, "/v1/uploads/sign", user, `{}`, http.StatusNotFound, ""},
		{http.MethodGet, "/v1/jobs", user, "", http.StatusNotFound, ""},
	} {
		got := f.Call(c.method, c.path, c.token, c.body)
		var e errBody
		_ = json.Unmarshal([]byte(got.Body), &e)
		if got.StatusCode != c.want || e.Error.Field != c.field {
			t.Errorf("%s %s: %d %s, want %d (field %q)", c.method, c.path, got.StatusCode, got.Body, c.want, c.field)
		}
	}
}
