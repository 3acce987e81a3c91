// Package idempotency gives the creating POST routes a client
// Idempotency-Key (IETF httpapi draft "The Idempotency-Key HTTP Header
// Field"): the first request with a key is handled and its success kept;
// a repeat with the same key and the same body gets that response again
// (status, body, Location) for the configured window, whatever became of
// the resource since; the same key with another body is 422; a repeat
// while the first is still being handled is 409. Keys are per user and per
// route. The record is one item in the table (a conditional put, a TTL;
// readers ignore expired records).
package idempotency

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/conveyor/conveyor/internal/canonical"
	"github.com/conveyor/conveyor/internal/httpapi"
	"github.com/conveyor/conveyor/internal/store"
)

// Defaults and bounds.
const (
	// WindowDefault is how long a key's response is replayed.
	WindowDefault = 24 * time.Hour
	// InFlightDefault is how long a request holds its key unanswered
	// before another request with the key may take it over (a request
	// that died; longer than any API function invocation).
	InFlightDefault = time.Minute
	// MaxKey is the longest key accepted, in bytes.
	MaxKey = 255
	// Header is the request header's name.
	Header = "Idempotency-Key"
	// ReplayedHeader marks a replayed response.
	ReplayedHeader = "Idempotent-Replayed"
)

// Error codes.
const (
	// CodeReused: the key came with another request body (422).
	CodeReused = "idempotency_key_reused"
	// CodeInFlight: the first request with the key is not answered yet (409).
	CodeInFlight = "idempotency_key_in_flight"
)

// Records keeps the keys (store.Store).
type Records interface {
	ClaimKey(ctx context.Context, rec store.KeyRecord, staleBefore time.Time) (store.KeyRecord, bool, error)
	CompleteKey(ctx context.Context, rec store.KeyRecord) error
	ReleaseKey(ctx context.Context, owner, scope, key, token string) error
}

// Guard wraps creating routes with the Idempotency-Key semantics.
type Guard struct {
	// Records keeps the keys (required).
	Records Records
	// Window is how long a response is replayed (default WindowDefault;
	// CONVEYOR_IDEMPOTENCY_WINDOW).
	Window time.Duration
	// InFlight is how long an unanswered request holds its key (default
	// InFlightDefault).
	InFlight time.Duration
	// Now defaults to time.Now.
	Now func() time.Time
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// Wrap returns h under the guard for the route named scope ("POST
// /v1/jobs"). A request without the header is h's alone.
func (g Guard) Wrap(scope string, h httpapi.HandlerFunc) httpapi.HandlerFunc {
	if g.Window <= 0 {
		g.Window = WindowDefault
	}
	if g.InFlight <= 0 {
		g.InFlight = InFlightDefault
	}
	if g.Now == nil {
		g.Now = time.Now
	}
	if g.Logger == nil {
		g.Logger = slog.Default()
	}
	return func(r *httpapi.Request) (httpapi.Response, error) {
		raw, present := lookup(r)
		if !present {
			return h(r)
		}
		key, err := ParseKey(raw)
		if err != nil {
			return httpapi.Response{}, err
		}
		return g.serve(r, scope, key, h)
	}
}

func lookup(r *httpapi.Request) (string, bool) {
	for k, v := range r.Raw.Headers {
		if strings.EqualFold(k, Header) {
			return v, true
		}
	}
	return "", false
}

// ParseKey reads the header's value: an sf-string ("…", as the draft
// says) or, leniently, the bare key; 1 to MaxKey printable ASCII
// characters.
func ParseKey(v string) (string, error) {
	v = strings.TrimSpace(v)
	if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
		v = v[1 : len(v)-1]
		if strings.ContainsAny(v, `"\`) {
			return "", httpapi.BadRequest(Header, "%s: escapes are not accepted in the key", Header)
		}
	}
	if v == "" || len(v) > MaxKey {
		return "", httpapi.BadRequest(Header, "%s must be 1 to %d characters", Header, MaxKey)
	}
	for i := 0; i < len(v); i++ {
		if v[i] < 0x20 || v[i] > 0x7e {
			return "", httpapi.BadRequest(Header, "%s must be printable ASCII", Header)
		}
	}
	return v, nil
}

// Fingerprint is the hash of a request body: of its canonical JSON (member
// order, spacing and nulls do not matter) when it is JSON, else of its bytes.
func Fingerprint(scope string, body []byte) string {
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err == nil && !dec.More() {
		if h, err := canonical.Hash(scope, v); err == nil {
			return h
		}
	}
	h, _ := canonical.Hash(scope, string(body))
	return "raw:" + h
}

func (g Guard) serve(r *httpapi.Request, scope, key string, h httpapi.HandlerFunc) (httpapi.Response, error) {
	body, err := r.Body()
	if err != nil {
		return httpapi.Response{}, err
	}
	owner := r.Claims.Subject
	now := g.Now()
	rec := store.KeyRecord{Owner: owner, Scope: scope, Key: key, Fingerprint: Fingerprint(scope, body),
		State: store.KeyInFlight, Token: token(), StartedMs: now.UnixMilli(), ExpiresAt: now.Add(g.Window).Unix()}
	held, claimed, err := g.Records.ClaimKey(r.Ctx, rec, now.Add(-g.InFlight))
	if errors.Is(err, store.ErrConflict) {
		held, claimed, err = g.Records.ClaimKey(r.Ctx, rec, now.Add(-g.InFlight))
	}
	if err != nil {
		return httpapi.Response{}, err
	}
	if !claimed {
		switch {
		case held.Fingerprint != rec.Fingerprint:
			return httpapi.Response{}, httpapi.Unprocessable(CodeReused, Header,
				"this Idempotency-Key was used with another request body: use a new key for a new request")
		case held.State != store.KeyDone:
			return httpapi.Response{}, httpapi.Conflict(CodeInFlight,
				"a request with this Idempotency-Key is still being handled: retry shortly for its response")
		}
		return replay(held), nil
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

func replay(rec store.KeyRecord) httpapi.Response {
	resp := httpapi.Response{StatusCode: rec.Status, Body: rec.Body, Headers: map[string]string{}}
	for k, v := range rec.Headers {
		resp.Headers[k] = v
	}
	resp.Headers[ReplayedHeader] = "true"
	if resp.StatusCode == 0 {
		resp.StatusCode = http.StatusOK
	}
	return resp
}

func token() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
