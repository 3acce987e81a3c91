package awsclient_test

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"

	"github.com/conveyor/conveyor/internal/aws/awsclient"
	"github.com/conveyor/conveyor/internal/resources"
	"github.com/conveyor/conveyor/localstack/awstest"
)

func TestMain(m *testing.M) { awstest.Main(m) }

// TestCounterSumsCapacityUnits: the counter asks DynamoDB what each call
// consumed, without changing the caller's input, and sums read and write
// units, the write units by table and index: an item that enters an index
// costs write units there too.
func TestCounterSumsCapacityUnits(t *testing.T) {
	t.Parallel()
	env := awstest.Provision(t)
	counter := awsclient.NewCounter()
	db := dynamodb.NewFromConfig(counter.Attach(env.Config))
	ctx := context.Background()
	table := env.Res.Definition.Table.Name
	s := func(v string) *types.AttributeValueMemberS { return &types.AttributeValueMemberS{Value: v} }
	in := &dynamodb.PutItemInput{TableName: aws.String(table), Item: map[string]types.AttributeValue{
		resources.AttrPK: s("COUNT#1"), resources.AttrSK: s("x"),
		resources.AttrOwner: s("u1"), resources.AttrCreatedKey: s("2026-11-23#1"), // enters byOwner
	}}
	if _, err := db.PutItem(ctx, in); err != nil {
		t.Fatal(err)
	}
	if in.ReturnConsumedCapacity != "" {
		t.Errorf("the caller's input was changed: ReturnConsumedCapacity %q", in.ReturnConsumedCapacity)
	}
	if _, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: map[string]types.AttributeValue{
		resources.AttrPK: s("COUNT#1"), resources.AttrSK: s("x")}, ConsistentRead: aws.Bool(true)}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{table: {
		Keys: []map[string]types.AttributeValue{{resources.AttrPK: s("COUNT#1"), resources.AttrSK: s("x")}}, ConsistentRead: aws.Bool(true)}}}); err != nil {
		t.Fatal(err)
	}
	u := counter.Units()
	if u["write"] < 2 || u["write table"] < 1 || u["write "+resources.IndexByOwner] < 1 {
		t.Errorf("write units %v: want ≥ 1 in the table and ≥ 1 in %s", u, resources.IndexByOwner)
	}
	if u["read"] < 2 {
		t.Errorf("read units %v: want ≥ 1 for each of two consistent reads (GetItem, BatchGetItem)", u)
	}
	counter.Reset()
	if u := counter.Units(); len(u) != 0 {
		t.Errorf("after Reset: %v", u)
	}
}

// TestUncountedRequestsAreNotCounted: a request made with an Uncounted
// context (a local stand-in's) is sent but not counted.
func TestUncountedRequestsAreNotCounted(t *testing.T) {
	t.Parallel()
	env := awstest.Provision(t)
	counter := awsclient.NewCounter()
	db := dynamodb.NewFromConfig(counter.Attach(env.Config))
	key := map[string]types.AttributeValue{resources.AttrPK: &types.AttributeValueMemberS{Value: "COUNT#2"}, resources.AttrSK: &types.AttributeValueMemberS{Value: "x"}}
	get := &dynamodb.GetItemInput{TableName: aws.String(env.Res.Definition.Table.Name), Key: key}
	if _, err := db.GetItem(awsclient.Uncounted(context.Background()), get); err != nil {
		t.Fatal(err)
	}
	if n := counter.Total(); n != 0 {
		t.Errorf("an uncounted request was counted: %v", counter.Snapshot())
	}
	if _, err := db.GetItem(context.Background(), get); err != nil {
		t.Fatal(err)
	}
	if n := counter.Get("DynamoDB.GetItem"); n != 1 {
		t.Errorf("a counted request: %v", counter.Snapshot())
	}
}

// TestCounterCountsTheEventsPut: EventBridge bills each event, so the
// counter notes the entries of every PutEvents beside the request.
func TestCounterCountsTheEventsPut(t *testing.T) {
	t.Parallel()
	env := awstest.Provision(t)
	counter := awsclient.NewCounter()
	eb := eventbridge.NewFromConfig(counter.Attach(env.Config))
	entry := ebtypes.PutEventsRequestEntry{EventBusName: aws.String(env.Res.Definition.EventBus), Source: aws.String("conveyor.test"),
		DetailType: aws.String("job.started"), Detail: aws.String(`{}`)}
	for _, n := range []int{3, 7} {
		in := &eventbridge.PutEventsInput{}
		for range n {
			in.Entries = append(in.Entries, entry)
		}
		if _, err := eb.PutEvents(context.Background(), in); err != nil {
			t.Fatal(err)
		}
	}
	if got := counter.Items()["EventBridge.PutEvents"]; got != 10 || counter.Get("EventBridge.PutEvents") != 2 {
		t.Errorf("%d events in %d PutEvents counted, want 10 in 2", got, counter.Get("EventBridge.PutEvents"))
	}
	if got, want := counter.Items()["EventBridge.PutEvents bytes"], 10*(14+len("conveyor.test")+len("job.started")+len("{}")); got != want {
		t.Errorf("%d bytes of events counted, want %d", got, want)
	}
	counter.Reset()
	if len(counter.Items()) != 0 {
		t.Errorf("after Reset: %v", counter.Items())
	}
}
