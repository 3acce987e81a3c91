package schedule_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/conveyor/conveyor/internal/httpkind"
	"github.com/conveyor/conveyor/localstack/awstest"
	"github.com/conveyor/conveyor/localstack/stack"
)

// TestATemplatesHeaderValuesAreSealed: a recurring schedule of an http
// job keeps its header values as a job does — sealed, never stored,
// listed, shown or kept in the idempotency record in the clear — and each
// tick's request still carries them.
func TestATemplatesHeaderValuesAreSealed(t *testing.T) {
	t.Parallel()
	const secret = "Bearer tmpl-4f1c9e7a-secret"
	var mu sync.Mutex
	var got []string
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Header.Get("Authorization"))
		mu.Unlock()
	}))
	defer target.Close()
	b := awstest.Setup(t, nil, stack.Options{})
	tok := b.Token("u-sealed", "user", "enterprise")
	ctx := context.Background()

	tmpl := map[string]any{"type": "http", "params": map[string]any{"method": "POST", "url": target.URL + "/tick", "body": "{}",
		"headers": map[string]any{"Authorization": secret, "X-Plain": "not secret either"}}}
	created := b.Must(b.Call("POST", "/v1/schedules", tok, map[string]any{"name": "sealed", "rate": "1m", "timezone": "UTC", "job": tmpl},
		"Idempotency-Key", "sealed-1"), 201)
	id := created.Body["id"].(string)
	for what, r := range map[string]awstest.Response{
		"the create's answer": created,
		"its replay":          b.Must(b.Call("POST", "/v1/schedules", tok, map[string]any{"name": "sealed", "rate": "1m", "timezone": "UTC", "job": tmpl}, "Idempotency-Key", "sealed-1"), 201),
		"GET":                 b.Must(b.Call("GET", "/v1/schedules/"+id, tok, nil), 200),
		"the list":            b.Must(b.Call("GET", "/v1/schedules", tok, nil), 200),
	} {
		if bytes.Contains(r.Raw, []byte("tmpl-4f1c9e7a")) || bytes.Contains(r.Raw, []byte("not secret either")) {
			t.Errorf("%s shows a header value: %s", what, r.Raw)
		}
		if !bytes.Contains(r.Raw, []byte(httpkind.Redacted)) {
			t.Errorf("%s does not show the header names with %s: %s", what, httpkind.Redacted, r.Raw)
		}
	}

	// A tick: the job's request carries the values.
	if _, err := b.Stack.Schedules.RunOnce(ctx, time.Now().Add(90*time.Second)); err != nil {
		t.Fatalf("firing the schedules: %v", err)
	}
	b.Eventually(func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) > 0
	}, "the tick's http job calling the target")
	mu.Lock()
	if got[0] != secret {
		t.Errorf("the tick's request had Authorization %q, want the template's value", got[0])
	}
	mu.Unlock()

	// No item of the table holds a value in the clear: the schedule, its
	// idempotency record, the tick's job.
	items := 0
	p := dynamodb.NewScanPaginator(b.Stack.App.Clients.DynamoDB, &dynamodb.ScanInput{TableName: aws.String(b.Stack.Config.Table)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range page.Items {
			items++
			if s := fmt.Sprint(flatten(it)); strings.Contains(s, "tmpl-4f1c9e7a") || strings.Contains(s, "not secret either") {
				t.Errorf("a stored item holds a header value in the clear: %s", s)
			}
		}
	}
	t.Logf("%d items read, none with a header value", items)
}

// flatten renders an item's values as text, nested ones included.
func flatten(v any) []string {
	var out []string
	switch x := v.(type) {
	case map[string]types.AttributeValue:
		for k, a := range x {
			out = append(out, k)
			out = append(out, flatten(a)...)
		}
	case *types.AttributeValueMemberS:
		out = append(out, x.Value)
	case *types.AttributeValueMemberB:
		out = append(out, string(x.Value))
	case *types.AttributeValueMemberM:
		out = append(out, flatten(x.Value)...)
	case *types.AttributeValueMemberL:
		for _, a := range x.Value {
			out = append(out, flatten(a)...)
		}
	case *types.AttributeValueMemberSS:
		out = append(out, x.Value...)
	}
	return out
}
