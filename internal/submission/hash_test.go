package submission

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/conveyor/conveyor/internal/httpkind"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/publish"
)

// TestHashesOfStoredJobsDoNotChange pins the idempotency hash and the
// normalised form of a few requests of each built-in kind. A stored job's
// hash is what an identical submission is matched against, so a change in
// normalisation or hashing would let duplicates through for jobs already
// in the table. The values were computed by the code before the kinds were
// split into fronts and work (0499547: publish.Kind, httpkind.New), from
// these same requests.
func TestHashesOfStoredJobsDoNotChange(t *testing.T) {
	t.Parallel()
	svc := New(Config{Kinds: job.NewFronts(publish.New(publish.Config{}), httpkind.New(httpkind.Config{}))})
	at := time.Date(2026, 11, 23, 10, 0, 0, 123, time.FixedZone("MSK", 3*3600))
	for _, tc := range []struct {
		req        SubmitRequest
		hash, norm string
	}{
		{
			SubmitRequest{Items: []SubmitItem{{UploadID: " upl_aaaaaaaaaaaaaaaaaaaaaaaaaa "}}, Params: json.RawMessage(`{"title":"  A   cat ","description":" d ","tags":["B"," a","b",""]}`)},
			"f111b0d44ca6a1d89023664673332dd35024fa1d4ab39c598ad97767cfea1b4a",
			`{"type":"publish","items":[{"uploadId":"upl_aaaaaaaaaaaaaaaaaaaaaaaaaa"}],"params":{"title":"A cat","description":"d","tags":["a","b"]},"scheduleAt":null,"webhookUrl":""}`,
		},
		{
			SubmitRequest{Type: " PUBLISH ", Items: []SubmitItem{{UploadID: "upl_aaaaaaaaaaaaaaaaaaaaaaaaaa"}, {UploadID: "upl_bbbbbbbbbbbbbbbbbbbbbbbbbb"}},
				Params: json.RawMessage(`{"title":"x"}`), ScheduleAt: &at, WebhookURL: " https://example.com/h "},
			"775049e6fcd631868cb6bff13b9b0b71bb71bdfca89b856660a2cd92ea1b95b8",
			`{"type":"publish","items":[{"uploadId":"upl_aaaaaaaaaaaaaaaaaaaaaaaaaa"},{"uploadId":"upl_bbbbbbbbbbbbbbbbbbbbbbbbbb"}],"params":{"title":"x"},"scheduleAt":"2026-11-23T07:00:00Z","webhookUrl":"https://example.com/h"}`,
		},
		{
			SubmitRequest{Type: "http", Params: json.RawMessage(`{"url":" https://example.com/x ","method":"put","headers":{"x-api-key":"k","content-type":"application/json"},"body":"{}","expectStatus":[204,200,200]}`)},
			"8c33a1dbc7821aee7b4fe298a2db372d407aa621f530f9cea8f4108fcbdef3e8",
			`{"type":"http","params":{"method":"PUT","url":"https://example.com/x","headers":{"Content-Type":"application/json","X-Api-Key":"k"},"body":"{}","timeoutMs":10000,"expectStatus":[200,204]},"scheduleAt":null,"webhookUrl":""}`,
		},
		{
			SubmitRequest{Type: "http", Params: json.RawMessage(`{"url":"https://example.com/x"}`)},
			"7ce028270055054080ffaeb7c3776e48017eb96f471587846fc3e7e04a516058",
			`{"type":"http","params":{"method":"POST","url":"https://example.com/x","timeoutMs":10000},"scheduleAt":null,"webhookUrl":""}`,
		},
	} {
		h, err := svc.Hash("u-golden", tc.req)
		if err != nil || h != tc.hash {
			t.Errorf("Hash(%s) = %s (%v), want %s", tc.req.Params, h, err, tc.hash)
		}
		b, err := json.Marshal(svc.Normalize(tc.req))
		if err != nil || string(b) != tc.norm {
			t.Errorf("Normalize(%s) = %s (%v), want %s", tc.req.Params, b, err, tc.norm)
		}
	}
}
