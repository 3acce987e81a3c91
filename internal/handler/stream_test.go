package handler_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/conveyor/conveyor/internal/handler"
	"github.com/conveyor/conveyor/internal/httpapi"
	"github.com/conveyor/conveyor/internal/stream"
)

type nopSession struct{}

func (nopSession) Run(context.Context, io.Writer, func()) error { return nil }
func (nopSession) Close()                                       {}

// TestStreamRoutesRolesAndErrors: each of the four stream paths reaches
// the opener with the right request; admin paths need admin or service;
// the opener's errors become 404 and 429 JSON errors.
func TestStreamRoutesRolesAndErrors(t *testing.T) {
	t.Parallel()
	const job = "job_aaaaaaaaaaaaaaaaaaaaaaaaaa"
	var got stream.Request
	var fail error
	open := func(_ context.Context, r stream.Request) (handler.StreamSession, error) {
		got = r
		if fail != nil {
			return nil, fail
		}
		return nopSession{}, nil
	}
	tokens := map[string]httpapi.Claims{"user": {Subject: "u1", Role: httpapi.RoleUser}, "admin": {Subject: "ops", Role: httpapi.RoleAdmin},
		"service": {Subject: "mon", Role: httpapi.RoleService}}
	verify := func(_ context.Context, h string) (httpapi.Claims, error) {
		if h == "keyless" {
			return httpapi.Claims{}, fmt.Errorf("%w: reading secret arn:jwt: timeout", httpapi.ErrKeyUnavailable)
		}
		c, ok := tokens[h]
		if !ok {
			return httpapi.Claims{}, errors.New("bad token")
		}
		return c, nil
	}
	h := handler.StreamHandler(open, verify, slog.New(slog.DiscardHandler))
	call := func(token, path string) (*events.LambdaFunctionURLStreamingResponse, string) {
		resp, err := h(context.Background(), events.LambdaFunctionURLRequest{RawPath: path, Headers: map[string]string{"authorization": token, "last-event-id": "7"}})
		if err != nil {
			t.Fatal(err)
		}
		var body struct {
			Error struct{ Code string } `json:"error"`
		}
		if resp.StatusCode != 200 {
			_ = json.NewDecoder(resp.Body).Decode(&body)
		} else {
			_, _ = io.Copy(io.Discard, resp.Body)
		}
		return resp, body.Error.Code
	}
	for _, tc := range []struct {
		token, path string
		status      int
		want        stream.Request
	}{
		{"user", "/v1/events", 200, stream.Request{Caller: "u1", LastEventID: "7"}},
		{"user", "/v1/jobs/" + job + "/events", 200, stream.Request{Caller: "u1", JobID: job, LastEventID: "7"}},
		{"admin", "/v1/admin/events", 200, stream.Request{Caller: "ops", Admin: true, LastEventID: "7"}},
		{"service", "/v1/admin/jobs/" + job + "/events", 200, stream.Request{Caller: "mon", JobID: job, Admin: true, LastEventID: "7"}},
		{"user", "/v1/admin/events", 403, stream.Request{}},
		{"user", "/v1/admin/jobs/" + job + "/events", 403, stream.Request{}},
		{"nobody", "/v1/events", 401, stream.Request{}},
		{"keyless", "/v1/events", 503, stream.Request{}}, // the key's read failed: not the caller's fault
		{"user", "/v1/jobs//events", 404, stream.Request{}},
		{"user", "/v1/other", 404, stream.Request{}},
	} {
		got = stream.Request{}
		resp, _ := call(tc.token, tc.path)
		if resp.StatusCode != tc.status || got != tc.want {
			t.Errorf("%s %s: %d %+v, want %d %+v", tc.token, tc.path, resp.StatusCode, got, tc.status, tc.want)
		}
	}
	// Another method: 405 naming the one the streams answer (RFC 9110).
	resp, err := h(context.Background(), events.LambdaFunctionURLRequest{RawPath: "/v1/events", Headers: map[string]string{"authorization": "user"},
		RequestContext: events.LambdaFunctionURLRequestContext{HTTP: events.LambdaFunctionURLRequestContextHTTPDescription{Method: "DELETE"}}})
	if err != nil || resp.StatusCode != 405 || resp.Headers["Allow"] != "GET" {
		t.Errorf("DELETE /v1/events: %v %+v, want 405 with Allow: GET", err, resp)
	}
	fail = stream.ErrTooMany
	if resp, code := call("user", "/v1/events"); resp.StatusCode != 429 || code != "too_many_streams" || resp.Headers["Retry-After"] == "" {
		t.Errorf("beyond the cap: %d %q %v", resp.StatusCode, code, resp.Headers)
	}
	// The table failed under the lease or the first reads: 503 with
	// Retry-After, the caller's request was fine (an EventSource retries).
	fail = fmt.Errorf("taking a stream slot: %w", errors.New("operation error DynamoDB: PutItem, exceeded maximum number of attempts"))
	if resp, code := call("user", "/v1/events"); resp.StatusCode != 503 || code != "stream_unavailable" || resp.Headers["Retry-After"] == "" {
		t.Errorf("the table failing: %d %q %v, want 503 stream_unavailable with Retry-After", resp.StatusCode, code, resp.Headers)
	}
	fail = stream.ErrNotFound
	if resp, code := call("user", "/v1/jobs/"+job+"/events"); resp.StatusCode != 404 || code != "not_found" {
		t.Errorf("a job not the caller's: %d %q", resp.StatusCode, code)
	}
}

// deadlined writes one event and tells the deadline it was given.
type deadlined struct{ deadline chan time.Time }

func (s deadlined) Run(ctx context.Context, w io.Writer, _ func()) error {
	_, _ = io.WriteString(w, "event: snapshot\ndata: {}\n\n")
	dl, _ := ctx.Deadline()
	s.deadline <- dl
	return nil
}
func (deadlined) Close() {}

// TestStreamEndsBeforeTheDeadline: an invocation with a deadline (the
// function's timeout) runs its stream until EndMarginDefault before it, so
// the stream ends cleanly (a whole body, then EOF) and the client resumes
// with Last-Event-ID, rather than having its connection cut at the
// timeout.
func TestStreamEndsBeforeTheDeadline(t *testing.T) {
	t.Parallel()
	verify := func(context.Context, string) (httpapi.Claims, error) {
		return httpapi.Claims{Subject: "u1", Role: httpapi.RoleUser}, nil
	}
	sess := deadlined{deadline: make(chan time.Time, 1)}
	open := func(context.Context, stream.Request) (handler.StreamSession, error) { return sess, nil }
	h := handler.StreamHandler(open, verify, slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	invocation, _ := ctx.Deadline()
	resp, err := h(ctx, events.LambdaFunctionURLRequest{RawPath: "/v1/events", Headers: map[string]string{"authorization": "t"}})
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("open: %v %+v", err, resp)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil || string(body) != "event: snapshot\ndata: {}\n\n" {
		t.Fatalf("body %q, %v; want the event and a clean end", body, err)
	}
	if got := invocation.Sub(<-sess.deadline); got != handler.EndMarginDefault {
		t.Errorf("the stream's deadline is %s before the invocation's, want %s", got, handler.EndMarginDefault)
	}
}

// TestEndBefore: EndMarginDefault before the deadline, or halfway when
// less than two margins are left.
func TestEndBefore(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct{ left, want time.Duration }{
		{5 * time.Minute, 5*time.Minute - handler.EndMarginDefault},
		{2 * handler.EndMarginDefault, handler.EndMarginDefault},
		{2 * time.Second, time.Second},
		{0, 0},
	} {
		if got := handler.EndBefore(now.Add(tc.left), now).Sub(now); got != tc.want {
			t.Errorf("%s left: ends after %s, want %s", tc.left, got, tc.want)
		}
	}
}
