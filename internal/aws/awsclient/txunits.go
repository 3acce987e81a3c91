package awsclient

import (
	"context"
	"fmt"
	"maps"
	"math"
	"reflect"
	"slices"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dynamodbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// TxPricer prices a TransactWriteItems call by DynamoDB's published rules,
// item by item, in place of what the emulator reports. DynamoDB Local
// (3.x) sums a transaction's per-item units as a set: two items of equal
// size count once, so a transaction of a job and five 1 KB event items
// reports 2 units for the events instead of 10, and the same within each
// index. A Counter given a TxPricer (Counter.PriceTransactions) reads each
// item of the transaction before and after it (strongly consistent, through
// a client no Counter counts) and prices:
//
//   - the table: every action 2 units per KB of the larger of the item's
//     size before and after (a ConditionCheck: of its size), as DynamoDB
//     documents for transactional writes;
//   - each global secondary index: the entry the item leaves (its size as
//     projected) and the one it enters when its index keys change, or one
//     write of the larger when only projected attributes change, nothing
//     when neither does — 1 unit per KB each, as outside a transaction.
//     DynamoDB Local doubles them in a transaction, as it does the table's
//     units; DynamoDB does not. AWS's documentation states the doubling
//     for the items a transaction writes and is silent on their index
//     entries, and a capture against real DynamoDB prices an index arm
//     inside a transaction at its single-write cost while the table arm
//     doubles (a GSI key move of 1,517 bytes a side: table 4, index 4, not
//     8; the dynoxide emulator's conformance work, nubo-db/dynoxide#178
//     and #188, docs/compatibility-summary.md).
//
// Items are sized as DynamoDB sizes them: each attribute's name and value
// (a number: one byte per two significant digits, plus one; a list or map:
// 3 bytes plus one per element).
type TxPricer struct {
	db *dynamodb.Client

	mu     sync.Mutex
	tables map[string]*tableShape
}

// NewTxPricer returns a pricer reading through db, a client whose requests
// are not counted (no Counter attached, or Uncounted contexts).
func NewTxPricer(db *dynamodb.Client) *TxPricer {
	return &TxPricer{db: db, tables: map[string]*tableShape{}}
}

type indexShape struct {
	name       string
	keys       []string
	projection dynamodbtypes.ProjectionType
	include    []string
}

type tableShape struct {
	keys    []string
	indexes []indexShape
}

func (p *TxPricer) shape(ctx context.Context, table string) (*tableShape, error) {
	p.mu.Lock()
	s, ok := p.tables[table]
	p.mu.Unlock()
	if ok {
		return s, nil
	}
	out, err := p.db.DescribeTable(Uncounted(ctx), &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	if err != nil {
		return nil, fmt.Errorf("describing %s: %w", table, err)
	}
	s = &tableShape{}
	for _, k := range out.Table.KeySchema {
		s.keys = append(s.keys, aws.ToString(k.AttributeName))
	}
	for _, g := range out.Table.GlobalSecondaryIndexes {
		ix := indexShape{name: aws.ToString(g.IndexName)}
		for _, k := range g.KeySchema {
			ix.keys = append(ix.keys, aws.ToString(k.AttributeName))
		}
		if g.Projection != nil {
			ix.projection, ix.include = g.Projection.ProjectionType, g.Projection.NonKeyAttributes
		}
		s.indexes = append(s.indexes, ix)
	}
	p.mu.Lock()
	p.tables[table] = s
	p.mu.Unlock()
	return s, nil
}

// txAction is one action of a transaction: its table, key, and the item a
// Put writes.
type txAction struct {
	table string
	key   map[string]dynamodbtypes.AttributeValue
	put   map[string]dynamodbtypes.AttributeValue
	check bool
}

func (p *TxPricer) actions(ctx context.Context, in *dynamodb.TransactWriteItemsInput) ([]txAction, error) {
	var acts []txAction
	for _, it := range in.TransactItems {
		switch {
		case it.Put != nil:
			s, err := p.shape(ctx, aws.ToString(it.Put.TableName))
			if err != nil {
				return nil, err
			}
			key := map[string]dynamodbtypes.AttributeValue{}
			for _, k := range s.keys {
				key[k] = it.Put.Item[k]
			}
			acts = append(acts, txAction{table: aws.ToString(it.Put.TableName), key: key, put: it.Put.Item})
		case it.Update != nil:
			acts = append(acts, txAction{table: aws.ToString(it.Update.TableName), key: it.Update.Key})
		case it.Delete != nil:
			acts = append(acts, txAction{table: aws.ToString(it.Delete.TableName), key: it.Delete.Key})
		case it.ConditionCheck != nil:
			acts = append(acts, txAction{table: aws.ToString(it.ConditionCheck.TableName), key: it.ConditionCheck.Key, check: true})
		}
	}
	return acts, nil
}

// begin reads the items tx writes, before it is sent, and returns what
// prices it once it succeeded; nil when the items could not be read (the
// emulator's report is kept then). A Put's item after it is the item it
// wrote and a ConditionCheck's is unchanged, so only the items an Update
// or a Delete changes are read again.
func (p *TxPricer) begin(ctx context.Context, tx *dynamodb.TransactWriteItemsInput) func() map[string]float64 {
	acts, err := p.actions(ctx, tx)
	if err != nil {
		return nil
	}
	before, err := p.read(ctx, acts, func(txAction) bool { return true })
	if err != nil {
		return nil
	}
	return func() map[string]float64 {
		after, err := p.read(ctx, acts, func(a txAction) bool { return a.put == nil && !a.check })
		if err != nil {
			return nil
		}
		for i, a := range acts {
			if a.put != nil {
				after[i] = a.put
			}
		}
		units, err := p.price(ctx, acts, before, after)
		if err != nil {
			return nil
		}
		return units
	}
}

// read returns the current item of every action that wants it (nil where
// there is none, or it was not read).
func (p *TxPricer) read(ctx context.Context, acts []txAction, wants func(txAction) bool) ([]map[string]dynamodbtypes.AttributeValue, error) {
	out := make([]map[string]dynamodbtypes.AttributeValue, len(acts))
	for i, a := range acts {
		if !wants(a) {
			continue
		}
		got, err := p.db.GetItem(Uncounted(ctx), &dynamodb.GetItemInput{TableName: aws.String(a.table), Key: a.key, ConsistentRead: aws.Bool(true)})
		if err != nil {
			return nil, fmt.Errorf("reading an item of a transaction to price it: %w", err)
		}
		out[i] = got.Item
	}
	return out, nil
}

// price returns the transaction's units as Counter.Units keys them.
func (p *TxPricer) price(ctx context.Context, acts []txAction, before, after []map[string]dynamodbtypes.AttributeValue) (map[string]float64, error) {
	units := map[string]float64{}
	for i, a := range acts {
		s, err := p.shape(ctx, a.table)
		if err != nil {
			return nil, err
		}
		old, cur := before[i], after[i]
		size := ItemSize(old)
		if !a.check {
			size = max(size, ItemSize(cur))
		}
		table := 2 * kb(size)
		units["write table"] += table
		units["write"] += table
		if a.check {
			continue
		}
		for _, ix := range s.indexes {
			u := indexUnits(s.keys, ix, old, cur)
			if u > 0 {
				units["write "+ix.name] += u
				units["write"] += u
			}
		}
	}
	return units, nil
}

// kb is the write units of an item of n bytes: one per KB, at least one.
func kb(n int) float64 { return max(1, math.Ceil(float64(n)/1024)) }

// indexUnits is the units one write costs index ix, before old and after
// cur (either nil: the item did not exist, or was deleted).
func indexUnits(tableKeys []string, ix indexShape, old, cur map[string]dynamodbtypes.AttributeValue) float64 {
	in := func(item map[string]dynamodbtypes.AttributeValue) bool {
		if item == nil {
			return false
		}
		for _, k := range ix.keys {
			if _, ok := item[k]; !ok {
				return false
			}
		}
		return true
	}
	oldIn, curIn := in(old), in(cur)
	oldEntry, curEntry := projected(tableKeys, ix, old), projected(tableKeys, ix, cur)
	switch {
	case !oldIn && !curIn:
		return 0
	case !oldIn:
		return kb(ItemSize(curEntry))
	case !curIn:
		return kb(ItemSize(oldEntry))
	}
	for _, k := range ix.keys {
		if !equalValue(old[k], cur[k]) {
			return kb(ItemSize(oldEntry)) + kb(ItemSize(curEntry))
		}
	}
	if maps.EqualFunc(oldEntry, curEntry, equalValue) {
		return 0
	}
	return kb(max(ItemSize(oldEntry), ItemSize(curEntry)))
}

// projected is what index ix keeps of item.
func projected(tableKeys []string, ix indexShape, item map[string]dynamodbtypes.AttributeValue) map[string]dynamodbtypes.AttributeValue {
	if item == nil || ix.projection == dynamodbtypes.ProjectionTypeAll {
		return item
	}
	out := map[string]dynamodbtypes.AttributeValue{}
	for _, k := range slices.Concat(tableKeys, ix.keys, ix.include) {
		if v, ok := item[k]; ok {
			out[k] = v
		}
	}
	return out
}

// equalValue compares two attribute values by what they hold (a list's or
// a map's elements are pointers too).
func equalValue(a, b dynamodbtypes.AttributeValue) bool { return reflect.DeepEqual(a, b) }

// ItemSize is an item's size in bytes as DynamoDB counts it for capacity:
// every attribute's name and value.
func ItemSize(item map[string]dynamodbtypes.AttributeValue) int {
	n := 0
	for name, v := range item {
		n += len(name) + valueSize(v)
	}
	return n
}

func valueSize(v dynamodbtypes.AttributeValue) int {
	switch v := v.(type) {
	case *dynamodbtypes.AttributeValueMemberS:
		return len(v.Value)
	case *dynamodbtypes.AttributeValueMemberN:
		return numberSize(v.Value)
	case *dynamodbtypes.AttributeValueMemberB:
		return len(v.Value)
	case *dynamodbtypes.AttributeValueMemberBOOL, *dynamodbtypes.AttributeValueMemberNULL:
		return 1
	case *dynamodbtypes.AttributeValueMemberSS:
		return sum(v.Value, func(s string) int { return len(s) })
	case *dynamodbtypes.AttributeValueMemberNS:
		return sum(v.Value, numberSize)
	case *dynamodbtypes.AttributeValueMemberBS:
		return sum(v.Value, func(b []byte) int { return len(b) })
	case *dynamodbtypes.AttributeValueMemberL:
		return 3 + sum(v.Value, func(e dynamodbtypes.AttributeValue) int { return 1 + valueSize(e) })
	case *dynamodbtypes.AttributeValueMemberM:
		n := 3
		for k, e := range v.Value {
			n += 1 + len(k) + valueSize(e)
		}
		return n
	}
	return 0
}

// sum adds size over xs.
func sum[T any](xs []T, size func(T) int) int {
	n := 0
	for _, x := range xs {
		n += size(x)
	}
	return n
}

// numberSize: one byte per two significant digits, plus one.
func numberSize(s string) int {
	digits := strings.TrimLeft(strings.Map(func(r rune) rune {
		if r >= '0' && r <= '9' {
			return r
		}
		return -1
	}, strings.SplitN(strings.ToLower(s), "e", 2)[0]), "0")
	digits = strings.TrimRight(digits, "0")
	return (len(digits)+1)/2 + 1
}
