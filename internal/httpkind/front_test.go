package httpkind_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/conveyor/conveyor/internal/httpkind"
	"github.com/conveyor/conveyor/internal/invalid"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/localstack/awstest"
	"github.com/conveyor/conveyor/localstack/stack"
)

func TestHTTPJobSubmissionIsValidated(t *testing.T) {
	t.Parallel()
	b := awstest.Setup(t, nil, stack.Options{DisablePollers: true})
	tok := b.Token("u-http-bad", "user", "free")
	big := make([]byte, httpkind.MaxRequestSize+1)
	for i := range big {
		big[i] = 'a'
	}
	for _, tc := range []struct {
		name   string
		body   map[string]any
		field  string
		status int
	}{
		{"no url", map[string]any{"type": "http", "params": map[string]any{"method": "GET"}}, "params.url", 400},
		{"ftp", map[string]any{"type": "http", "params": map[string]any{"url": "ftp://example.com/x"}}, "params.url", 400},
		{"bad method", map[string]any{"type": "http", "params": map[string]any{"url": "http://127.0.0.1/x", "method": "BREW"}}, "params.method", 400},
		{"host header", map[string]any{"type": "http", "params": map[string]any{"url": "http://127.0.0.1/x", "headers": map[string]string{"host": "evil"}}}, "params.headers.Host", 400},
		{"too big", map[string]any{"type": "http", "params": map[string]any{"url": "http://127.0.0.1/x", "body": string(big)}}, "params", 400},
		{"timeout", map[string]any{"type": "http", "params": map[string]any{"url": "http://127.0.0.1/x", "timeoutMs": 600000}}, "params.timeoutMs", 400},
		{"timeout of 1 ms", map[string]any{"type": "http", "params": map[string]any{"url": "http://127.0.0.1/x", "timeoutMs": 1}}, "params.timeoutMs", 400},
		{"timeout below 400 ms", map[string]any{"type": "http", "params": map[string]any{"url": "http://127.0.0.1/x", "timeoutMs": 399}}, "params.timeoutMs", 400},
		{"control character in a value", map[string]any{"type": "http", "params": map[string]any{"url": "http://127.0.0.1/x", "headers": map[string]string{"x-key": "a\x01b"}}}, "params.headers.X-Key", 400},
		{"invalid header name", map[string]any{"type": "http", "params": map[string]any{"url": "http://127.0.0.1/x", "headers": map[string]string{"x(key)": "v"}}}, "params.headers", 400},
		{"unknown param", map[string]any{"type": "http", "params": map[string]any{"url": "http://127.0.0.1/x", "retries": 3}}, "params", 400},
		{"items", map[string]any{"type": "http", "items": []any{map[string]any{"uploadId": "upl_aaaaaaaaaaaaaaaaaaaaaaaaaa"}}, "params": map[string]any{"url": "http://127.0.0.1/x"}}, "items", 400},
		{"unknown type", map[string]any{"type": "ftp", "params": map[string]any{}}, "type", 400},
	} {
		r := b.Call("POST", "/v1/jobs", tok, tc.body)
		if r.Status != tc.status {
			t.Errorf("%s: status %d (%s), want %d", tc.name, r.Status, r.Raw, tc.status)
			continue
		}
		if e, _ := r.Body["error"].(map[string]any); e == nil || e["field"] != tc.field {
			t.Errorf("%s: error %v, want field %q", tc.name, r.Body["error"], tc.field)
		}
	}
	// 400 ms, the minimum, is accepted.
	b.Must(b.Call("POST", "/v1/jobs", tok, map[string]any{"type": "http", "params": map[string]any{"url": "http://127.0.0.1:9/min", "timeoutMs": 400}}), 201)
	// A refused header value is not repeated in the error.
	if r := b.Call("POST", "/v1/jobs", tok, map[string]any{"type": "http", "params": map[string]any{"url": "http://127.0.0.1/x",
		"headers": map[string]string{"authorization": "Bearer s3cr3t\x7f"}}}); r.Status != 400 || strings.Contains(string(r.Raw), "s3cr3t") {
		t.Errorf("a bad header value: %d %s, want a 400 that does not echo the value", r.Status, r.Raw)
	}
	// The same request twice (header case, method case aside) is one job.
	p := map[string]any{"url": "http://127.0.0.1:9/x", "headers": map[string]string{"x-a": "1"}}
	first := b.Must(b.Call("POST", "/v1/jobs", tok, map[string]any{"type": "http", "params": p}), 201)
	p2 := map[string]any{"url": "http://127.0.0.1:9/x", "method": "post", "headers": map[string]string{"X-A": "1"}, "timeoutMs": 10000}
	again := b.Must(b.Call("POST", "/v1/jobs", tok, map[string]any{"type": "http", "params": p2}), 200)
	if again.Body["id"] != first.Body["id"] {
		t.Errorf("an identical http job made a second job")
	}
}

func TestPrivateTargetsAreRefusedOutsideLocal(t *testing.T) {
	t.Parallel()
	k := httpkind.New(httpkind.Config{})
	ctx := context.Background()
	prod := job.ValidationEnv{Local: false}
	for _, u := range []string{"https://127.0.0.1/x", "https://10.0.0.8/x", "https://[::1]/x", "https://169.254.169.254/latest/meta-data", "http://93.184.216.34/x", "https://localhost/x"} {
		spec, err := k.Normalize(job.Spec{Params: json.RawMessage(`{"url":"` + u + `"}`)})
		if err != nil {
			t.Fatal(err)
		}
		var fe *invalid.FieldError
		if err := k.Validate(ctx, prod, spec); !errors.As(err, &fe) || fe.Field != "params.url" {
			t.Errorf("%s outside local: %v, want a params.url error", u, err)
		}
		if err := k.Validate(ctx, job.ValidationEnv{Local: true}, spec); err != nil {
			t.Errorf("%s in local: %v, want it allowed", u, err)
		}
	}
}

// TestSplitSecretsRedactsAndJoinPutsBack: a template's header values come
// out whole and go back where they were; nothing else of the params moves.
func TestSplitSecretsRedactsAndJoinPutsBack(t *testing.T) {
	k := httpkind.New(httpkind.Config{})
	in := job.Spec{Params: json.RawMessage(`{"method":"PUT","url":"https://example.com/x","headers":{"Authorization":"Bearer s3cret","X-A":"1"},"body":"<b>"}`)}
	kept, secrets, err := k.SplitSecrets(in)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(kept.Params), "s3cret") || !strings.Contains(string(kept.Params), `"Authorization":"`+httpkind.Redacted+`"`) {
		t.Errorf("kept params %s, want every header value redacted", kept.Params)
	}
	if strings.Contains(string(kept.Params), "timeoutMs") {
		t.Errorf("kept params %s, want the params as given (no field added)", kept.Params)
	}
	back, err := k.JoinSecrets(kept, secrets)
	if err != nil {
		t.Fatal(err)
	}
	var want, got httpkind.Params
	if err := json.Unmarshal(in.Params, &want); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(back.Params, &got); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("joined %+v, want %+v", got, want)
	}
	if _, none, err := k.SplitSecrets(job.Spec{Params: json.RawMessage(`{"url":"https://example.com/"}`)}); err != nil || none != nil {
		t.Errorf("params without headers: secrets %q (%v), want none", none, err)
	}
	if _, err := k.JoinSecrets(kept, []byte(`{"X-A":"1"}`)); err == nil {
		t.Error("joining values that lack a header the template names succeeded")
	}
}
