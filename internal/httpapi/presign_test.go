package httpapi_test

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/conveyor/conveyor/localstack/awstest"
	"github.com/conveyor/conveyor/localstack/stack"
)

// The emulator checks neither the signature nor the expiry of a presigned
// URL, so this test checks what we sign: it parses the URL that
// POST /v1/uploads/sign answers and recomputes its signature with the
// SDK's SigV4 signer from the exact request the client is told to send.
// The signature matches that request and no other: another Content-Type,
// another Content-Length, another key, or no Content-Disposition (which
// names the file in the stored object) gives another signature, which S3
// refuses (SignatureDoesNotMatch).
func TestPresignedPutSignsTypeSizeKeyAndExpiry(t *testing.T) {
	t.Parallel()
	b := awstest.Setup(t, map[string]string{"CONVEYOR_UPLOAD_EXPIRY": "3m"}, stack.Options{})
	tok := b.Token("u-signed", "user", "free")
	const size = 12345
	r := b.Must(b.Call("POST", "/v1/uploads/sign", tok, map[string]any{"filename": "../holiday/My Photo?.jpg", "contentType": "image/jpeg", "size": size}), 201)
	id := r.Body["uploadId"].(string)
	wantKey := "uploads/u-signed/" + id + "/My Photo_.jpg"
	if r.Body["key"] != wantKey || r.Body["method"] != http.MethodPut {
		t.Fatalf("slot = %s %v, want PUT %s", r.Body["method"], r.Body["key"], wantKey)
	}
	u, err := url.Parse(r.Body["url"].(string))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(u.Path, "/"+wantKey) {
		t.Errorf("URL path %q does not end in the key %q", u.Path, wantKey)
	}
	q := u.Query()
	if got := q.Get("X-Amz-Expires"); got != "180" {
		t.Errorf("X-Amz-Expires = %q, want 180 (CONVEYOR_UPLOAD_EXPIRY=3m)", got)
	}
	signed := strings.Split(q.Get("X-Amz-SignedHeaders"), ";")
	for _, h := range []string{"content-disposition", "content-length", "content-type", "host"} {
		if !slices.Contains(signed, h) {
			t.Errorf("X-Amz-SignedHeaders = %v, lacks %s", signed, h)
		}
	}
	headers := r.Body["headers"].(map[string]any)
	disposition := `attachment; filename="My Photo_.jpg"; filename*=UTF-8''My%20Photo_.jpg`
	if headers["Content-Type"] != "image/jpeg" || headers["Content-Length"] != strconv.Itoa(size) || headers["Content-Disposition"] != disposition {
		t.Errorf("headers to send = %v, want Content-Type image/jpeg, Content-Length %d and Content-Disposition %s", headers, size, disposition)
	}

	// Recompute the signature of the request the client is told to send.
	awsCfg := b.Stack.App.Clients.Config
	creds, err := awsCfg.Credentials.Retrieve(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	at, err := time.Parse("20060102T150405Z", q.Get("X-Amz-Date"))
	if err != nil {
		t.Fatalf("X-Amz-Date: %v", err)
	}
	signature := func(key, contentType, disposition string, length int64) string {
		t.Helper()
		unsigned := *u
		uq := u.Query()
		for _, p := range []string{"X-Amz-Signature", "X-Amz-Algorithm", "X-Amz-Credential", "X-Amz-Date", "X-Amz-SignedHeaders", "X-Amz-Security-Token"} {
			uq.Del(p)
		}
		unsigned.RawQuery = uq.Encode()
		unsigned.Path = strings.TrimSuffix(u.Path, wantKey) + key
		unsigned.RawPath = ""
		req, err := http.NewRequest(http.MethodPut, unsigned.String(), http.NoBody)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", contentType)
		if disposition != "" {
			req.Header.Set("Content-Disposition", disposition)
		}
		req.ContentLength = length
		got, _, err := v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true }).
			PresignHTTP(context.Background(), creds, req, "UNSIGNED-PAYLOAD", "s3", awsCfg.Region, at)
		if err != nil {
			t.Fatal(err)
		}
		pu, err := url.Parse(got)
		if err != nil {
			t.Fatal(err)
		}
		return pu.Query().Get("X-Amz-Signature")
	}
	if got, want := signature(wantKey, "image/jpeg", disposition, size), q.Get("X-Amz-Signature"); got != want {
		t.Fatalf("recomputed signature %s, URL has %s: the URL does not sign the request the client is told to send", got, want)
	}
	for _, tc := range []struct {
		name, key, contentType, disposition string
		length                              int64
	}{
		{"another type", wantKey, "image/png", disposition, size},
		{"another size", wantKey, "image/jpeg", disposition, size + 1},
		{"another user's key", strings.Replace(wantKey, "u-signed", "u-other", 1), "image/jpeg", disposition, size},
		{"no Content-Disposition", wantKey, "image/jpeg", "", size},
		{"another name", wantKey, "image/jpeg", `attachment; filename="evil.html"`, size},
	} {
		if signature(tc.key, tc.contentType, tc.disposition, tc.length) == q.Get("X-Amz-Signature") {
			t.Errorf("%s: same signature, so the URL does not bind it", tc.name)
		}
	}
}
