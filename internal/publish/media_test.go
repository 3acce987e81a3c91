package publish_test

import (
	"bytes"
	"net/http"
	"testing"

	"github.com/conveyor/conveyor/localstack/awstest"
	"github.com/conveyor/conveyor/localstack/stack"
)

// put sends data to a signed slot (as POST /v1/uploads/sign answered it)
// with exactly the headers the answer names.
func put(t *testing.T, slot map[string]any, data []byte) {
	t.Helper()
	req, err := http.NewRequest(slot["method"].(string), slot["url"].(string), bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range slot["headers"].(map[string]any) {
		req.Header.Set(k, v.(string))
	}
	req.ContentLength = int64(len(data))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("presigned PUT: %s", resp.Status)
	}
}

// A second PUT with the still-valid presigned URL, after the upload was
// confirmed, replaces the object with bytes nobody checked (same size, same
// type). The job naming the upload fails at once with media_changed, and
// the external API never sees the replaced bytes.
func TestObjectReplacedAfterConfirmationIsNeverPublished(t *testing.T) {
	t.Parallel()
	b := awstest.Setup(t, nil, stack.Options{})
	tok := b.Token("u-replaced", "user", "standard")
	b.Connect(tok)
	checked := awstest.PNG(t, 6)
	slot := b.Must(b.Call("POST", "/v1/uploads/sign", tok, map[string]any{"filename": "cat.png", "contentType": "image/png", "size": len(checked)}), 201).Body
	up := slot["uploadId"].(string)
	put(t, slot, checked)
	if r := b.Must(b.Call("POST", "/v1/uploads/"+up+"/confirm", tok, nil), 200); r.Body["status"] != "confirmed" {
		t.Fatalf("upload = %v, want confirmed", r.Body["status"])
	}

	swapped := bytes.Clone(checked)
	swapped[len(swapped)-1] ^= 0xff // same size, same PNG signature, other bytes
	put(t, slot, swapped)
	if r := b.Must(b.Call("POST", "/v1/uploads/"+up+"/confirm", tok, nil), 200); r.Body["status"] != "confirmed" {
		t.Fatalf("upload after the second PUT = %v, want it still confirmed (the pin decides at publish time)", r.Body["status"])
	}

	r := b.Must(b.Call("POST", "/v1/jobs", tok, map[string]any{"items": []any{map[string]any{"uploadId": up}}, "params": map[string]any{"title": "swapped"}}), 201)
	done := b.WaitStatus(tok, r.Body["id"].(string), "failed")
	e, _ := done.Body["error"].(map[string]any)
	if e["code"] != "media_changed" || e["retryable"] != false {
		t.Errorf("error = %v, want the permanent media_changed", e)
	}
	if got := done.Body["attempts"].(float64); got != 1 {
		t.Errorf("attempts = %v, want 1: a replaced object is not worth a retry", got)
	}
	if items := b.Stack.Simulator.Items(); len(items) != 0 {
		t.Errorf("the simulator received %d stash items, want none: %+v", len(items), items)
	}
	if n := len(b.Stack.Simulator.Publications()); n != 0 {
		t.Errorf("publications = %d, want 0", n)
	}
}
