package httpapi

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/google/go-cmp/cmp"
)

var secret = []byte("s3cret-for-httpapi-tests")

const leak = "hunter2"

// syncBuffer is a log sink safe for parallel subtests.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// lines returns the JSON log records that mention requestID.
func (b *syncBuffer) lines(t *testing.T, requestID string) []map[string]any {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(b.buf.String()), "\n") {
		if !strings.Contains(l, requestID) {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line is not JSON: %q", l)
		}
		out = append(out, m)
	}
	return out
}

type thing struct {
	Name   string   `json:"name"`
	Count  int      `json:"count"`
	Tags   []string `json:"tags"`
	Params struct {
		Title string `json:"title"`
		Size  *int   `json:"size"`
	} `json:"params"`
	Items []struct {
		UploadID string `json:"uploadId"`
	} `json:"items"`
	At *time.Time `json:"at"`
}

type testBundle struct {
	rt                   *Router
	log                  *syncBuffer
	user, admin, service string
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	b := &testBundle{log: &syncBuffer{}}
	logger := slog.New(slog.NewJSONHandler(b.log, nil))
	b.rt = NewRouter(Options{Verifier: NewVerifier(secret, nil), Logger: logger, MaxBody: 128})
	b.user, b.admin, b.service = token(t, RoleUser), token(t, RoleAdmin), token(t, RoleService)

	b.rt.Handle(http.MethodPost, "/things", Writer, func(r *Request) (Response, error) {
		var v thing
		if err := Decode(r, &v); err != nil {
			return Response{}, err
		}
		return JSON(http.StatusCreated, v), nil
	})
	b.rt.Handle(http.MethodGet, "/things/{id}", AnyUser, func(r *Request) (Response, error) {
		return JSON(http.StatusOK, map[string]string{"id": r.Params["id"], "sub": r.Claims.Subject, "status": r.Query("status")}), nil
	})
	b.rt.Handle(http.MethodGet, "/things/special", AnyUser, func(r *Request) (Response, error) {
		return JSON(http.StatusOK, map[string]string{"route": "special"}), nil
	})
	b.rt.Handle(http.MethodPost, "/things/{id}/cancel", Writer, func(r *Request) (Response, error) {
		return JSON(http.StatusOK, map[string]string{"cancelled": r.Params["id"]}), nil
	})
	b.rt.Handle(http.MethodPost, "/things/bulk", Writer, func(r *Request) (Response, error) {
		return JSON(http.StatusOK, map[string]string{"route": "bulk"}), nil
	})
	b.rt.Handle(http.MethodGet, "/admin", AdminOnly, func(r *Request) (Response, error) { return JSON(http.StatusOK, "admin"), nil })
	b.rt.Handle(http.MethodGet, "/read", ReadOnly, func(r *Request) (Response, error) { return JSON(http.StatusOK, "read"), nil })
	b.rt.Handle(http.MethodGet, "/public", Public, func(r *Request) (Response, error) {
		return JSON(http.StatusOK, map[string]string{"sub": r.Claims.Subject}), nil
	})
	b.rt.Handle(http.MethodPost, "/raw", Public, func(r *Request) (Response, error) {
		body, err := r.Body()
		if err != nil {
			return Response{}, err
		}
		return JSON(http.StatusOK, map[string]int{"bytes": len(body)}), nil
	})
	b.rt.Handle(http.MethodGet, "/boom", Public, func(r *Request) (Response, error) { panic("secret detail " + leak) })
	b.rt.Handle(http.MethodGet, "/fail", Public, func(r *Request) (Response, error) {
		return Response{}, errors.New("db password=" + leak)
	})
	b.rt.Handle(http.MethodGet, "/wrapped", Public, func(r *Request) (Response, error) {
		return Response{}, fmt.Errorf("cancelling: %w", Conflict("already_finished", "the job has finished"))
	})
	b.rt.Handle(http.MethodGet, "/nostatus", Public, func(r *Request) (Response, error) { return Response{}, nil })
	b.rt.Handle(http.MethodGet, "/stream", Public, func(r *Request) (Response, error) {
		return Response{StatusCode: http.StatusOK, Headers: map[string]string{"content-type": "text/event-stream"}, Body: "event: ping\n\n"}, nil
	})
	b.rt.Handle(http.MethodDelete, "/empty", Public, func(r *Request) (Response, error) { return NoContent(), nil })
	return b
}

func token(t *testing.T, role Role) string {
	t.Helper()
	s, err := Mint(secret, Claims{Subject: "u-" + string(role), Role: role, Plan: "free", ExpiresAt: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// event builds an API Gateway v2 event the way the gateway does: lower-case
// header names, a JSON Content-Type unless overridden.
func event(method, path, tok, body string, headers ...string) events.APIGatewayV2HTTPRequest {
	h := map[string]string{"content-type": "application/json"}
	if tok != "" {
		h["authorization"] = "Bearer " + tok
	}
	for i := 0; i+1 < len(headers); i += 2 {
		h[strings.ToLower(headers[i])] = headers[i+1]
	}
	raw, query, _ := strings.Cut(path, "?")
	return events.APIGatewayV2HTTPRequest{
		RawPath: raw, RawQueryString: query, Headers: h, Body: body,
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			RequestID: "req-" + strings.NewReplacer("/", "-", "?", "-").Replace(method+path),
			HTTP:      events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: method, Path: raw},
		},
	}
}

func base64Event(method, path, tok string, body []byte) events.APIGatewayV2HTTPRequest {
	ev := event(method, path, tok, base64.StdEncoding.EncodeToString(body))
	ev.IsBase64Encoded = true
	return ev
}

func serve(t *testing.T, rt *Router, ev events.APIGatewayV2HTTPRequest) Response {
	t.Helper()
	resp, err := rt.Serve(context.Background(), ev)
	if err != nil {
		t.Fatalf("Serve returned an error: %v", err)
	}
	return resp
}

func errorOf(t *testing.T, resp Response) errorDetail {
	t.Helper()
	var e struct {
		Error *errorDetail `json:"error"`
	}
	dec := json.NewDecoder(strings.NewReader(resp.Body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil || e.Error == nil {
		t.Fatalf("body is not the error contract (%v): %s", err, resp.Body)
	}
	return *e.Error
}

func TestServeErrors(t *testing.T) {
	t.Parallel()
	b := setup(t)
	badB64 := event(http.MethodPost, "/things", b.user, "!!not base64!!")
	badB64.IsBase64Encoded = true
	tests := []struct {
		name   string
		ev     events.APIGatewayV2HTTPRequest
		status int
		want   errorDetail // Message compared only when set
	}{
		{"bad JSON", event(http.MethodPost, "/things", b.user, `{"name":`), 400, errorDetail{Code: CodeInvalidJSON}},
		{"not JSON at all", event(http.MethodPost, "/things", b.user, `name=x`), 400, errorDetail{Code: CodeInvalidJSON}},
		{"empty body", event(http.MethodPost, "/things", b.user, ``), 400, errorDetail{Code: CodeInvalidJSON, Message: "the body is empty; it must be a JSON value"}},
		{"whitespace body", event(http.MethodPost, "/things", b.user, " \n "), 400, errorDetail{Code: CodeInvalidJSON}},
		{"trailing object", event(http.MethodPost, "/things", b.user, `{"name":"a"} {}`), 400, errorDetail{Code: CodeInvalidJSON, Message: "the body must hold exactly one JSON value"}},
		{"trailing garbage", event(http.MethodPost, "/things", b.user, `{"name":"a"}]`), 400, errorDetail{Code: CodeInvalidJSON}},
		{"unknown field", event(http.MethodPost, "/things", b.user, `{"nope":1}`), 400, errorDetail{Code: CodeUnknownField, Field: "nope", Message: `unknown field "nope"`}},
		{"unknown nested field", event(http.MethodPost, "/things", b.user, `{"params":{"title":"t","colour":"red"}}`), 400, errorDetail{Code: CodeUnknownField, Field: "params.colour"}},
		{"unknown field in an array", event(http.MethodPost, "/things", b.user, `{"items":[{"uploadId":"a"},{"uploadID":"b","x":1}]}`), 400, errorDetail{Code: CodeUnknownField, Field: "items.1.x"}},
		{"wrong type", event(http.MethodPost, "/things", b.user, `{"count":"two"}`), 400, errorDetail{Code: CodeInvalidType, Field: "count", Message: "count must be an integer, not a string"}},
		{"wrong nested type", event(http.MethodPost, "/things", b.user, `{"params":{"title":5}}`), 400, errorDetail{Code: CodeInvalidType, Field: "params.title", Message: "params.title must be a string, not a number"}},
		{"wrong type in an array", event(http.MethodPost, "/things", b.user, `{"items":[{"uploadId":"a"},{"uploadId":true}]}`), 400, errorDetail{Code: CodeInvalidType, Field: "items.1.uploadId", Message: "items.1.uploadId must be a string, not a boolean"}},
		{"array for an object", event(http.MethodPost, "/things", b.user, `{"params":[]}`), 400, errorDetail{Code: CodeInvalidType, Field: "params"}},
		{"number out of range", event(http.MethodPost, "/things", b.user, `{"params":{"size":1e400}}`), 400, errorDetail{Code: CodeInvalidType, Field: "params.size"}},
		{"body not an object", event(http.MethodPost, "/things", b.user, `[1]`), 400, errorDetail{Code: CodeInvalidType, Message: "the body must be an object, not an array"}},
		{"null body", event(http.MethodPost, "/things", b.user, `null`), 400, errorDetail{Code: CodeInvalidType, Message: "the body must be an object, not null"}},
		{"bad time", event(http.MethodPost, "/things", b.user, `{"at":"yesterday"}`), 400, errorDetail{Code: CodeInvalidType}},
		{"broken base64", badB64, 400, errorDetail{Code: CodeInvalidJSON}},
		{"invalid UTF-8", base64Event(http.MethodPost, "/things", b.user, []byte("{\"name\":\"ab\xff\"}")), 400,
			errorDetail{Code: CodeInvalidEncoding, Message: "the body is not valid UTF-8 (at byte 11)"}},
		{"invalid UTF-8 as text", event(http.MethodPost, "/things", b.user, "{\"name\":\"\xc3\"}"), 400, errorDetail{Code: CodeInvalidEncoding}},
		{"an encoded surrogate", base64Event(http.MethodPost, "/things", b.user, []byte("{\"name\":\"\xed\xa0\x80\"}")), 400, errorDetail{Code: CodeInvalidEncoding}},
		{"lone high surrogate escape", event(http.MethodPost, "/things", b.user, `{"name":"x\ud83d"}`), 400,
			errorDetail{Code: CodeInvalidEncoding, Message: `the body has an unpaired surrogate escape \ud83d (at byte 10)`}},
		{"high surrogate before a non-surrogate", event(http.MethodPost, "/things", b.user, `{"name":"\ud83d\u0041"}`), 400, errorDetail{Code: CodeInvalidEncoding}},
		{"lone low surrogate escape", event(http.MethodPost, "/things", b.user, `{"tags":["\uDC31"]}`), 400, errorDetail{Code: CodeInvalidEncoding}},
		{"reversed pair", event(http.MethodPost, "/things", b.user, `{"name":"\udc31\ud83d"}`), 400, errorDetail{Code: CodeInvalidEncoding}},
		{"413 by header", event(http.MethodPost, "/things", b.user, `{}`, "Content-Length", "129"), 413, errorDetail{Code: CodePayloadTooLarge, Message: "the body must be at most 128 bytes"}},
		{"413 by header on a GET", event(http.MethodGet, "/things/1", b.user, ``, "Content-Length", "100000"), 413, errorDetail{Code: CodePayloadTooLarge}},
		{"413 by actual size", event(http.MethodPost, "/things", b.user, `{"name":"`+strings.Repeat("x", 120)+`"}`), 413, errorDetail{Code: CodePayloadTooLarge}},
		{"413 by actual size with a lying header", event(http.MethodPost, "/things", b.user, `{"name":"`+strings.Repeat("x", 120)+`"}`, "Content-Length", "10"), 413, errorDetail{Code: CodePayloadTooLarge}},
		{"413 by decoded base64 size", base64Event(http.MethodPost, "/things", b.user, []byte(`{"name":"`+strings.Repeat("x", 120)+`"}`)), 413, errorDetail{Code: CodePayloadTooLarge}},
		{"415 text/plain", event(http.MethodPost, "/things", b.user, `{}`, "Content-Type", "text/plain"), 415, errorDetail{Code: CodeUnsupportedMediaType}},
		{"415 missing", event(http.MethodPost, "/things", b.user, `{}`, "Content-Type", ""), 415, errorDetail{Code: CodeUnsupportedMediaType}},
		{"415 json lookalike", event(http.MethodPost, "/things", b.user, `{}`, "Content-Type", "application/jsonp"), 415, errorDetail{Code: CodeUnsupportedMediaType}},
		{"415 other charset", event(http.MethodPost, "/things", b.user, `{}`, "Content-Type", "application/json; charset=latin1"), 415, errorDetail{Code: CodeUnsupportedMediaType}},
		{"401 no token", event(http.MethodGet, "/things/1", "", ""), 401, errorDetail{Code: CodeUnauthorized, Message: "missing bearer token"}},
		{"401 garbage token", event(http.MethodGet, "/things/1", "junk", ""), 401, errorDetail{Code: CodeUnauthorized, Message: "malformed token"}},
		{"401 wrong secret", event(http.MethodGet, "/things/1", mintWith(t, []byte("other"), time.Hour), ""), 401, errorDetail{Code: CodeUnauthorized, Message: "bad signature"}},
		{"401 expired", event(http.MethodGet, "/things/1", mintWith(t, secret, -time.Hour), ""), 401, errorDetail{Code: CodeUnauthorized, Message: "token expired"}},
		{"401 before the body is read", event(http.MethodPost, "/things", "", `{"name":`), 401, errorDetail{Code: CodeUnauthorized}},
		{"403 user on admin", event(http.MethodGet, "/admin", b.user, ""), 403, errorDetail{Code: CodeForbidden}},
		{"403 service on admin", event(http.MethodGet, "/admin", b.service, ""), 403, errorDetail{Code: CodeForbidden}},
		{"403 service writes", event(http.MethodPost, "/things/7/cancel", b.service, ""), 403, errorDetail{Code: CodeForbidden}},
		{"403 service creates", event(http.MethodPost, "/things", b.service, `{"name":"x"}`), 403, errorDetail{Code: CodeForbidden}},
		{"403 user on read-only", event(http.MethodGet, "/read", b.user, ""), 403, errorDetail{Code: CodeForbidden}},
		{"404 unknown path", event(http.MethodGet, "/nothing", b.user, ""), 404, errorDetail{Code: CodeNotFound}},
		{"404 too deep", event(http.MethodGet, "/things/1/2/3", b.user, ""), 404, errorDetail{Code: CodeNotFound}},
		{"404 empty parameter", event(http.MethodPost, "/things//cancel", b.user, ""), 404, errorDetail{Code: CodeNotFound}},
		{"404 broken escape", event(http.MethodGet, "/things/%zz", b.user, ""), 404, errorDetail{Code: CodeNotFound}},
		{"404 before auth", event(http.MethodGet, "/nothing", "", ""), 404, errorDetail{Code: CodeNotFound}},
		{"405 wrong method", event(http.MethodDelete, "/things", b.user, ""), 405, errorDetail{Code: CodeMethodNotAllowed, Message: "this path accepts POST"}},
		{"405 several methods", event(http.MethodPut, "/things/special", b.user, ""), 405, errorDetail{Code: CodeMethodNotAllowed, Message: "this path accepts GET, HEAD"}},
		{"405 a literal path hides the parameter route's methods", event(http.MethodGet, "/things/bulk", b.user, ""), 405, errorDetail{Code: CodeMethodNotAllowed, Message: "this path accepts POST"}},
		{"405 OPTIONS", event(http.MethodOptions, "/things/bulk", b.user, ""), 405, errorDetail{Code: CodeMethodNotAllowed, Message: "this path accepts POST"}},
		{"500 panic", event(http.MethodGet, "/boom", "", ""), 500, errorDetail{Code: CodeInternal, Message: "internal error; quote request id req-GET-boom when reporting it"}},
		{"500 error", event(http.MethodGet, "/fail", "", ""), 500, errorDetail{Code: CodeInternal}},
		{"500 no status", event(http.MethodGet, "/nostatus", "", ""), 500, errorDetail{Code: CodeInternal}},
		{"wrapped *Error", event(http.MethodGet, "/wrapped", "", ""), 409, errorDetail{Code: "already_finished", Message: "the job has finished"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			resp := serve(t, b.rt, tt.ev)
			if diff := cmp.Diff(tt.status, resp.StatusCode); diff != "" {
				t.Fatalf("status (-want +got):\n%s\nbody: %s", diff, resp.Body)
			}
			got := errorOf(t, resp)
			if got.Message == "" {
				t.Errorf("error without a message: %+v", got)
			}
			if tt.want.Message == "" {
				got.Message = ""
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(ContentTypeJSON, resp.Headers["Content-Type"]); diff != "" {
				t.Errorf("Content-Type (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.ev.RequestContext.RequestID, resp.Headers["X-Request-Id"]); diff != "" {
				t.Errorf("X-Request-Id (-want +got):\n%s", diff)
			}
			if strings.Contains(resp.Body, leak) || strings.Contains(resp.Body, "secret detail") || strings.Contains(resp.Body, "goroutine") {
				t.Errorf("internal detail leaked: %s", resp.Body)
			}
		})
	}
}

func mintWith(t *testing.T, key []byte, ttl time.Duration) string {
	t.Helper()
	s, err := Mint(key, Claims{Subject: "u1", Role: RoleUser, ExpiresAt: time.Now().Add(ttl)})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestServeSuccess(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tests := []struct {
		name   string
		ev     events.APIGatewayV2HTTPRequest
		status int
		body   string
	}{
		{"decoded", event(http.MethodPost, "/things", b.user, `{"name":"a","count":2,"items":[{"uploadId":"u"}]}`), 201,
			`{"name":"a","count":2,"tags":null,"params":{"title":"","size":null},"items":[{"uploadId":"u"}],"at":null}`},
		{"base64 body", base64Event(http.MethodPost, "/things", b.user, []byte(`{"name":"b64"}`)), 201,
			`{"name":"b64","count":0,"tags":null,"params":{"title":"","size":null},"items":null,"at":null}`},
		{"unpadded base64 body", func() events.APIGatewayV2HTTPRequest {
			ev := event(http.MethodPost, "/raw", "", base64.RawStdEncoding.EncodeToString([]byte("ab")))
			ev.IsBase64Encoded = true
			return ev
		}(), 200, `{"bytes":2}`},
		{"binary base64 body at the limit", base64Event(http.MethodPost, "/raw", "", bytes.Repeat([]byte{0xff}, 128)), 200, `{"bytes":128}`},
		{"body at the limit", event(http.MethodPost, "/raw", "", strings.Repeat("x", 128), "Content-Length", "128"), 200, `{"bytes":128}`},
		{"charset utf-8", event(http.MethodPost, "/things", b.user, `{"name":"c"}`, "Content-Type", "Application/JSON; charset=UTF-8"), 201,
			`{"name":"c","count":0,"tags":null,"params":{"title":"","size":null},"items":null,"at":null}`},
		{"trailing whitespace", event(http.MethodPost, "/things", b.user, "{\"name\":\"w\"}\n\t "), 201,
			`{"name":"w","count":0,"tags":null,"params":{"title":"","size":null},"items":null,"at":null}`},
		{"escaped surrogate pair", event(http.MethodPost, "/things", b.user, `{"name":"\ud83d\udc31 \u00f1 \"\\ud800\\"}`), 201,
			`{"name":"🐱 ñ \"\\ud800\\","count":0,"tags":null,"params":{"title":"","size":null},"items":null,"at":null}`},
		{"letters of every script", event(http.MethodPost, "/things", b.user, `{"name":"кот 🐱 ñ"}`), 201,
			`{"name":"кот 🐱 ñ","count":0,"tags":null,"params":{"title":"","size":null},"items":null,"at":null}`},
		{"field names in another case", event(http.MethodPost, "/things", b.user, `{"NAME":"n"}`), 201,
			`{"name":"n","count":0,"tags":null,"params":{"title":"","size":null},"items":null,"at":null}`},
		{"path parameter, claims and query", event(http.MethodGet, "/things/t1?status=queued&status=failed", b.user, ""), 200, `{"id":"t1","status":"queued","sub":"u-user"}`},
		{"escaped slash stays in its parameter", event(http.MethodGet, "/things/a%2Fb", b.user, ""), 200, `{"id":"a/b","status":"","sub":"u-user"}`},
		{"trailing slash", event(http.MethodGet, "/things/t2/", b.admin, ""), 200, `{"id":"t2","status":"","sub":"u-admin"}`},
		{"literal beats parameter", event(http.MethodGet, "/things/special", b.user, ""), 200, `{"route":"special"}`},
		{"parameter in the middle", event(http.MethodPost, "/things/t3/cancel", b.user, ""), 200, `{"cancelled":"t3"}`},
		{"header case does not matter", event(http.MethodGet, "/things/t4", "", "", "AUTHORIZATION", "Bearer "+b.user), 200, `{"id":"t4","status":"","sub":"u-user"}`},
		{"admin on admin", event(http.MethodGet, "/admin", b.admin, ""), 200, `"admin"`},
		{"service reads", event(http.MethodGet, "/read", b.service, ""), 200, `"read"`},
		{"service reads a user route", event(http.MethodGet, "/things/7", b.service, ""), 200, `{"id":"7","status":"","sub":"u-service"}`},
		{"admin writes", event(http.MethodPost, "/things/7/cancel", b.admin, ""), 200, `{"cancelled":"7"}`},
		{"admin reads", event(http.MethodGet, "/read", b.admin, ""), 200, `"read"`},
		{"public ignores tokens", event(http.MethodGet, "/public", "junk", ""), 200, `{"sub":""}`},
		{"no content", event(http.MethodDelete, "/empty", "", ""), 204, ``},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			resp := serve(t, b.rt, tt.ev)
			if diff := cmp.Diff(tt.status, resp.StatusCode); diff != "" {
				t.Fatalf("status (-want +got):\n%s\nbody: %s", diff, resp.Body)
			}
			if diff := cmp.Diff(tt.body, strings.TrimSpace(resp.Body)); diff != "" {
				t.Errorf("body (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(ContentTypeJSON, resp.Headers["Content-Type"]); diff != "" {
				t.Errorf("Content-Type (-want +got):\n%s", diff)
			}
		})
	}
}

func TestServeHeaders(t *testing.T) {
	t.Parallel()
	b := setup(t)
	noID := event(http.MethodGet, "/public", "", "")
	noID.RequestContext.RequestID = ""
	tests := []struct {
		name string
		ev   events.APIGatewayV2HTTPRequest
		want map[string]string // "" means: present, any value
	}{
		{"request id from API Gateway", event(http.MethodGet, "/public", "", ""),
			map[string]string{"Content-Type": ContentTypeJSON, "X-Request-Id": "req-GET-public"}},
		{"request id generated", noID, map[string]string{"Content-Type": ContentTypeJSON, "X-Request-Id": ""}},
		{"Allow on 405", event(http.MethodPost, "/things/t1", b.user, ""),
			map[string]string{"Content-Type": ContentTypeJSON, "X-Request-Id": "req-POST-things-t1", "Allow": "GET, HEAD"}},
		{"Allow on 405 lists the literal path's methods only", event(http.MethodDelete, "/things/bulk", b.user, ""),
			map[string]string{"Content-Type": ContentTypeJSON, "X-Request-Id": "req-DELETE-things-bulk", "Allow": "POST"}},
		{"WWW-Authenticate on 401", event(http.MethodGet, "/admin", "", ""),
			map[string]string{"Content-Type": ContentTypeJSON, "X-Request-Id": "req-GET-admin", "WWW-Authenticate": `Bearer realm="conveyor"`}},
		{"handler's content type kept", event(http.MethodGet, "/stream", "", ""),
			map[string]string{"content-type": "text/event-stream", "X-Request-Id": "req-GET-stream"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := serve(t, b.rt, tt.ev).Headers
			for k, v := range tt.want {
				if v == "" && got[k] != "" {
					got[k] = ""
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("headers (-want +got):\n%s", diff)
			}
		})
	}
	if id := serve(t, b.rt, noID).Headers["X-Request-Id"]; !strings.HasPrefix(id, "req_") || len(id) < 20 {
		t.Errorf("generated request id %q", id)
	}
}

// TestHead: HEAD is answered wherever GET is, by the GET route, with the
// same status and headers as GET (Content-Length the GET body's), and no
// body; on a path without GET it is 405 like any other method.
func TestHead(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, tc := range []struct {
		name, path, tok string
		status          int
		allow           string
	}{
		{"a user route", "/things/t1?status=queued", b.user, 200, ""},
		{"a literal route", "/things/special", b.user, 200, ""},
		{"a public route", "/public", "", 200, ""},
		{"a route with another content type", "/stream", "", 200, ""},
		{"no token", "/things/t1", "", 401, ""},
		{"a user on an admin route", "/admin", b.user, 403, ""},
		{"an unknown path", "/nothing", b.user, 404, ""},
		{"a handler's error", "/wrapped", "", 409, ""},
		{"a path without GET", "/things/bulk", b.user, 405, "POST"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			get := serve(t, b.rt, event(http.MethodGet, tc.path, tc.tok, ""))
			head := serve(t, b.rt, event(http.MethodHead, tc.path, tc.tok, ""))
			if head.StatusCode != tc.status {
				t.Fatalf("HEAD %s: %d, want %d (%s)", tc.path, head.StatusCode, tc.status, head.Body)
			}
			if head.Body != "" || head.IsBase64Encoded {
				t.Errorf("HEAD %s has a body: %q", tc.path, head.Body)
			}
			if tc.allow != "" {
				if head.Headers["Allow"] != tc.allow {
					t.Errorf("Allow = %q, want %q", head.Headers["Allow"], tc.allow)
				}
				return
			}
			if get.StatusCode != head.StatusCode {
				t.Errorf("GET %d, HEAD %d", get.StatusCode, head.StatusCode)
			}
			want := maps.Clone(get.Headers)
			want["X-Request-Id"] = "req-HEAD" + strings.TrimPrefix(want["X-Request-Id"], "req-GET")
			want["Content-Length"] = strconv.Itoa(len(get.Body))
			if diff := cmp.Diff(want, head.Headers); diff != "" {
				t.Errorf("HEAD headers (-GET's +HEAD's):\n%s", diff)
			}
		})
	}
	// An explicit HEAD route wins over GET's.
	own := setup(t)
	own.rt.Handle(http.MethodHead, "/public", Public, func(*Request) (Response, error) {
		return Response{StatusCode: http.StatusNoContent, Headers: map[string]string{}}, nil
	})
	if got := serve(t, own.rt, event(http.MethodHead, "/public", "", "")); got.StatusCode != http.StatusNoContent {
		t.Errorf("HEAD with its own route: %d, want 204", got.StatusCode)
	}
}

func TestAccessLog(t *testing.T) {
	t.Parallel()
	b := setup(t)
	body := `{"name":"` + leak + `"}`
	tests := []struct {
		name  string
		ev    events.APIGatewayV2HTTPRequest
		want  map[string]any // the access line, duration_ms excepted
		error string         // a further error record must contain this
	}{
		{"success", event(http.MethodPost, "/things", b.user, body),
			map[string]any{"level": "INFO", "msg": "request", "method": "POST", "route": "/things", "status": 201.0, "request_id": "req-POST-things", "user": "u-user"}, ""},
		{"route pattern, not path", event(http.MethodGet, "/things/t9", b.admin, ""),
			map[string]any{"level": "INFO", "msg": "request", "method": "GET", "route": "/things/{id}", "status": 200.0, "request_id": "req-GET-things-t9", "user": "u-admin"}, ""},
		{"refused token", event(http.MethodGet, "/admin", "junk"+leak, ""),
			map[string]any{"level": "INFO", "msg": "request", "method": "GET", "route": "/admin", "status": 401.0, "request_id": "req-GET-admin", "user": ""}, ""},
		{"unknown path", event(http.MethodGet, "/nope", b.user, ""),
			map[string]any{"level": "INFO", "msg": "request", "method": "GET", "route": "", "status": 404.0, "request_id": "req-GET-nope", "user": ""}, ""},
		{"error", event(http.MethodGet, "/fail", "", ""),
			map[string]any{"level": "ERROR", "msg": "request", "method": "GET", "route": "/fail", "status": 500.0, "request_id": "req-GET-fail", "user": ""}, "db password=" + leak},
		{"panic", event(http.MethodGet, "/boom", "", ""),
			map[string]any{"level": "ERROR", "msg": "request", "method": "GET", "route": "/boom", "status": 500.0, "request_id": "req-GET-boom", "user": ""}, "secret detail " + leak},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			serve(t, b.rt, tt.ev)
			var access []map[string]any
			var other []string
			for _, l := range b.log.lines(t, tt.ev.RequestContext.RequestID) {
				raw, _ := json.Marshal(l)
				if l["msg"] != "request" {
					other = append(other, string(raw))
					continue
				}
				if strings.Contains(string(raw), leak) {
					t.Errorf("the access log carries a secret: %s", raw)
				}
				if _, ok := l["duration_ms"].(float64); !ok {
					t.Errorf("no duration_ms: %s", raw)
				}
				delete(l, "duration_ms")
				delete(l, "time")
				access = append(access, l)
			}
			if diff := cmp.Diff([]map[string]any{tt.want}, access); diff != "" {
				t.Errorf("access log (-want +got):\n%s", diff)
			}
			if tt.error != "" && (len(other) != 1 || !strings.Contains(other[0], tt.error)) {
				t.Errorf("error records %q, want one containing %q", other, tt.error)
			}
		})
	}
}

func TestDecodeOutsideTheRouter(t *testing.T) {
	t.Parallel()
	big := `{"name":"` + strings.Repeat("x", MaxBodyDefault) + `"}`
	tests := []struct {
		name  string
		body  string
		v     any
		limit int64 // DecodeWithLimit when set
		want  error
	}{
		{"default limit", big, &thing{}, 0, tooLarge(MaxBodyDefault)},
		{"explicit limit", `{"name":"0123456789"}`, &thing{}, 10, tooLarge(10)},
		{"explicit limit met", `{"name":"0"}`, &thing{}, 12, nil},
		{"non-positive limit means the default", big, &thing{}, -1, tooLarge(MaxBodyDefault)},
		{"under the default limit", `{"name":"` + strings.Repeat("x", 1000) + `"}`, &thing{}, 0, nil},
		{"not a pointer", `{}`, thing{}, 0, errors.New("decoding the body: json: Unmarshal(non-pointer httpapi.thing)")},
		{"map target", `{"a":"x"}`, &map[string]int{}, 0, &Error{Status: 400, Code: CodeInvalidType, Field: "a", Message: "a must be an integer, not a string"}},
		{"own error from UnmarshalJSON", `{"v":1}`, &strict{}, 0, BadRequest("v", "v is never acceptable")},
		{"embedded struct fields are known", `{"outer":1,"inner":2,"nope":3}`, &outer{}, 0, &Error{Status: 400, Code: CodeUnknownField, Field: "nope", Message: `unknown field "nope"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := &Request{Raw: events.APIGatewayV2HTTPRequest{Body: tt.body, Headers: map[string]string{"Content-Type": "application/json"}}}
			var err error
			if tt.limit != 0 {
				err = DecodeWithLimit(r, tt.v, tt.limit)
			} else {
				err = Decode(r, tt.v)
			}
			if diff := cmp.Diff(fmt.Sprint(tt.want), fmt.Sprint(err)); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
			var want, got *Error
			if errors.As(tt.want, &want) {
				if !errors.As(err, &got) {
					t.Fatalf("error %T, want *Error", err)
				}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("error (-want +got):\n%s", diff)
				}
			}
		})
	}
}

type strict struct{}

func (*strict) UnmarshalJSON([]byte) error { return BadRequest("v", "v is never acceptable") }

type Inner struct {
	Inner int `json:"inner"`
}

type outer struct {
	Inner
	Outer int `json:"outer"`
}

func TestHandleRefusesWiringMistakes(t *testing.T) {
	t.Parallel()
	ok := func(*Request) (Response, error) { return NoContent(), nil }
	withVerifier := func() *Router { return NewRouter(Options{Verifier: NewVerifier(secret, nil)}) }
	tests := []struct {
		name     string
		rt       *Router
		method   string
		pattern  string
		access   Access
		h        HandlerFunc
		existing string
	}{
		{"zero access", withVerifier(), "GET", "/a", 0, ok, ""},
		{"unknown access", withVerifier(), "GET", "/a", Writer + 1, ok, ""},
		{"any-user route that writes", withVerifier(), "POST", "/a", AnyUser, ok, ""},
		{"read-only route that writes", withVerifier(), "DELETE", "/a", ReadOnly, ok, ""},
		{"protected route without a verifier", NewRouter(Options{}), "GET", "/a", AnyUser, ok, ""},
		{"nil handler", withVerifier(), "GET", "/a", Public, nil, ""},
		{"lower-case method", withVerifier(), "get", "/a", Public, ok, ""},
		{"relative pattern", withVerifier(), "GET", "a/b", Public, ok, ""},
		{"empty segment", withVerifier(), "GET", "/a//b", Public, ok, ""},
		{"empty parameter", withVerifier(), "GET", "/a/{}", Public, ok, ""},
		{"repeated parameter", withVerifier(), "GET", "/a/{id}/{id}", Public, ok, ""},
		{"brace inside a segment", withVerifier(), "GET", "/a/x{id}", Public, ok, ""},
		{"duplicate", withVerifier(), "GET", "/a/{id}", Public, ok, "/a/{other}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if tt.existing != "" {
				tt.rt.Handle(tt.method, tt.existing, tt.access, ok)
			}
			defer func() {
				if recover() == nil {
					t.Errorf("Handle(%q, %q, %v) did not panic", tt.method, tt.pattern, tt.access)
				}
			}()
			tt.rt.Handle(tt.method, tt.pattern, tt.access, tt.h)
		})
	}
}

func TestQuery(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		raw  events.APIGatewayV2HTTPRequest
		want string
	}{
		{"raw query string, first value", events.APIGatewayV2HTTPRequest{RawQueryString: "limit=5&limit=6", QueryStringParameters: map[string]string{"limit": "5,6"}}, "5"},
		{"escaped", events.APIGatewayV2HTTPRequest{RawQueryString: "limit=%35%30"}, "50"},
		{"absent from the raw query", events.APIGatewayV2HTTPRequest{RawQueryString: "status=queued"}, ""},
		{"parameters map only", events.APIGatewayV2HTTPRequest{QueryStringParameters: map[string]string{"limit": "7"}}, "7"},
		{"nothing", events.APIGatewayV2HTTPRequest{}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := &Request{Raw: tt.raw}
			if diff := cmp.Diff(tt.want, r.Query("limit")); diff != "" {
				t.Errorf("Query (-want +got):\n%s", diff)
			}
		})
	}
}

func TestErrorHelpers(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		got  *Error
		want *Error
	}{
		{"Errorf", Errorf(429, "throttled", "slow down for %ds", 3), &Error{Status: 429, Code: "throttled", Message: "slow down for 3s"}},
		{"BadRequest", BadRequest("params.title", "%s is too long", "params.title"), &Error{Status: 400, Code: CodeInvalidRequest, Field: "params.title", Message: "params.title is too long"}},
		{"NotFound", NotFound(), &Error{Status: 404, Code: CodeNotFound, Message: "no such resource"}},
		{"Conflict", Conflict("invalid_transition", "finished"), &Error{Status: 409, Code: "invalid_transition", Message: "finished"}},
		{"Unprocessable", Unprocessable("upload_not_confirmed", "items.0.uploadId", "not yet"), &Error{Status: 422, Code: "upload_not_confirmed", Field: "items.0.uploadId", Message: "not yet"}},
		{"Forbidden", Forbidden(), &Error{Status: 403, Code: CodeForbidden, Message: "your role may not do this"}},
		{"Unauthorized", Unauthorized("token expired"), &Error{Status: 401, Code: CodeUnauthorized, Message: "token expired"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if diff := cmp.Diff(tt.want, tt.got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	resp := render(BadRequest("", "no field"))
	if diff := cmp.Diff(`{"error":{"code":"invalid_request","message":"no field"}}`, strings.TrimSpace(resp.Body)); diff != "" {
		t.Errorf("a field-less error renders a field (-want +got):\n%s", diff)
	}
}

func TestJSON(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		status int
		v      any
		want   Response
	}{
		{"object", 200, map[string]string{"a": "<b>&"}, Response{StatusCode: 200, Headers: map[string]string{"Content-Type": ContentTypeJSON}, Body: "{\"a\":\"<b>&\"}\n"}},
		{"unencodable", 200, func() {}, Response{StatusCode: 500, Headers: map[string]string{"Content-Type": ContentTypeJSON},
			Body: `{"error":{"code":"internal","message":"the response could not be rendered"}}`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if diff := cmp.Diff(tt.want, JSON(tt.status, tt.v)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// FuzzDecode: whatever the body, Decode into a pointer never panics and
// fails only with a 400 or 413 *Error that has a code and a message.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`{"name":"a","items":[{"uploadId":"u"}]}`, `{"items":[{},{"x":1}]}`, `{"params":{"size":1e400}}`,
		`{"at":"2026-01-02T15:04:05Z"}`, `[]`, `null`, `{"a":`, `{} {}`, `{"params":{"title":[1,{"a":2}]}}`,
	} {
		f.Add([]byte(s), false)
	}
	f.Fuzz(func(t *testing.T, body []byte, b64 bool) {
		ev := events.APIGatewayV2HTTPRequest{Headers: map[string]string{"content-type": "application/json"}, Body: string(body)}
		if b64 {
			ev.Body, ev.IsBase64Encoded = base64.StdEncoding.EncodeToString(body), true
		}
		var v thing
		err := Decode(&Request{Raw: ev}, &v)
		if err == nil {
			return
		}
		var e *Error
		if !errors.As(err, &e) {
			t.Fatalf("Decode(%q) = %v (%T), want an *Error", body, err, err)
		}
		if e.Status != http.StatusBadRequest && e.Status != http.StatusRequestEntityTooLarge {
			t.Fatalf("Decode(%q) status %d", body, e.Status)
		}
		if e.Code == "" || e.Message == "" {
			t.Fatalf("Decode(%q) = %+v: no code or message", body, e)
		}
	})
}

// TestKeyUnavailable: when the token key cannot be had (its background
// read failed), a request with a token gets a 503 it may retry, never a
// 401 nor a 500; a public route and a request without a token never ask
// for the key.
func TestKeyUnavailable(t *testing.T) {
	t.Parallel()
	var asked atomic.Int32
	v := NewVerifierFunc(func(context.Context) ([]byte, error) {
		asked.Add(1)
		return nil, errors.New("reading secret arn:aws:secretsmanager:eu-west-1:123456789012:secret:jwt: timeout")
	}, nil)
	rt := NewRouter(Options{Verifier: v, Logger: slog.New(slog.DiscardHandler)})
	rt.Handle(http.MethodGet, "/mine", AnyUser, func(r *Request) (Response, error) { return JSON(http.StatusOK, "mine"), nil })
	rt.Handle(http.MethodGet, "/public", Public, func(r *Request) (Response, error) { return JSON(http.StatusOK, "public"), nil })

	if resp := serve(t, rt, event(http.MethodGet, "/public", "", "")); resp.StatusCode != http.StatusOK {
		t.Errorf("public route: %d", resp.StatusCode)
	}
	if resp := serve(t, rt, event(http.MethodGet, "/mine", "", "")); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("no token: %d, want 401", resp.StatusCode)
	}
	if n := asked.Load(); n != 0 {
		t.Errorf("the key was asked for %d times by requests that need none", n)
	}
	resp := serve(t, rt, event(http.MethodGet, "/mine", token(t, RoleUser), ""))
	if got := errorOf(t, resp); resp.StatusCode != http.StatusServiceUnavailable || got.Code != CodeAuthUnavailable {
		t.Errorf("key unavailable: %d %+v, want 503 %s", resp.StatusCode, got, CodeAuthUnavailable)
	}
	if strings.Contains(resp.Body, "arn:") {
		t.Errorf("the answer names the secret: %s", resp.Body)
	}
}

// TestDecodeNoNullsRefusesANullMember: encoding/json reads a member given
// null as absent; where the contract allows no null (the schema's type is
// a string), the member is a 400 naming it (schemathesis, on a seeded
// stack: a redelivery with "cursor": null answered 202).
func TestDecodeNoNullsRefusesANullMember(t *testing.T) {
	t.Parallel()
	type body struct {
		Since  string `json:"since,omitempty"`
		Cursor string `json:"cursor,omitempty"`
	}
	for _, tt := range []struct {
		body string
		want error
	}{
		{`{"since":"2026-01-01T00:00:00Z"}`, nil},
		{`{"cursor":null,"since":"2026-01-01T00:00:00Z"}`, &Error{Status: 400, Code: CodeInvalidType, Field: "cursor", Message: "cursor must not be null: leave it out instead"}},
		{`{"since":null,"cursor":null}`, &Error{Status: 400, Code: CodeInvalidType, Field: "cursor", Message: "cursor must not be null: leave it out instead"}},
		{`{"since":1}`, &Error{Status: 400, Code: CodeInvalidType, Field: "since", Message: "since must be a string, not a number"}},
	} {
		r := &Request{Raw: events.APIGatewayV2HTTPRequest{Body: tt.body, Headers: map[string]string{"Content-Type": "application/json"}}}
		var v body
		if diff := cmp.Diff(fmt.Sprint(tt.want), fmt.Sprint(DecodeNoNulls(r, &v))); diff != "" {
			t.Errorf("%s: error (-want +got):\n%s", tt.body, diff)
		}
	}
}
