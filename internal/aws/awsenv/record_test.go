package awsenv_test

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/google/go-cmp/cmp"

	"github.com/conveyor/conveyor/internal/aws/awsenv"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/resources"
	"github.com/conveyor/conveyor/localstack/awstest"
)

const account = "123456789012"

// TestRecorderRecordsWhatIAMAuthorises sends real requests to the
// emulators through a recorded configuration and reads back what IAM
// authorises each as: a transaction item by item, a batch by table, an SQS
// batch as its single action, HeadObject as GetObject plus ListBucket (with
// the key as prefix) when the key is missing, a presigned PUT as PutObject,
// KMS with the key's ARN and the encryption context, PutEvents on the bus.
func TestRecorderRecordsWhatIAMAuthorises(t *testing.T) {
	t.Parallel()
	env := awstest.Provision(t)
	def, res := env.Res.Definition, env.Res
	var log bytes.Buffer
	cfg := awsenv.NewRecorder("api", account, &log).Attach(env.Config)
	ctx := context.Background()
	region := env.Config.Region
	table := "arn:aws:dynamodb:" + region + ":" + account + ":table/" + def.Table.Name
	s := func(v string) *ddbtypes.AttributeValueMemberS { return &ddbtypes.AttributeValueMemberS{Value: v} }
	key := func(pk string) map[string]ddbtypes.AttributeValue {
		return map[string]ddbtypes.AttributeValue{resources.AttrPK: s(pk), resources.AttrSK: s("x")}
	}

	db := dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(awstest.Endpoints(t).DynamoDB) })
	if _, err := db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []ddbtypes.TransactWriteItem{
		{Put: &ddbtypes.Put{TableName: aws.String(def.Table.Name), Item: key("A")}},
		{Update: &ddbtypes.Update{TableName: aws.String(def.Table.Name), Key: key("B"), UpdateExpression: aws.String("SET v = :v"),
			ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":v": s("1")}}},
	}}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: map[string]ddbtypes.KeysAndAttributes{
		def.Table.Name: {Keys: []map[string]ddbtypes.AttributeValue{key("A")}}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Query(ctx, &dynamodb.QueryInput{TableName: aws.String(def.Table.Name), IndexName: aws.String(resources.IndexByOwner),
		KeyConditionExpression: aws.String("#o = :o"), ExpressionAttributeNames: map[string]string{"#o": resources.AttrOwner},
		ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":o": s("u1")}}); err != nil {
		t.Fatal(err)
	}

	q := sqs.NewFromConfig(cfg)
	if _, err := q.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(res.QueueURLs[job.System]), Entries: []sqstypes.SendMessageBatchRequestEntry{
		{Id: aws.String("1"), MessageBody: aws.String("{}"), MessageGroupId: aws.String("g"), MessageDeduplicationId: aws.String("d1")}}}); err != nil {
		t.Fatal(err)
	}

	s3c := s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = true })
	missing := def.Bucket.UploadPrefix + "u1/upl_1/cat.png"
	if _, err := s3c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(def.Bucket.Name), Key: aws.String(missing)}); err == nil {
		t.Fatal("HeadObject of a missing key succeeded")
	}
	if _, err := s3.NewPresignClient(s3c).PresignPutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(def.Bucket.Name), Key: aws.String(missing)}); err != nil {
		t.Fatal(err)
	}

	k := kms.NewFromConfig(cfg)
	dk, err := k.GenerateDataKey(ctx, &kms.GenerateDataKeyInput{KeyId: aws.String(def.KMSAlias), NumberOfBytes: aws.Int32(32),
		EncryptionContext: map[string]string{"purpose": "webhook-signing", "user": "u1"}})
	if err != nil {
		t.Fatal(err)
	}
	keyARN := aws.ToString(dk.KeyId)
	if _, err := k.Decrypt(ctx, &kms.DecryptInput{CiphertextBlob: dk.CiphertextBlob,
		EncryptionContext: map[string]string{"purpose": "webhook-signing", "user": "u1"}}); err != nil {
		t.Fatal(err)
	}

	if _, err := eventbridge.NewFromConfig(cfg).PutEvents(ctx, &eventbridge.PutEventsInput{Entries: []ebtypes.PutEventsRequestEntry{
		{EventBusName: aws.String(def.EventBus), Source: aws.String("test"), DetailType: aws.String("t"), Detail: aws.String("{}")}}}); err != nil {
		t.Fatal(err)
	}

	calls, err := awsenv.Read(&log)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range calls {
		if c.Function != "api" || c.Unknown != "" {
			t.Errorf("call %+v: want function api and a known resource", c)
		}
		line := c.Operation + " " + c.Action + " " + c.Resource
		if len(c.Context) > 0 {
			line += " " + strings.Join(sortedPairs(c.Context), ",")
		}
		if c.Presigned {
			line += " presigned"
		}
		got = append(got, line)
	}
	bucket := "arn:aws:s3:::" + def.Bucket.Name
	want := []string{
		"TransactWriteItems dynamodb:PutItem " + table,
		"TransactWriteItems dynamodb:UpdateItem " + table,
		"BatchGetItem dynamodb:BatchGetItem " + table,
		"Query dynamodb:Query " + table + "/index/" + resources.IndexByOwner,
		"SendMessageBatch sqs:SendMessage " + queueARN(region, res.QueueURLs[job.System]),
		"HeadObject s3:GetObject " + bucket + "/" + missing,
		"HeadObject s3:ListBucket " + bucket + " s3:prefix=" + missing,
		"PutObject s3:PutObject " + bucket + "/" + missing + " presigned",
		"GenerateDataKey kms:GenerateDataKey " + keyARN + " kms:EncryptionContext:purpose=webhook-signing,kms:EncryptionContext:user=u1",
		"Decrypt kms:Decrypt " + keyARN + " kms:EncryptionContext:purpose=webhook-signing,kms:EncryptionContext:user=u1",
		"PutEvents events:PutEvents arn:aws:events:" + region + ":" + account + ":event-bus/" + def.EventBus,
	}
	// The transaction's items are recorded in no fixed order.
	slices.Sort(got[:2])
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("recorded accesses (-want +got):\n%s", diff)
	}
	if !strings.HasPrefix(keyARN, "arn:aws:kms:") {
		t.Errorf("the data key's KeyId %q is not the key's ARN", keyARN)
	}
}

// TestAccessesOfOperationsNotSent: what the conformance run cannot send
// to the emulators (the AWS-only platform's calls) is still derived as IAM
// authorises it.
func TestAccessesOfOperationsNotSent(t *testing.T) {
	t.Parallel()
	type moveTask struct{ SourceArn, DestinationArn *string }
	type esm struct{ UUID *string }
	type target struct{ RoleArn *string }
	type schedule struct {
		Name, GroupName *string
		Target          *target
	}
	for _, tc := range []struct {
		name string
		req  awsenv.Request
		want []awsenv.Access
	}{
		{"move task", awsenv.Request{Service: "SQS", Operation: "StartMessageMoveTask", Input: &moveTask{SourceArn: aws.String("arn:aws:sqs:r:1:dlq")}}, []awsenv.Access{
			{Action: "sqs:StartMessageMoveTask", Resource: "arn:aws:sqs:r:1:dlq"}, {Action: "sqs:ReceiveMessage", Resource: "arn:aws:sqs:r:1:dlq"},
			{Action: "sqs:DeleteMessage", Resource: "arn:aws:sqs:r:1:dlq"}, {Action: "sqs:GetQueueAttributes", Resource: "arn:aws:sqs:r:1:dlq"}}},
		{"mapping", awsenv.Request{Service: "Lambda", Operation: "UpdateEventSourceMapping", Input: &esm{UUID: aws.String("u-1")}, Region: "r", Account: "1"},
			[]awsenv.Access{{Action: "lambda:UpdateEventSourceMapping", Resource: "arn:aws:lambda:r:1:event-source-mapping:u-1"}}},
		{"schedule", awsenv.Request{Service: "Scheduler", Operation: "CreateSchedule", Region: "r", Account: "1",
			Input: &schedule{Name: aws.String("sch_1"), GroupName: aws.String("g"), Target: &target{RoleArn: aws.String("arn:aws:iam::1:role/x")}}},
			[]awsenv.Access{{Action: "scheduler:CreateSchedule", Resource: "arn:aws:scheduler:r:1:schedule/g/sch_1"},
				{Action: "iam:PassRole", Resource: "arn:aws:iam::1:role/x", Context: map[string]string{"iam:PassedToService": "scheduler.amazonaws.com"}}}},
		{"unknown", awsenv.Request{Service: "DynamoDB", Operation: "ListTables", Input: &struct{}{}},
			[]awsenv.Access{{Action: "dynamodb:ListTables", Unknown: "awsclient does not know the resource of DynamoDB ListTables"}}},
	} {
		if diff := cmp.Diff(tc.want, awsenv.Accesses(tc.req)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, diff)
		}
	}
}

func queueARN(region, url string) string {
	i := strings.LastIndex(url, "/")
	j := strings.LastIndex(url[:i], "/")
	return "arn:aws:sqs:" + region + ":" + url[j+1:i] + ":" + url[i+1:]
}

func sortedPairs(m map[string]string) []string {
	var out []string
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	slices.Sort(out)
	return out
}
