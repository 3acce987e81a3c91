package schedule_test

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/conveyor/conveyor/localstack/awstest"
	"github.com/conveyor/conveyor/localstack/stack"
)

// TestTemplateIsStoredAsAMap: a schedule's job template is a map attribute
// of its item (readable in the console, like a job's params), and reads
// back as the template it was.
func TestTemplateIsStoredAsAMap(t *testing.T) {
	t.Parallel()
	b := awstest.Setup(t, nil, stack.Options{DisablePollers: true})
	tok := b.Token("u-sched-item", "user", "enterprise")
	created := b.Must(b.Call("POST", "/v1/schedules", tok, map[string]any{"name": "stored", "rate": "1h", "job": template}), 201)
	id := created.Body["id"].(string)
	res, err := b.Stack.App.Clients.DynamoDB.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(b.Stack.Config.Table),
		ConsistentRead: aws.Bool(true), Key: map[string]types.AttributeValue{
			"pk": &types.AttributeValueMemberS{Value: "SCHED#u-sched-item"}, "sk": &types.AttributeValueMemberS{Value: id}}})
	if err != nil {
		t.Fatal(err)
	}
	m, ok := res.Item["job"].(*types.AttributeValueMemberM)
	if !ok {
		t.Fatalf("the template is stored as %T, want a map", res.Item["job"])
	}
	if typ, _ := m.Value["type"].(*types.AttributeValueMemberS); typ == nil || typ.Value != "http" {
		t.Errorf("the stored template's type is %#v, want http", m.Value["type"])
	}
	one := b.Must(b.Call("GET", "/v1/schedules/"+id, tok, nil), 200)
	job, _ := one.Body["job"].(map[string]any)
	if job["type"] != "http" {
		t.Errorf("the template read back is %v", one.Body["job"])
	}
}
