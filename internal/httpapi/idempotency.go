package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/conveyor/conveyor/internal/aws/store"
	"github.com/conveyor/conveyor/internal/ids"
	"github.com/conveyor/conveyor/internal/submission"
)

// The Idempotency-Key guard's defaults and bounds.
const (
	// IdempotencyWindowDefault is how long a key's response is replayed.
	IdempotencyWindowDefault = 24 * time.Hour
	// IdempotencyInFlightDefault is how long a request holds its key unanswered
	// before another request with the key may take it over (a request
	// that died; longer than any API function invocation).
	IdempotencyInFlightDefault = time.Minute
	// MaxIdempotencyKey is the longest key accepted, in bytes.
	MaxIdempotencyKey = 255
	// IdempotencyKeyHeader is the request header's name.
	IdempotencyKeyHeader = "Idempotency-Key"
	// IdempotentReplayedHeader marks a replayed response.
	IdempotentReplayedHeader = "Idempotent-Replayed"
)

// The Idempotency-Key guard's error codes.
const (
	// CodeIdempotencyKeyReused: the key came with another request body (422).
	CodeIdempotencyKeyReused = "idempotency_key_reused"
	// CodeIdempotencyKeyInFlight: the first request with the key is not
	// answered yet (409).
	CodeIdempotencyKeyInFlight = "idempotency_key_in_flight"
)

// IdempotencyRecords keeps the keys (store.Store).
type IdempotencyRecords interface {
	ClaimKey(ctx context.Context, rec store.KeyRecord, staleBefore time.Time) (store.KeyRecord, bool, error)
	CompleteKey(ctx context.Context, rec store.KeyRecord) error
	ReleaseKey(ctx context.Context, owner, scope, key, token string) error
}

// Idempotency gives the creating POST routes wrapped by Wrap a client
// Idempotency-Key (IETF httpapi draft "The Idempotency-Key HTTP Header
// Field"): the first request with a key is handled and its success kept;
// a repeat with the same key and the same body gets that response again
// (status, body, Location) for the configured window, whatever became of
// the resource since; the same key with another body is 422; a repeat
// while the first is still being handled is 409. Keys are per user and per
// route. The record is one item in the table (a conditional put, a TTL;
// readers ignore expired records).
type Idempotency struct {
	// Records keeps the keys (required).
	Records IdempotencyRecords
	// Window is how long a response is replayed (default
	// IdempotencyWindowDefault; CONVEYOR_IDEMPOTENCY_WINDOW).
	Window time.Duration
	// InFlight is how long an unanswered request holds its key (default
	// IdempotencyInFlightDefault).
	InFlight time.Duration
	// Now defaults to time.Now.
	Now func() time.Time
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// Wrap returns h under the guard for the route named scope ("POST
// /v1/jobs"). A request without the header is h's alone.
func (g Idempotency) Wrap(scope string, h HandlerFunc) HandlerFunc {
	if g.Window <= 0 {
		g.Window = IdempotencyWindowDefault
	}
	if g.InFlight <= 0 {
		g.InFlight = IdempotencyInFlightDefault
	}
	if g.Now == nil {
		g.Now = time.Now
	}
	if g.Logger == nil {
		g.Logger = slog.Default()
	}
	return func(r *Request) (Response, error) {
		raw, present := idempotencyKeyOf(r)
		if !present {
			return h(r)
		}
		key, err := ParseIdempotencyKey(raw)
		if err != nil {
			return Response{}, err
		}
		return g.serve(r, scope, key, h)
	}
}

func idempotencyKeyOf(r *Request) (string, bool) {
	for k, v := range r.Raw.Headers {
		if strings.EqualFold(k, IdempotencyKeyHeader) {
			return v, true
		}
	}
	return "", false
}

// ParseIdempotencyKey reads the header's value: an sf-string ("…", as the draft
// says) or, leniently, the bare key (which does not start with a quote); 1 to
// MaxIdempotencyKey printable ASCII characters (openapi.yaml's pattern).
func ParseIdempotencyKey(v string) (string, error) {
	v = strings.TrimSpace(v)
	if strings.HasPrefix(v, `"`) {
		if len(v) < 2 || v[len(v)-1] != '"' {
			return "", BadRequest(IdempotencyKeyHeader, "%s: a key that opens a quote must close it (an sf-string)", IdempotencyKeyHeader)
		}
		v = v[1 : len(v)-1]
		if strings.ContainsAny(v, `"\`) {
			return "", BadRequest(IdempotencyKeyHeader, "%s: escapes are not accepted in the key", IdempotencyKeyHeader)
		}
	}
	if v == "" || len(v) > MaxIdempotencyKey {
		return "", BadRequest(IdempotencyKeyHeader, "%s must be 1 to %d characters", IdempotencyKeyHeader, MaxIdempotencyKey)
	}
	for i := 0; i < len(v); i++ {
		if v[i] < 0x20 || v[i] > 0x7e {
			return "", BadRequest(IdempotencyKeyHeader, "%s must be printable ASCII", IdempotencyKeyHeader)
		}
	}
	return v, nil
}

// idempotencyFingerprint is the hash of a request body: of its canonical
// JSON (member order, spacing and nulls do not matter) when it is JSON,
// else of its bytes.
func idempotencyFingerprint(scope string, body []byte) string {
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err == nil && !dec.More() {
		if h, err := submission.CanonicalHash(scope, v); err == nil {
			return h
		}
	}
	h, _ := submission.CanonicalHash(scope, string(body))
	return "raw:" + h
}

func (g Idempotency) serve(r *Request, scope, key string, h HandlerFunc) (Response, error) {
	body, err := r.Body()
	if err != nil {
		return Response{}, err
	}
	owner := r.Claims.Subject
	now := g.Now()
	rec := store.KeyRecord{Owner: owner, Scope: scope, Key: key, Fingerprint: idempotencyFingerprint(scope, body),
		State: store.KeyInFlight, Token: ids.Hex(16), StartedMs: now.UnixMilli(), ExpiresAt: now.Add(g.Window).Unix()}
	held, claimed, err := g.Records.ClaimKey(r.Ctx, rec, now.Add(-g.InFlight))
	if errors.Is(err, store.ErrConflict) {
		held, claimed, err = g.Records.ClaimKey(r.Ctx, rec, now.Add(-g.InFlight))
	}
	if err != nil {
		return Response{}, err
	}
	if !claimed {
		switch {
		case held.Fingerprint != rec.Fingerprint:
			return Response{}, Unprocessable(CodeIdempotencyKeyReused, IdempotencyKeyHeader,
				"this Idempotency-Key was used with another request body: use a new key for a new request")
		case held.State != store.KeyDone:
			return Response{}, Conflict(CodeIdempotencyKeyInFlight,
				"a request with this Idempotency-Key is still being handled: retry shortly for its response")
		}
		return replayKept(held), nil
	}
	resp, herr := h(r)
	ctx := context.WithoutCancel(r.Ctx)
	log := g.Logger.With("request_id", r.RequestID, "route", scope)
	if herr != nil || resp.StatusCode < 200 || resp.StatusCode > 299 {
		// Not a success: nothing to replay, the key is free again (the
		// client may correct the request and send it with the same key).
		if err := g.Records.ReleaseKey(ctx, owner, scope, key, rec.Token); err != nil {
			log.WarnContext(ctx, "releasing an idempotency key failed; it lapses after the in-flight time", "error", err)
		}
		return resp, herr
	}
	rec.Status, rec.Body = resp.StatusCode, resp.Body
	rec.Headers = map[string]string{}
	for _, name := range []string{"Location", "Content-Type"} {
		if v, ok := resp.Headers[name]; ok {
			rec.Headers[name] = v
		}
	}
	if err := g.Records.CompleteKey(ctx, rec); err != nil {
		log.ErrorContext(ctx, "keeping the response of an idempotency key failed; a repeat is handled as new after the in-flight time", "error", err)
	}
	return resp, nil
}

func replayKept(rec store.KeyRecord) Response {
	resp := Response{StatusCode: rec.Status, Body: rec.Body, Headers: map[string]string{}}
	for k, v := range rec.Headers {
		resp.Headers[k] = v
	}
	resp.Headers[IdempotentReplayedHeader] = "true"
	if resp.StatusCode == 0 {
		resp.StatusCode = http.StatusOK
	}
	return resp
}
