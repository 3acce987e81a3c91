package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/go-cmp/cmp"

	"github.com/conveyor/conveyor/internal/aws/store"
	"github.com/conveyor/conveyor/internal/ids"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/localstack/awstest"
)

// TestDocsAreStoredAsMaps: a job's params and result are map attributes
// (NULL when empty, the result left out when absent) in an item with every
// attribute (WriteJobAttributes), and in a compact item's jobZ, and read
// back from either as the JSON they were.
func TestDocsAreStoredAsMaps(t *testing.T) {
	t.Parallel()
	env := awstest.Provision(t)
	table := env.Res.Definition.Table.Name
	st := store.New(env.Clients.DynamoDB, table, nil)
	st.WriteJobAttributes()
	compact := store.New(env.Clients.DynamoDB, table, nil)
	ctx := context.Background()
	now := time.Now().UTC()
	for _, tc := range []struct {
		name           string
		params, result job.Doc
		wantParams     types.AttributeValue
		wantResult     types.AttributeValue // nil: no attribute
	}{
		{"both", job.Doc(`{"title":"A cat","tags":["a","b"],"n":3}`), job.Doc(`{"deviationId":"d-1"}`),
			&types.AttributeValueMemberM{Value: map[string]types.AttributeValue{
				"title": &types.AttributeValueMemberS{Value: "A cat"},
				"tags":  &types.AttributeValueMemberL{Value: []types.AttributeValue{&types.AttributeValueMemberS{Value: "a"}, &types.AttributeValueMemberS{Value: "b"}}},
				"n":     &types.AttributeValueMemberN{Value: "3"}}},
			&types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"deviationId": &types.AttributeValueMemberS{Value: "d-1"}}}},
		{"no params, no result", nil, nil, &types.AttributeValueMemberNULL{Value: true}, nil},
		{"null documents", job.Doc("null"), job.Doc("null"), &types.AttributeValueMemberNULL{Value: true}, &types.AttributeValueMemberNULL{Value: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := &job.Job{ID: ids.New(ids.Job), Owner: "u-docs", Status: job.Queued, Tier: job.Low, Params: tc.params, Result: tc.result,
				CreatedAt: now, UpdatedAt: now, Hash: ids.New("h")}
			if err := st.ImportJobs(ctx, []job.Job{*j}); err != nil {
				t.Fatal(err)
			}
			res, err := env.Clients.DynamoDB.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true),
				Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "JOB#" + j.ID}, "sk": &types.AttributeValueMemberS{Value: "JOB"}}})
			if err != nil {
				t.Fatal(err)
			}
			for name, want := range map[string]types.AttributeValue{"params": tc.wantParams, "result": tc.wantResult} {
				got, ok := res.Item[name]
				if want == nil {
					if ok {
						t.Errorf("%s: stored as %#v, want no attribute", name, got)
					}
					continue
				}
				if diff := cmp.Diff(plain(t, want), plain(t, got)); diff != "" || fmt.Sprintf("%T", got) != fmt.Sprintf("%T", want) {
					t.Errorf("%s: stored as %T (-want +got):\n%s", name, got, diff)
				}
			}
			back, err := st.GetJob(ctx, j.ID)
			if err != nil {
				t.Fatal(err)
			}
			if !jsonEqual(t, back.Params, tc.params) || !jsonEqual(t, back.Result, tc.result) {
				t.Errorf("read back params %s, result %s; want %s, %s", back.Params, back.Result, tc.params, tc.result)
			}
			j.ID = ids.New(ids.Job)
			if err := compact.ImportJobs(ctx, []job.Job{*j}); err != nil {
				t.Fatal(err)
			}
			if back, err = compact.GetJob(ctx, j.ID); err != nil {
				t.Fatal(err)
			}
			if !jsonEqual(t, back.Params, tc.params) || !jsonEqual(t, back.Result, tc.result) {
				t.Errorf("read back from a compact item params %s, result %s; want %s, %s", back.Params, back.Result, tc.params, tc.result)
			}
		})
	}
}

// plain is the Go value of a stored attribute (nil for NULL).
func plain(t *testing.T, av types.AttributeValue) any {
	t.Helper()
	var v any
	if err := attributevalue.Unmarshal(av, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// jsonEqual compares two documents as JSON values (empty ones are equal).
func jsonEqual(t *testing.T, a, b job.Doc) bool {
	t.Helper()
	var va, vb any
	if !a.Empty() {
		if err := a.Decode(&va); err != nil {
			t.Fatal(err)
		}
	}
	if !b.Empty() {
		if err := b.Decode(&vb); err != nil {
			t.Fatal(err)
		}
	}
	return cmp.Equal(va, vb)
}

// TestEncodeAndDecodeDocs: what attributevalue makes of a job.Doc field
// becomes a map and back; other attributes and the caller's item are left
// alone.
func TestEncodeAndDecodeDocs(t *testing.T) {
	t.Parallel()
	type rec struct {
		ID  string  `dynamodbav:"id"`
		Job job.Doc `dynamodbav:"job"`
	}
	item, err := attributevalue.MarshalMap(rec{ID: "s-1", Job: job.Doc(`{"type":"publish","items":[{"uploadId":"upl_1"}]}`)})
	if err != nil {
		t.Fatal(err)
	}
	if err := store.EncodeDocs(item, "job", "absent"); err != nil {
		t.Fatal(err)
	}
	m, ok := item["job"].(*types.AttributeValueMemberM)
	if !ok || len(m.Value) != 2 {
		t.Fatalf("encoded job %#v, want a map of two attributes", item["job"])
	}
	decoded, err := store.DecodeDocs(item, "job")
	if err != nil {
		t.Fatal(err)
	}
	if _, still := item["job"].(*types.AttributeValueMemberM); !still {
		t.Errorf("DecodeDocs changed its argument")
	}
	var back rec
	if err := attributevalue.UnmarshalMap(decoded, &back); err != nil {
		t.Fatal(err)
	}
	if back.ID != "s-1" || !jsonEqual(t, back.Job, job.Doc(`{"items":[{"uploadId":"upl_1"}],"type":"publish"}`)) {
		t.Errorf("read back %+v", back)
	}
	// A nil document is NULL, and reads back empty.
	item, _ = attributevalue.MarshalMap(rec{ID: "s-2"})
	_ = store.EncodeDocs(item, "job")
	if _, null := item["job"].(*types.AttributeValueMemberNULL); !null {
		t.Errorf("an empty document is stored as %#v, want NULL", item["job"])
	}
	decoded, _ = store.DecodeDocs(item, "job")
	back = rec{Job: job.Doc("x")}
	if err := attributevalue.UnmarshalMap(decoded, &back); err != nil || !back.Job.Empty() {
		t.Errorf("an empty document read back as %q, %v", back.Job, err)
	}
}
