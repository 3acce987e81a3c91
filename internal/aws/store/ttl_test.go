package store_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/conveyor/conveyor/internal/breaker"
	"github.com/conveyor/conveyor/internal/clock"
	"github.com/conveyor/conveyor/internal/resources"
	"github.com/conveyor/conveyor/localstack/awstest"
	"github.com/conveyor/conveyor/localstack/stack"
)

func TestMain(m *testing.M) { awstest.Main(m) }

// recordKinds names every kind of item the product writes to the table, by
// its key. A kind missing here fails TestEveryRecordTypeExpires: add it,
// with a TTL or with the reason it has none in noTTL.
func recordKind(pk, sk string) string {
	switch {
	case strings.HasPrefix(pk, "JOB#") && sk == "JOB":
		return "job"
	case strings.HasPrefix(pk, "JOB#") && strings.HasPrefix(sk, "EVT#"):
		return "event"
	case strings.HasPrefix(pk, "JOB#") && strings.HasPrefix(sk, "WH#"):
		return "webhook delivery"
	case strings.HasPrefix(pk, "IDEM#"):
		return "idempotency"
	case strings.HasPrefix(pk, "IKEY#"):
		return "idempotency key"
	case strings.HasPrefix(pk, "UPL#"):
		return "upload"
	case strings.HasPrefix(pk, "ACCT#"):
		return "account"
	case pk == "TIER" || strings.HasPrefix(pk, "TIER#"):
		return "tier flag"
	case pk == "RECOVERY":
		return "recovery run"
	case strings.HasPrefix(pk, "STATS#"):
		return "hourly stats"
	case pk == "BREAKER":
		return "breaker"
	case strings.HasPrefix(pk, "HOOKS#") && sk == "SECRET":
		return "webhook secret"
	case strings.HasPrefix(pk, "HOOKS#") && strings.HasPrefix(sk, "EP#"):
		return "webhook endpoint"
	case strings.HasPrefix(pk, "HOOKS#") && sk == "EPS":
		return "webhook endpoints summary"
	case strings.HasPrefix(pk, "SSE#") && strings.HasPrefix(sk, "SLOT#"):
		return "stream slot"
	case strings.HasPrefix(pk, "DEPTH#") && sk == "DEPTH":
		return "queue depth"
	case strings.HasPrefix(pk, "RATE#") && sk == "RATE":
		return "rate bucket"
	case strings.HasPrefix(pk, "ACTIVE#") && sk == "ACTIVE":
		return "active jobs"
	}
	return ""
}

// noTTL are the record kinds that never expire, and why (docs/retention.md,
// "Every record expires").
var noTTL = map[string]string{
	"tier flag":                 "an operator's pause holds until an operator resumes the tier; four tiers × store.TierFlagShards copies at most",
	"account":                   "a connection lasts until the user replaces it; a scheduled job may need it a year later",
	"webhook secret":            "the user's receivers verify with it for as long as they exist; rotation replaces it, one item per user",
	"webhook endpoint":          "a user's configuration, until the user deletes it; at most 20 per user",
	"queue depth":               "an owner's exact count of its jobs in a tier's queue and backlog: it must outlive every job it counts; store.DepthShards items per owner and tier that ever had a job counted",
	"active jobs":               "an owner's exact count of its active jobs (its quota): it must outlive every job it counts; one item per owner that ever had a job counted",
	"webhook endpoints summary": "the list of the user's endpoints, kept with them: one item per user who ever had one or whose events were relayed",
}

// TestEveryRecordTypeExpires drives one job through its whole life — with a
// webhook, an upload left pending, a breaker failure, a paused tier and
// both retention stages — then reads the test's whole table and checks that
// every record carries a TTL, or is a documented exception.
func TestEveryRecordTypeExpires(t *testing.T) {
	t.Parallel()
	clk := clock.NewSimulated(time.Now().UTC())
	b := awstest.Setup(t, map[string]string{"CONVEYOR_STALE_AFTER": "1h", "CONVEYOR_DELETE_AFTER": "2h", "CONVEYOR_RECOVERY_INTERVAL": "1h", "CONVEYOR_RETENTION_INTERVAL": "1h", "CONVEYOR_SCHEDULE_INTERVAL": "200ms"},
		stack.Options{Now: clk.Now})
	ctx := context.Background()
	app := b.Stack.App
	hooks := make(chan struct{}, 10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNoContent)
		hooks <- struct{}{}
	}))
	defer srv.Close()

	tok := b.Token("u-ttl", "user", "pro")
	b.Must(b.Call("POST", "/v1/webhooks", tok, map[string]any{"url": "https://hooks.example.com/ttl", "events": []string{"job.stale"}}), 201)
	b.Connect(tok)
	up := b.Upload(tok, awstest.PNG(t, 4))
	b.Must(b.Call("POST", "/v1/uploads/sign", tok, map[string]any{"filename": "never.png", "contentType": "image/png", "size": 10}), 201)
	id := b.Must(b.Call("POST", "/v1/jobs", tok, map[string]any{"items": []any{map[string]any{"uploadId": up}},
		"params": map[string]any{"title": "ttl"}, "webhookUrl": srv.URL + "/hook"}, "Idempotency-Key", "ttl-1"), 201).Body["id"].(string)
	b.WaitStatus(tok, id, "succeeded")
	select {
	case <-hooks:
	case <-time.After(30 * time.Second):
		t.Fatal("the webhook never arrived")
	}
	b.Eventually(func() bool { return len(scan(t, b, "webhook delivery")) > 0 }, "the webhook delivery to be recorded")
	if err := app.Breaker.Record(ctx, breaker.Failure, 0, "host:ttl.example"); err != nil {
		t.Fatal(err)
	}
	b.Must(b.Call("POST", "/v1/admin/tiers/low/pause", b.Token("ops", "admin", "pro"), nil), 200)
	clk.Advance(61 * time.Minute)
	if res, err := app.Recoverer.Retain(ctx, nil); err != nil || res.Staled != 1 || res.MediaExpired != 1 {
		t.Fatalf("retention run = %+v, %v", res, err)
	}

	seen := map[string]int{}
	for _, item := range scan(t, b, "") {
		pk, sk := attr(item, resources.AttrPK), attr(item, resources.AttrSK)
		kind := recordKind(pk, sk)
		if kind == "" {
			t.Errorf("a record kind this test does not know: pk %q sk %q — add it to recordKind", pk, sk)
			continue
		}
		seen[kind]++
		ttl, ok := item[resources.AttrExpiresAt].(*types.AttributeValueMemberN)
		switch _, exempt := noTTL[kind]; {
		case exempt && ok:
			t.Errorf("%s (%s %s) has a TTL but is listed as an exception", kind, pk, sk)
		case !exempt && !ok:
			t.Errorf("%s (%s %s) has no %s", kind, pk, sk, resources.AttrExpiresAt)
		case !exempt && ttl.Value <= "0":
			t.Errorf("%s (%s %s) has TTL %s", kind, pk, sk, ttl.Value)
		}
	}
	for _, kind := range []string{"job", "event", "webhook delivery", "idempotency", "idempotency key", "upload", "account", "tier flag", "recovery run", "hourly stats", "breaker", "webhook secret", "webhook endpoint", "webhook endpoints summary", "queue depth", "rate bucket", "active jobs"} {
		if seen[kind] == 0 {
			t.Errorf("no %s record was written: the test no longer covers it", kind)
		}
	}
	t.Logf("records by kind: %v", seen)
}

// scan reads the test's table (a Scan is fine in a test, never in the
// product), keeping the records of kind, or all when kind is "".
func scan(t *testing.T, b *awstest.Bundle, kind string) []map[string]types.AttributeValue {
	t.Helper()
	var out []map[string]types.AttributeValue
	in := &dynamodb.ScanInput{TableName: aws.String(b.Stack.Config.Table), ConsistentRead: aws.Bool(true)}
	for {
		res, err := b.Stack.App.Clients.DynamoDB.Scan(context.Background(), in)
		if err != nil {
			t.Fatal(err)
		}
		for _, item := range res.Items {
			if kind == "" || recordKind(attr(item, resources.AttrPK), attr(item, resources.AttrSK)) == kind {
				out = append(out, item)
			}
		}
		if len(res.LastEvaluatedKey) == 0 {
			return out
		}
		in.ExclusiveStartKey = res.LastEvaluatedKey
	}
}

func attr(item map[string]types.AttributeValue, name string) string {
	v, _ := item[name].(*types.AttributeValueMemberS)
	if v == nil {
		return ""
	}
	return v.Value
}
