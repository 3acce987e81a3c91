package submission_test

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/conveyor/conveyor/internal/httpapi"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/publish"
	"github.com/conveyor/conveyor/internal/submission"
)

// FuzzDecodeAndHash feeds arbitrary bodies through the API's strict
// decoder into a SubmitRequest, then normalises and hashes it: nothing may
// panic, a decoded request always hashes, normalising is idempotent, and
// the hash does not depend on the order of keys or on tag order and case.
func FuzzDecodeAndHash(f *testing.F) {
	seeds := []string{
		`{"type":"publish","items":[{"uploadId":"upl_aaaaaaaaaaaaaaaaaaaaaaaaaa"}],"params":{"title":"A cat","tags":["b","A"]}}`,
		`{"params":{"tags":["x","x"," X "],"title":"  spaced   out  "},"items":[]}`,
		`{"scheduleAt":"2026-11-22T10:00:00.123+03:00","webhookUrl":"https://example.com/h","items":[{"uploadId":""}]}`,
		`{"items":null,"params":null}`,
		`[]`, `null`, `{"unknown":1}`, `{"params":{"title":123}}`, "{\"params\":{\"title\":\"\\u0000\"}}",
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	svc := submission.New(submission.Config{Kinds: job.NewFronts(publish.New(publish.Config{}))})
	tagsOf := func(r submission.SubmitRequest) []string {
		var p publish.Params
		_ = json.Unmarshal(r.Params, &p)
		return p.Tags
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var req submission.SubmitRequest
		r := &httpapi.Request{Raw: events.APIGatewayV2HTTPRequest{Headers: map[string]string{"content-type": "application/json"}, Body: string(body)}}
		if err := decode(r, &req); err != nil {
			return
		}
		h1, err := svc.Hash("u1", req)
		if err != nil {
			t.Fatalf("decoded request does not hash: %v", err)
		}
		n := svc.Normalize(req)
		if h2, _ := svc.Hash("u1", n); h2 != h1 {
			t.Fatalf("normalising is not idempotent: %s vs %s", h1, h2)
		}
		if tags := tagsOf(n); len(tags) > 1 {
			rev := n
			slices.Reverse(tags)
			var p publish.Params
			_ = json.Unmarshal(n.Params, &p)
			p.Tags = tags
			rev.Params, _ = json.Marshal(p)
			if h3, _ := svc.Hash("u1", rev); h3 != h1 {
				t.Fatalf("tag order changed the hash")
			}
		}
		// Re-encoding with keys in another order decodes to the same hash.
		b, _ := json.Marshal(n)
		var again submission.SubmitRequest
		if err := json.Unmarshal(b, &again); err == nil {
			if h4, _ := svc.Hash("u1", again); h4 != h1 {
				t.Fatalf("round trip changed the hash")
			}
		}
		if h5, _ := svc.Hash("u2", req); h5 == h1 {
			t.Fatalf("two users share a hash")
		}
	})
}

// decode is the API's decoder with the production limit.
func decode(r *httpapi.Request, v any) error {
	return httpapi.DecodeWithLimit(r, v, httpapi.MaxBodyDefault)
}
