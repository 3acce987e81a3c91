package httpapi

import (
	"errors"
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestIntegralNumbers(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{`{"size":356.0}`, `{"size":356}`},
		{`{"size":3.56e2,"n":-1E3,"m":100e-2}`, `{"size":356,"n":-1000,"m":1}`},
		{`{"size":1.5}`, `{"size":1.5}`},
		{`{"size":356}`, `{"size":356}`},
		{`{"s":"356.0","k\"356.0":[2.0, "x\\", 7.00]}`, `{"s":"356.0","k\"356.0":[2, "x\\", 7]}`},
		{`{"big":1e400,"bad":1.2.3}`, `{"big":1e400,"bad":1.2.3}`},
		{`{"unclosed":"2.0`, `{"unclosed":"2.0`},
		{`-0.0`, `0`},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, string(integralNumbers([]byte(tt.in)))); diff != "" {
			t.Errorf("integralNumbers(%s) (-want +got):\n%s", tt.in, diff)
		}
	}
}

// An integer field takes any spelling of an integral number, as JSON Schema's
// integer does; a true fraction is still the wrong type.
func TestDecodeIntegralNumbers(t *testing.T) {
	t.Parallel()
	b := setup(t)
	resp := serve(t, b.rt, event(http.MethodPost, "/things", b.user, `{"count":2.0,"params":{"size":1e1}}`))
	if diff := cmp.Diff(`{"name":"","count":2,"tags":null,"params":{"title":"","size":10},"items":null,"at":null}`+"\n", resp.Body); resp.StatusCode != http.StatusCreated || diff != "" {
		t.Fatalf("status %d (-want +got body):\n%s", resp.StatusCode, diff)
	}
	resp = serve(t, b.rt, event(http.MethodPost, "/things", b.user, `{"count":2.5}`))
	if got := errorOf(t, resp); resp.StatusCode != http.StatusBadRequest || got.Code != CodeInvalidType || got.Field != "count" {
		t.Fatalf("2.5 for an integer: %d %+v", resp.StatusCode, got)
	}
}

// A query parameter given empty is not the same as one left out.
func TestNonEmptyQuery(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		raw       string
		params    map[string]string
		want      string
		wantError bool
	}{
		{raw: "status=queued&limit=5", want: "queued"},
		{raw: "limit=5", want: ""},
		{raw: "status=&limit=5", wantError: true},
		{raw: "status", wantError: true},
		{params: map[string]string{"status": "queued"}, want: "queued"},
		{params: map[string]string{"status": ""}, wantError: true},
		{params: map[string]string{}, want: ""},
	} {
		r := &Request{Raw: event(http.MethodGet, "/things", "", "")}
		r.Raw.RawQueryString, r.Raw.QueryStringParameters = tt.raw, tt.params
		got, err := r.NonEmptyQuery("status")
		var e *Error
		if tt.wantError {
			if !errors.As(err, &e) || e.Status != http.StatusBadRequest || e.Field != "status" {
				t.Errorf("%q %v: err %v, want a 400 on status", tt.raw, tt.params, err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("%q %v: %q, %v; want %q", tt.raw, tt.params, got, err, tt.want)
		}
	}
}
