package webhook_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/conveyor/conveyor/internal/webhook"
)

// A receiver verifies each delivery with the Standard Webhooks library,
// on the raw body, before parsing it: the library refuses a timestamp more
// than five minutes off (a replay) and, during a secret rotation, accepts
// either of the two signatures Conveyor sends. The secret is the owner's,
// "whsec_…" from GET /v1/webhooks/secret. Here the delivery is signed the
// way the system tier's deliverer signs it (webhook.Signature).
func ExampleSignature() {
	key := webhook.NewSecretKey()
	secret := webhook.FormatSecret(key) // what GET /v1/webhooks/secret shows its owner

	// The receiver.
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		panic(err)
	}
	hook := func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err := wh.Verify(body, r.Header); err != nil {
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		// json.Unmarshal(body, &event) … dedupe on the webhook-id header
		w.WriteHeader(http.StatusNoContent)
	}

	// A delivery, and the same delivery with its body changed.
	deliver := func(body, signed []byte) int {
		now := time.Now()
		r := httptest.NewRequest(http.MethodPost, "/hook", bytes.NewReader(body))
		r.Header.Set(webhook.HeaderID, "dlv_1")
		r.Header.Set(webhook.HeaderTimestamp, strconv.FormatInt(now.Unix(), 10))
		r.Header.Set(webhook.HeaderSignature, webhook.Signature("dlv_1", now, signed, key))
		r.Header.Set(webhook.HeaderEvent, "job.succeeded")
		w := httptest.NewRecorder()
		hook(w, r)
		return w.Code
	}
	body := []byte(`{"type":"job.succeeded","jobId":"job_x"}`)
	fmt.Println("delivered:", deliver(body, body))
	fmt.Println("tampered:", deliver([]byte(`{"type":"job.failed","jobId":"job_x"}`), body))
	// Output:
	// delivered: 204
	// tampered: 401
}
