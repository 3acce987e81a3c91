package httpapi_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/conveyor/conveyor/localstack/awstest"
	"github.com/conveyor/conveyor/localstack/stack"
)

// TestEdgesThroughTheStack: the edges of the contract, as a client meets
// them through the local stack's gateway: every error in the contract's
// shape with X-Request-Id (a body over the gateway's 10 MB included), HEAD
// where GET is, bodies that are not UTF-8 refused, control and
// bidirectional characters refused in titles by field, URL schemes told
// in the local mode's words, and the account connection readable.
func TestEdgesThroughTheStack(t *testing.T) {
	t.Parallel()
	b := awstest.Setup(t, nil, stack.Options{})
	tok := b.Token("u-edges", "user", "free")
	errorOf := func(t *testing.T, r awstest.Response) (code, field, msg string) {
		t.Helper()
		e, ok := r.Body["error"].(map[string]any)
		if !ok {
			t.Fatalf("%d %s: not the error contract", r.Status, r.Raw)
		}
		if id := r.Header.Get("X-Request-Id"); id == "" {
			t.Errorf("%d %s: no X-Request-Id", r.Status, r.Raw)
		}
		code, _ = e["code"].(string)
		field, _ = e["field"].(string)
		msg, _ = e["message"].(string)
		return code, field, msg
	}

	t.Run("HEAD /healthz", func(t *testing.T) {
		r := b.Call(http.MethodHead, "/healthz", "", nil)
		if r.Status != http.StatusOK || len(r.Raw) != 0 || r.Header.Get("X-Request-Id") == "" {
			t.Errorf("HEAD /healthz: %d %q %v, want 200, no body, X-Request-Id", r.Status, r.Raw, r.Header)
		}
		if r := b.Call(http.MethodHead, "/v1/jobs", tok, nil); r.Status != http.StatusOK || r.Header.Get("X-Total-Count") == "" {
			t.Errorf("HEAD /v1/jobs: %d %v, want 200 with X-Total-Count", r.Status, r.Header)
		}
	})
	t.Run("a body over the gateway's limit", func(t *testing.T) {
		huge := `{"params":{"title":"` + strings.Repeat("x", 11<<20) + `"}}`
		over := b.Call(http.MethodPost, "/v1/jobs", tok, huge, "Content-Type", "application/json")
		apiOver := b.Call(http.MethodPost, "/v1/jobs", tok, huge[:300<<10]+`"}}`, "Content-Type", "application/json")
		if over.Status != http.StatusRequestEntityTooLarge || apiOver.Status != http.StatusRequestEntityTooLarge {
			t.Fatalf("statuses %d and %d, want 413", over.Status, apiOver.Status)
		}
		c1, _, m1 := errorOf(t, over)
		c2, _, m2 := errorOf(t, apiOver)
		if c1 != "payload_too_large" || c1 != c2 || m1 != m2 {
			t.Errorf("over 10 MB: %s %q; over 256 KiB: %s %q; want the same answer", c1, m1, c2, m2)
		}
	})
	t.Run("a body that is not UTF-8", func(t *testing.T) {
		r := b.Call(http.MethodPost, "/v1/jobs", tok, []byte("{\"params\":{\"title\":\"caf\xe9\"}}"), "Content-Type", "application/json")
		if code, _, _ := errorOf(t, r); r.Status != http.StatusBadRequest || code != "invalid_encoding" {
			t.Errorf("%d %s, want 400 invalid_encoding", r.Status, r.Raw)
		}
	})
	t.Run("control and bidirectional characters in a title", func(t *testing.T) {
		for _, title := range []string{"a\x00b", "cat\u202egnp.exe"} {
			r := b.Call(http.MethodPost, "/v1/jobs", tok, map[string]any{
				"items": []any{map[string]any{"uploadId": "upl_aaaaaaaaaaaaaaaaaaaaaaaaaa"}}, "params": map[string]any{"title": title},
			})
			if _, field, _ := errorOf(t, r); r.Status != http.StatusBadRequest || field != "params.title" {
				t.Errorf("title %q: %d %s, want 400 on params.title", title, r.Status, r.Raw)
			}
		}
	})
	t.Run("a URL scheme, told in the local mode's words", func(t *testing.T) {
		r := b.Call(http.MethodPost, "/v1/jobs", tok, map[string]any{
			"items": []any{map[string]any{"uploadId": "upl_aaaaaaaaaaaaaaaaaaaaaaaaaa"}}, "params": map[string]any{"title": "t"}, "webhookUrl": "ftp://x",
		})
		if _, field, msg := errorOf(t, r); r.Status != http.StatusBadRequest || field != "webhookUrl" || msg != "webhookUrl must use http or https" {
			t.Errorf("%d %s, want 400 webhookUrl must use http or https", r.Status, r.Raw)
		}
	})
	t.Run("the account connection", func(t *testing.T) {
		if r := b.Call(http.MethodGet, "/v1/account/connection", tok, nil); r.Status != http.StatusNotFound {
			t.Fatalf("before connecting: %d %s, want 404", r.Status, r.Raw)
		}
		const refresh, access = "rt-never-shown", "at-never-shown"
		b.Must(b.Call(http.MethodPut, "/v1/account/connection", tok, map[string]any{
			"provider": "deviantart", "refreshToken": refresh, "accessToken": access, "expiresAt": "2031-01-02T03:04:05Z",
		}), http.StatusNoContent)
		r := b.Must(b.Call(http.MethodGet, "/v1/account/connection", tok, nil), http.StatusOK)
		if r.Body["provider"] != "deviantart" || r.Body["connected"] != true || r.Body["expiresAt"] != "2031-01-02T03:04:05Z" {
			t.Errorf("connection = %s", r.Raw)
		}
		if strings.Contains(string(r.Raw), refresh) || strings.Contains(string(r.Raw), access) {
			t.Errorf("the connection shows a token: %s", r.Raw)
		}
		if other := b.Call(http.MethodGet, "/v1/account/connection", b.Token("u-edges-other", "user", "free"), nil); other.Status != http.StatusNotFound {
			t.Errorf("another user: %d %s, want 404", other.Status, other.Raw)
		}
	})
}
