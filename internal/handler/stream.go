package handler

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/conveyor/conveyor/internal/aws/secretref"
	"github.com/conveyor/conveyor/internal/aws/store"
	"github.com/conveyor/conveyor/internal/httpapi"
	"github.com/conveyor/conveyor/internal/resources"
	"github.com/conveyor/conveyor/internal/stream"
)

// StreamSession is an opened SSE stream (stream.Session).
type StreamSession interface {
	Run(ctx context.Context, w io.Writer, flush func()) error
	Close()
}

// StreamOpener opens a stream for a request, before any header is sent:
// stream.ErrNotFound, stream.ErrTooMany or another error.
type StreamOpener func(ctx context.Context, req stream.Request) (StreamSession, error)

// OpenStreams adapts a stream.Server.
func OpenStreams(s *stream.Server) StreamOpener {
	return func(ctx context.Context, req stream.Request) (StreamSession, error) { return s.Open(ctx, req) }
}

// StreamHandler is the SSE function's handler, behind a Lambda function URL
// in response-streaming mode, and the only way into the streams: it checks
// the token and the route's role (admin streams need admin or service),
// opens the stream (404 for a job the caller may not see, 429 at once
// beyond the caller's open streams), then streams into the response body
// until a write fails, or, cleanly, once the stream has run its lifetime
// (CONVEYOR_STREAM_LIFETIME) or shortly before the invocation's deadline
// (EndBefore). A function URL does not end a streaming invocation when its
// client goes, so the lifetime bounds what a closed tab holds.
func StreamHandler(open StreamOpener, verify func(context.Context, string) (httpapi.Claims, error), log *slog.Logger) func(context.Context, events.LambdaFunctionURLRequest) (*events.LambdaFunctionURLStreamingResponse, error) {
	return func(ctx context.Context, req events.LambdaFunctionURLRequest) (*events.LambdaFunctionURLStreamingResponse, error) {
		header := func(name string) string {
			for k, v := range req.Headers {
				if strings.EqualFold(k, name) {
					return v
				}
			}
			return ""
		}
		claims, err := verify(ctx, header("Authorization"))
		if errors.Is(err, httpapi.ErrKeyUnavailable) {
			log.ErrorContext(ctx, "token key unavailable", "error", err.Error())
			return streamError(http.StatusServiceUnavailable, "auth_unavailable", "tokens cannot be verified right now; try again shortly"), nil
		}
		if err != nil {
			return streamError(http.StatusUnauthorized, "unauthorized", "a valid bearer token is required"), nil
		}
		sr := stream.Request{Caller: claims.Subject, LastEventID: header("Last-Event-ID")}
		if !streamRoute(req.RawPath, &sr) {
			return streamError(http.StatusNotFound, "not_found", "no such resource"), nil
		}
		if method := req.RequestContext.HTTP.Method; method != "" && method != http.MethodGet {
			resp := streamError(http.StatusMethodNotAllowed, "method_not_allowed", "the event streams answer GET only")
			resp.Headers["Allow"] = http.MethodGet
			return resp, nil
		}
		if sr.Admin && claims.Role != httpapi.RoleAdmin && claims.Role != httpapi.RoleService {
			return streamError(http.StatusForbidden, "forbidden", "the admin event streams need an admin or service token"), nil
		}
		sess, err := open(ctx, sr)
		switch {
		case errors.Is(err, stream.ErrNotFound):
			return streamError(http.StatusNotFound, "not_found", "no such resource"), nil
		case errors.Is(err, stream.ErrTooMany):
			return streamError(http.StatusTooManyRequests, "too_many_streams", "this user already has the most open event streams allowed; close one and retry"), nil
		case err != nil:
			// Opening reads and writes nothing a retry could repeat wrongly
			// (a slot lease, the job, the events after Last-Event-ID): what
			// failed is the table (throttled, timed out), not the request.
			log.ErrorContext(ctx, "opening a stream failed", "error", err)
			return streamError(http.StatusServiceUnavailable, "stream_unavailable", "the stream could not be opened right now; retry shortly"), nil
		}
		return streamResponse(ctx, sess, log), nil
	}
}

// streamError is the stream function's JSON error answer (with
// Retry-After on a 429 and a 503).
func streamError(status int, code, msg string) *events.LambdaFunctionURLStreamingResponse {
	b, _ := json.Marshal(map[string]any{"error": map[string]string{"code": code, "message": msg}})
	h := map[string]string{"Content-Type": "application/json"}
	switch status {
	case http.StatusTooManyRequests:
		h["Retry-After"] = "5"
	case http.StatusServiceUnavailable:
		h["Retry-After"] = "2"
	}
	return &events.LambdaFunctionURLStreamingResponse{StatusCode: status, Headers: h, Body: strings.NewReader(string(b))}
}

// streamRoute sets in sr the stream path names — the caller's events
// (/v1/events), every user's (/v1/admin/events), a job's
// (/v1/jobs/{id}/events, /v1/admin/jobs/{id}/events) — and reports
// whether path is one of them.
func streamRoute(path string, sr *stream.Request) bool {
	jobEvents := func(prefix string) (string, bool) {
		rest, ok := strings.CutPrefix(path, prefix)
		if !ok {
			return "", false
		}
		id, ok := strings.CutSuffix(rest, "/events")
		return id, ok && id != "" && !strings.Contains(id, "/")
	}
	switch {
	case path == "/v1/events":
	case path == "/v1/admin/events":
		sr.Admin = true
	default:
		if id, ok := jobEvents("/v1/admin/jobs/"); ok {
			sr.JobID, sr.Admin = id, true
		} else if id, ok := jobEvents("/v1/jobs/"); ok {
			sr.JobID = id
		} else {
			return false
		}
	}
	return true
}

// streamResponse runs sess into the response's body until the client
// disconnects (ctx ends) or, cleanly, shortly before the invocation's
// deadline (EndBefore), so the client sees the stream's end and resumes
// with Last-Event-ID rather than a connection cut.
func streamResponse(ctx context.Context, sess StreamSession, log *slog.Logger) *events.LambdaFunctionURLStreamingResponse {
	pr, pw := io.Pipe()
	runCtx, cancel := context.WithCancel(ctx)
	if dl, ok := ctx.Deadline(); ok {
		runCtx, cancel = context.WithDeadline(ctx, EndBefore(dl, time.Now()))
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		err := sess.Run(runCtx, pw, nil)
		if err != nil && runCtx.Err() == nil && !errors.Is(err, io.ErrClosedPipe) {
			log.WarnContext(ctx, "stream ended", "error", err)
		}
		pw.CloseWithError(err)
	}()
	body := &streamBody{PipeReader: pr, cancel: cancel, done: done}
	return &events.LambdaFunctionURLStreamingResponse{StatusCode: http.StatusOK, Body: body,
		Headers: map[string]string{"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}}
}

// EndMarginDefault is how long before the invocation's deadline a stream
// ends; an invocation with less than twice that left ends at half of it.
const EndMarginDefault = 2 * time.Second

// EndBefore is when a stream whose invocation ends at deadline stops
// streaming, seen at now.
func EndBefore(deadline, now time.Time) time.Time {
	left := deadline.Sub(now)
	if left < 2*EndMarginDefault {
		return now.Add(left / 2)
	}
	return deadline.Add(-EndMarginDefault)
}

// streamBody is a stream's response body. aws-lambda-go closes it once the
// response has been sent, or once sending failed because the client went
// away — and in that case it then ends the process. Close therefore ends
// the stream and waits (a bounded time) for its slot to be released, so
// that a client that leaves frees its slot at once rather than when the
// slot's lease runs out.
type streamBody struct {
	*io.PipeReader
	cancel context.CancelFunc
	done   <-chan struct{}
}

// releaseWait bounds how long Close waits for the stream to end.
const releaseWait = 5 * time.Second

func (b *streamBody) Close() error {
	b.cancel()
	err := b.PipeReader.Close()
	select {
	case <-b.done:
	case <-time.After(releaseWait):
	}
	return err
}

// Stream is the function serving GET /v1/jobs/{id}/events and GET
// /v1/events (and their admin twins) as Server-Sent Events behind a Lambda
// function URL in RESPONSE_STREAM mode (built with -tags lambda.norpc on
// provided.al2023). It checks the bearer token itself: the function URL's
// auth type is NONE. It reads no secret at cold start: the JWT key is read
// in the background (secretref.JWTKey) and the first stream opened waits
// for it.
var Stream = Function[func(context.Context, events.LambdaFunctionURLRequest) (*events.LambdaFunctionURLStreamingResponse, error)]{
	Name: resources.FuncStream, Resolve: secretref.ExceptJWT, New: NewStream}

// NewStream wires the stream function: the table (snapshots and the
// events' polls) and the bearer tokens' key.
func NewStream(_ context.Context, env Env) (func(context.Context, events.LambdaFunctionURLRequest) (*events.LambdaFunctionURLStreamingResponse, error), error) {
	srv, err := StreamServer(env, env.Store(store.NewClient(env.AWS)))
	if err != nil {
		return nil, err
	}
	key := secretref.JWTKey(env.Config, env.AWS)
	return StreamHandler(OpenStreams(srv), env.Verifier(key.Get).VerifyContext, env.Log()), nil
}

// The table serves the streams: their jobs and events, the users' slots.
var (
	_ stream.Store = (*store.Store)(nil)
	_ stream.Slots = (*store.Store)(nil)
)

// StreamServer is the streams' server of env over the table st: the jobs
// and events it streams, the users' stream slots.
func StreamServer(env Env, st *store.Store) (*stream.Server, error) {
	cfg := env.Config
	return stream.New(stream.Config{Store: st, Slots: st, PingInterval: cfg.StreamPing,
		PollInterval: cfg.StreamPoll, MaxPerUser: cfg.StreamMaxPerUser, Lifetime: cfg.StreamLifetime, Logger: env.Log()})
}
