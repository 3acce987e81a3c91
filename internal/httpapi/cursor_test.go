package httpapi_test

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/conveyor/conveyor/localstack/awstest"
	"github.com/conveyor/conveyor/localstack/stack"
)

// TestCursorMisuse: a cursor continues the list it came from and nothing
// else. Taken to another status filter, another index, another user, another
// updatedSince, or forged, garbled or truncated, it is an invalid_cursor
// about the field cursor: 422 when it has a cursor's shape (base64url, what
// the spec's schema says), 400 when it has not — never a 500 from DynamoDB refusing the start key
// (DynamoDB Local refuses an ExclusiveStartKey outside the key condition).
func TestCursorMisuse(t *testing.T) {
	t.Parallel()
	b := awstest.Setup(t, nil, stack.Options{})
	alice, bob := b.Token("u-cur-alice", "user", "pro"), b.Token("u-cur-bob", "user", "pro")
	later := time.Now().Add(time.Hour).Format(time.RFC3339)
	since := time.Now().Add(-time.Minute).UTC().Format(time.RFC3339Nano)
	for _, tok := range []string{alice, bob} {
		b.Connect(tok)
		up := b.Upload(tok, awstest.PNG(t, 8))
		for i := range 6 {
			r := b.Must(b.Call("POST", "/v1/jobs", tok, map[string]any{"items": []any{map[string]any{"uploadId": up}},
				"params": map[string]any{"title": fmt.Sprintf("cursor %d", i)}, "scheduleAt": later}), 201)
			if i%2 == 1 {
				b.Must(b.Call("POST", "/v1/jobs/"+r.Body["id"].(string)+"/cancel", tok, nil), 200)
			}
		}
	}
	cursorOf := func(tok, query string) string {
		t.Helper()
		r := b.Must(b.Call("GET", "/v1/jobs?limit=1"+query, tok, nil), 200)
		c, _ := r.Body["nextCursor"].(string)
		if c == "" {
			t.Fatalf("GET /v1/jobs?limit=1%s gave no nextCursor: %s", query, r.Raw)
		}
		return c
	}
	all := cursorOf(alice, "")
	scheduled := cursorOf(alice, "&status=scheduled")
	cancelled := cursorOf(alice, "&status=cancelled")
	updated := cursorOf(alice, "&updatedSince="+url.QueryEscape(since))
	bobs := cursorOf(bob, "")
	bobsScheduled := cursorOf(bob, "&status=scheduled")

	// Every honest continuation still works, at any page size.
	for _, tt := range []struct{ name, query, cursor string }{
		{"unfiltered", "", all},
		{"scheduled", "&status=scheduled", scheduled},
		{"cancelled", "&status=cancelled", cancelled},
		{"updatedSince", "&updatedSince=" + url.QueryEscape(since), updated},
		{"another page size", "&status=scheduled&limit=2", scheduled},
	} {
		t.Run("honest/"+tt.name, func(t *testing.T) {
			t.Parallel()
			r := b.Call("GET", "/v1/jobs?cursor="+url.QueryEscape(tt.cursor)+tt.query, alice, nil)
			if r.Status != 200 || len(r.Body["jobs"].([]any)) == 0 {
				t.Fatalf("continuing %s: status %d: %s", tt.name, r.Status, r.Raw)
			}
		})
	}

	// A forged cursor: the shape of ours, the values of someone's choosing.
	var shape map[string]any
	raw, err := base64.RawURLEncoding.DecodeString(scheduled)
	if err != nil || json.Unmarshal(raw, &shape) != nil {
		t.Fatalf("our cursor is not base64url JSON any more: %q", scheduled)
	}
	forged := forge(shape, func(s string) string {
		if strings.Contains(s, "#") {
			return "u-cur-mallory#scheduled"
		}
		return s
	})
	garbage := forge(shape, func(string) string { return "x" })
	other := time.Now().Add(time.Hour).UTC().Format(time.RFC3339Nano)

	for _, tt := range []struct {
		name, token, query string
		status             int
	}{
		{"another status's cursor", alice, "&status=scheduled&cursor=" + cancelled, 422},
		{"a status cursor unfiltered", alice, "&cursor=" + scheduled, 422},
		{"an unfiltered cursor with a status", alice, "&status=cancelled&cursor=" + all, 422},
		{"an updatedSince cursor unfiltered", alice, "&cursor=" + updated, 422},
		{"an updatedSince cursor with another updatedSince", alice, "&updatedSince=" + url.QueryEscape(other) + "&cursor=" + updated, 422},
		{"an updatedSince cursor with a status", alice, "&status=scheduled&cursor=" + updated, 422},
		{"another user's cursor", alice, "&cursor=" + bobs, 422},
		{"another user's status cursor", alice, "&status=scheduled&cursor=" + bobsScheduled, 422},
		{"forged values", alice, "&status=scheduled&cursor=" + forged, 422},
		{"garbage values", alice, "&status=scheduled&cursor=" + garbage, 422},
		{"not base64", alice, "&cursor=%21%21%21", 400},
		{"not JSON", alice, "&cursor=" + base64.RawURLEncoding.EncodeToString([]byte("{nope")), 422},
		{"empty object", alice, "&cursor=" + base64.RawURLEncoding.EncodeToString([]byte("{}")), 422},
		{"truncated", alice, "&status=scheduled&cursor=" + scheduled[:len(scheduled)/2], 422},
		{"padded base64", alice, "&cursor=" + url.QueryEscape(base64.URLEncoding.EncodeToString([]byte(`{"a":"bc"}`))), 400},
	} {
		t.Run("misuse/"+tt.name, func(t *testing.T) {
			t.Parallel()
			r := b.Call("GET", "/v1/jobs?limit=2"+tt.query, tt.token, nil)
			if r.Status != tt.status {
				t.Fatalf("status %d, want %d: %s", r.Status, tt.status, r.Raw)
			}
			e, _ := r.Body["error"].(map[string]any)
			if e["code"] != "invalid_cursor" || e["field"] != "cursor" || e["message"] == "" {
				t.Errorf(`error %v, want code "invalid_cursor", field "cursor" and a message`, e)
			}
		})
	}
}

// forge rewrites every string value of a decoded cursor with fn and encodes
// it again the way ours are encoded.
func forge(v map[string]any, fn func(string) string) string {
	var walk func(any) any
	walk = func(x any) any {
		switch x := x.(type) {
		case string:
			return fn(x)
		case map[string]any:
			out := map[string]any{}
			for k, v := range x {
				out[k] = walk(v)
			}
			return out
		}
		return x
	}
	b, _ := json.Marshal(walk(v))
	return base64.RawURLEncoding.EncodeToString(b)
}
