package lambdaruntime

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/conveyor/conveyor/internal/httpapi"
	"github.com/conveyor/conveyor/internal/resources"
)

// TestRouteByPath: each path goes to the function the route table names —
// the admin, uploads and schedules groups to theirs, everything else
// (look-alike paths included) to the api — with no redirect.
func TestRouteByPath(t *testing.T) {
	t.Parallel()
	named := func(name string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, name) })
	}
	fns := map[string]http.Handler{}
	for _, fn := range []string{resources.FuncAPI, resources.FuncAdmin, resources.FuncUploads, resources.FuncSchedules} {
		fns[fn] = named(fn)
	}
	h := RouteByPath(resources.FunctionForPath, fns)
	for path, want := range map[string]string{
		"/v1/admin/overview":        "admin",
		"/v1/admin/jobs/job_1":      "admin",
		"/v1/admin/":                "admin",
		"/v1/admin":                 "api",
		"/v1/administrators":        "api",
		"/v1/uploads/sign":          "uploads",
		"/v1/uploads/upl_1?x=1":     "uploads",
		"/v1/uploads":               "api",
		"/v1/schedules":             "schedules",
		"/v1/schedules?limit=1":     "schedules",
		"/v1/schedules/sch_1/pause": "schedules",
		"/v1/schedulesx":            "api",
		"/v1/jobs":                  "api",
		"/dashboard/":               "api",
		"/v2/admin/overview":        "api",
		"/v1/jobs/job_1/admin/echo": "api",
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		if rec.Code != http.StatusOK || rec.Body.String() != want {
			t.Errorf("%s: %d %q, want 200 %q", path, rec.Code, rec.Body.String(), want)
		}
	}
	// A function without a handler: the gateway's own 500, never another
	// function's answer.
	delete(fns, resources.FuncUploads)
	rec := httptest.NewRecorder()
	RouteByPath(resources.FunctionForPath, fns).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/uploads/sign", nil))
	if rec.Code != http.StatusInternalServerError {
		t.Errorf("no uploads handler: %d %s, want 500", rec.Code, rec.Body)
	}
}

// TestGatewayAnswersInTheContractsShape: what the local gateway answers
// itself — a body over API Gateway's 10 MB, a function that failed, a path
// without a function — has the API's error shape and an X-Request-Id, as
// every answer of the function has; the over-limit answer is the one the
// API gives a body over its own limit. The stream function's URL answers a
// body over the limit the same way.
func TestGatewayAnswersInTheContractsShape(t *testing.T) {
	t.Parallel()
	rt := httpapi.NewRouter(httpapi.Options{Logger: slog.New(slog.DiscardHandler)})
	rt.Handle(http.MethodPost, "/v1/echo", httpapi.Public, func(r *httpapi.Request) (httpapi.Response, error) {
		var v map[string]any
		if err := httpapi.Decode(r, &v); err != nil {
			return httpapi.Response{}, err
		}
		return httpapi.JSON(http.StatusOK, v), nil
	})
	quiet := slog.New(slog.DiscardHandler)
	api := httptest.NewServer(Gateway(InProcess("api", rt.Serve), quiet))
	t.Cleanup(api.Close)
	failing := httptest.NewServer(Gateway(InProcess("api", func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		return events.APIGatewayV2HTTPResponse{}, errors.New("boom")
	}), quiet))
	t.Cleanup(failing.Close)
	unrouted := httptest.NewServer(RouteByPath(func(string) string { return "nobody" }, map[string]http.Handler{}))
	t.Cleanup(unrouted.Close)
	streams := httptest.NewServer(&FunctionURL{Function: InProcessStream("stream", func(context.Context, events.LambdaFunctionURLRequest) (*events.LambdaFunctionURLStreamingResponse, error) {
		return &events.LambdaFunctionURLStreamingResponse{StatusCode: 200, Body: strings.NewReader("")}, nil
	}), Logger: quiet})
	t.Cleanup(streams.Close)

	jsonBody := func(n int) string { return `{"x":"` + strings.Repeat("a", n-8) + `"}` }
	type answer struct {
		status int
		code   string
		msg    string
	}
	call := func(t *testing.T, url, body string) answer {
		t.Helper()
		resp, err := http.Post(url, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		var e struct {
			Error *struct {
				Code    string `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&e); err != nil || e.Error == nil || e.Error.Code == "" || e.Error.Message == "" {
			t.Fatalf("%d %s: the body is not the error contract (%v)", resp.StatusCode, raw, err)
		}
		if id := resp.Header.Get("X-Request-Id"); !strings.HasPrefix(id, "req") {
			t.Errorf("%d: X-Request-Id = %q", resp.StatusCode, id)
		}
		if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("%d: Content-Type = %q", resp.StatusCode, ct)
		}
		return answer{resp.StatusCode, e.Error.Code, e.Error.Message}
	}
	overAPI := call(t, api.URL+"/v1/echo", jsonBody(httpapi.MaxBodyDefault+1))
	overGateway := call(t, api.URL+"/v1/echo", jsonBody(MaxGatewayBody+1))
	if overAPI.status != http.StatusRequestEntityTooLarge || overAPI.code != httpapi.CodePayloadTooLarge {
		t.Errorf("over the API's limit: %+v", overAPI)
	}
	if overGateway != overAPI {
		t.Errorf("over the gateway's limit: %+v; want the API's own answer %+v", overGateway, overAPI)
	}
	if got := call(t, streams.URL+"/v1/events", jsonBody(MaxGatewayBody+1)); got != overAPI {
		t.Errorf("the function URL over the limit: %+v; want %+v", got, overAPI)
	}
	if got := call(t, failing.URL+"/v1/echo", "{}"); got.status != http.StatusInternalServerError || got.code != httpapi.CodeInternal {
		t.Errorf("a failed function: %+v, want 500 internal", got)
	}
	if got := call(t, unrouted.URL+"/v1/echo", "{}"); got.status != http.StatusInternalServerError || got.code != httpapi.CodeInternal {
		t.Errorf("no function for the path: %+v, want 500 internal", got)
	}
}
