package webhook_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/conveyor/conveyor/internal/aws/awsclient"
	"github.com/conveyor/conveyor/internal/aws/store"
	simclock "github.com/conveyor/conveyor/internal/clock"
	"github.com/conveyor/conveyor/internal/fault"
	"github.com/conveyor/conveyor/internal/ids"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/webhook"
	"github.com/conveyor/conveyor/localstack/awstest"
)

// endpointsEnv makes Endpoints instances (each with its own cache, as
// separate function instances have) on one table, counting their requests.
type endpointsEnv struct {
	env     awstest.Env
	counter *awsclient.Counter
	clk     *simclock.Simulated
}

func newEndpointsEnv(t *testing.T) *endpointsEnv {
	t.Helper()
	return &endpointsEnv{env: awstest.Provision(t), counter: awsclient.NewCounter(), clk: simclock.NewSimulated(time.Now())}
}

func (e *endpointsEnv) instance(t *testing.T, max int) *webhook.Endpoints {
	t.Helper()
	eps, err := webhook.NewEndpoints(webhook.EndpointsConfig{
		Store: store.New(awsclient.New(e.counter.Attach(e.env.Config)).DynamoDB, e.env.Res.Definition.Table.Name, e.clk.Now),
		Local: true, Max: max, Now: e.clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	return eps
}

func endpointIDs(eps []webhook.Endpoint) []string {
	var out []string
	for _, e := range eps {
		out = append(out, e.ID)
	}
	slices.Sort(out)
	return out
}

// TestPrefetchReadsManyUsersInOneRequest: the relay's read of a batch's
// users' endpoints is one BatchGetItem once each user has a summary; a
// user without one (none yet, or from before summaries) costs one Query
// once, and the summary is stored for the next reader.
func TestPrefetchReadsManyUsersInOneRequest(t *testing.T) {
	t.Parallel()
	e := newEndpointsEnv(t)
	ctx := context.Background()
	owners := []string{"u-a-" + ids.New("t"), "u-b-" + ids.New("t"), "u-c-" + ids.New("t"), "u-d-" + ids.New("t")}
	api := e.instance(t, 0)
	want := map[string][]string{}
	for _, o := range owners[:2] {
		for range 2 {
			ep, err := api.Create(ctx, o, webhook.CreateRequest{URL: "http://127.0.0.1:9/" + o, Events: []string{job.EventSucceeded}})
			if err != nil {
				t.Fatal(err)
			}
			want[o] = append(want[o], ep.ID)
		}
		slices.Sort(want[o])
	}

	e.counter.Reset()
	if err := e.instance(t, 0).Prefetch(ctx, owners); err != nil {
		t.Fatal(err)
	}
	if got := e.counter.Snapshot(); got["DynamoDB.BatchGetItem"] != 1 || got["DynamoDB.Query"] != 2 || got["DynamoDB.PutItem"] != 2 {
		t.Errorf("first read of two users with endpoints and two without: %v; want 1 BatchGetItem, a Query and a PutItem for each user without a summary", got)
	}

	relay := e.instance(t, 0)
	e.counter.Reset()
	if err := relay.Prefetch(ctx, append(owners, owners...)); err != nil {
		t.Fatal(err)
	}
	for _, o := range owners {
		got, err := relay.Subscribed(ctx, o)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(endpointIDs(got), want[o]) {
			t.Errorf("%s subscribed %v, want %v", o, endpointIDs(got), want[o])
		}
	}
	if got := e.counter.Snapshot(); got["DynamoDB.BatchGetItem"] != 1 || e.counter.Total() != 1 {
		t.Errorf("a later instance: %v; want one BatchGetItem for the four users and nothing for Subscribed", got)
	}
}

// TestSummaryFollowsCreateAndDelete: every creation and deletion changes
// the summary in its own transaction; the limit counts what the summary
// lists; deleting an endpoint that is not there is ErrNotFound.
func TestSummaryFollowsCreateAndDelete(t *testing.T) {
	t.Parallel()
	e := newEndpointsEnv(t)
	ctx := context.Background()
	api := e.instance(t, 2)
	owner := "u-" + ids.New("t")
	a, err := api.Create(ctx, owner, webhook.CreateRequest{URL: "http://127.0.0.1:9/a", Events: []string{job.EventFailed}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := api.Create(ctx, owner, webhook.CreateRequest{URL: "http://127.0.0.1:9/b", Events: []string{job.EventFailed}})
	if err != nil {
		t.Fatal(err)
	}
	var limit *fault.Limit
	if _, err := api.Create(ctx, owner, webhook.CreateRequest{URL: "http://127.0.0.1:9/c", Events: []string{job.EventFailed}}); !errors.As(err, &limit) || limit.Code != webhook.LimitCode || limit.Max != 2 {
		t.Fatalf("a third endpoint over a limit of 2: %v", err)
	}
	if err := api.Delete(ctx, owner, a.ID); err != nil {
		t.Fatal(err)
	}
	if err := api.Delete(ctx, owner, a.ID); !errors.Is(err, webhook.ErrNotFound) {
		t.Errorf("deleting it again: %v, want ErrNotFound", err)
	}
	e.counter.Reset()
	got, err := e.instance(t, 2).Subscribed(ctx, owner)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(endpointIDs(got), []string{b.ID}) || e.counter.Get("DynamoDB.Query") != 0 {
		t.Errorf("subscribed %v (requests %v), want [%s] from the summary alone", endpointIDs(got), e.counter.Snapshot(), b.ID)
	}
	list, err := api.List(ctx, owner)
	if err != nil || !slices.Equal(endpointIDs(list), []string{b.ID}) {
		t.Errorf("List = %v, %v", endpointIDs(list), err)
	}
}

// TestAStaleSummaryIsRebuiltFromTheEndpoints: an endpoint written without
// the summary (by a deployment from before it, during a rolling update) is
// seen once the summary is SummaryRebuildAfter old.
func TestAStaleSummaryIsRebuiltFromTheEndpoints(t *testing.T) {
	t.Parallel()
	e := newEndpointsEnv(t)
	ctx := context.Background()
	owner := "u-" + ids.New("t")
	api := e.instance(t, 0)
	a, err := api.Create(ctx, owner, webhook.CreateRequest{URL: "http://127.0.0.1:9/a", Events: []string{job.EventFailed}})
	if err != nil {
		t.Fatal(err)
	}
	old := ids.New(webhook.EndpointKind)
	s := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	if _, err := e.env.Clients.DynamoDB.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(e.env.Res.Definition.Table.Name), Item: map[string]types.AttributeValue{
		"pk": s("HOOKS#" + owner), "sk": s("EP#" + old), "endpointId": s(old), "url": s("http://127.0.0.1:9/old"),
		"events": &types.AttributeValueMemberL{Value: []types.AttributeValue{s(job.EventFailed)}}, "createdAt": s(time.Now().UTC().Format(time.RFC3339Nano)), "hooksOwner": s(owner),
	}}); err != nil {
		t.Fatal(err)
	}
	got, err := e.instance(t, 0).Subscribed(ctx, owner)
	if err != nil || !slices.Equal(endpointIDs(got), []string{a.ID}) {
		t.Errorf("a fresh summary: %v, %v: want [%s]", endpointIDs(got), err, a.ID)
	}
	e.clk.Advance(webhook.SummaryRebuildAfter + time.Minute)
	got, err = e.instance(t, 0).Subscribed(ctx, owner)
	want := []string{a.ID, old}
	slices.Sort(want)
	if err != nil || !slices.Equal(endpointIDs(got), want) {
		t.Errorf("a stale summary, rebuilt: %v, %v: want %v", endpointIDs(got), err, want)
	}
	e.counter.Reset()
	if got, err = e.instance(t, 0).Subscribed(ctx, owner); err != nil || !slices.Equal(endpointIDs(got), want) || e.counter.Get("DynamoDB.Query") != 0 {
		t.Errorf("after the rebuild: %v, %v, requests %v: want %v from the stored summary", endpointIDs(got), err, e.counter.Snapshot(), want)
	}
}
