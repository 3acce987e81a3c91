package awsclient_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/conveyor/conveyor/internal/aws/awsclient"
	"github.com/conveyor/conveyor/internal/resources"
	"github.com/conveyor/conveyor/localstack/awstest"
)

// TestTransactionsArePricedItemByItem: DynamoDB Local reports a
// transaction of three equal 100-byte items entering one index as 2 table
// units and 2 index units (it sums equal per-item figures once, and doubles
// the index's as it does the table's); DynamoDB bills the table 2 per item
// per KB and each index entry 1, as outside a transaction. A counter
// pricing transactions counts 6 and 3, and, when an item's index key
// changes, the entry it leaves as well.
func TestTransactionsArePricedItemByItem(t *testing.T) {
	t.Parallel()
	env := awstest.Provision(t)
	table := env.Res.Definition.Table.Name
	ctx := context.Background()
	s := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	item := func(id, sweepAt string, size int) map[string]types.AttributeValue {
		return map[string]types.AttributeValue{resources.AttrPK: s("PRICE#" + id), resources.AttrSK: s("X"),
			resources.AttrSweepKey: s("queued#1"), resources.AttrSweepAt: s(sweepAt), "pad": s(strings.Repeat("a", size))}
	}
	tx := func(db *dynamodb.Client, prefix, sweepAt string) {
		t.Helper()
		var items []types.TransactWriteItem
		for i := range 3 {
			items = append(items, types.TransactWriteItem{Put: &types.Put{TableName: aws.String(table), Item: item(fmt.Sprint(prefix, i), sweepAt, 100)}})
		}
		if _, err := db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items}); err != nil {
			t.Fatal(err)
		}
	}

	reported := awsclient.NewCounter()
	tx(dynamodb.NewFromConfig(reported.Attach(env.Config)), "r", "1")
	priced := awsclient.NewCounter()
	priced.PriceTransactions(awsclient.NewTxPricer(dynamodb.NewFromConfig(env.Config)))
	db := dynamodb.NewFromConfig(priced.Attach(env.Config))
	tx(db, "p", "1")
	r, p := reported.Units(), priced.Units()
	t.Logf("three equal items: DynamoDB Local reports %v, priced %v", r, p)
	sweep := "write " + resources.IndexBySweep
	if p["write table"] != 6 || p[sweep] != 3 || p["write"] != 9 {
		t.Errorf("priced %v, want 6 table units (2 per item) and 3 in %s (1 per item)", p, sweep)
	}
	if priced.Get("DynamoDB.GetItem") != 0 || priced.Get("DynamoDB.DescribeTable") != 0 {
		t.Errorf("the pricer's own reads were counted: %v", priced.Snapshot())
	}

	// The same items again, their sweep time changed: each leaves its
	// entry and enters another (a unit each); the table's write of each
	// is 2.
	priced.Reset()
	tx(db, "p", "2")
	if p := priced.Units(); p["write table"] != 6 || p[sweep] != 6 {
		t.Errorf("re-keyed: priced %v, want 6 table units and 6 in %s", p, sweep)
	}
	// Unchanged: the table's write, no index write.
	priced.Reset()
	tx(db, "p", "2")
	if p := priced.Units(); p["write table"] != 6 || p[sweep] != 0 {
		t.Errorf("rewritten unchanged: priced %v, want 6 table units and none in %s", p, sweep)
	}
}

func TestItemSize(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		item map[string]types.AttributeValue
		want int
	}{
		{map[string]types.AttributeValue{"ab": &types.AttributeValueMemberS{Value: "xyz"}}, 5},
		{map[string]types.AttributeValue{"n": &types.AttributeValueMemberN{Value: "12345"}}, 1 + 4},
		{map[string]types.AttributeValue{"n": &types.AttributeValueMemberN{Value: "-0.00120"}}, 1 + 2},
		{map[string]types.AttributeValue{"b": &types.AttributeValueMemberB{Value: []byte{1, 2}}, "t": &types.AttributeValueMemberBOOL{Value: true}}, 3 + 2},
		{map[string]types.AttributeValue{"m": &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"k": &types.AttributeValueMemberS{Value: "v"}}}}, 1 + 3 + 1 + 1 + 1},
		{map[string]types.AttributeValue{"l": &types.AttributeValueMemberL{Value: []types.AttributeValue{&types.AttributeValueMemberS{Value: "ab"}}}}, 1 + 3 + 1 + 2},
	} {
		if got := awsclient.ItemSize(c.item); got != c.want {
			t.Errorf("ItemSize(%v) = %d, want %d", c.item, got, c.want)
		}
	}
}
