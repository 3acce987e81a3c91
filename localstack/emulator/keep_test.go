package emulator_test

import (
	"bytes"
	"context"
	"io"
	"path/filepath"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/conveyor/conveyor/internal/aws/awsclient"
	"github.com/conveyor/conveyor/localstack/emulator"
)

// TestKeptStateOutlivesARestart writes to every kind of state `make run`
// keeps (a table's item, an object, a queued message, a key's ciphertext),
// stops both emulators, starts them again on the same data and reads it all
// back: what AWS keeps between two runs, the local stack keeps too.
func TestKeptStateOutlivesARestart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	keep := emulator.AllOptions{
		Moto:     emulator.Options{StateFile: filepath.Join(dir, "moto.state")},
		DynamoDB: emulator.DynamoDBOptions{DataDir: filepath.Join(dir, "dynamodb")},
	}
	start := func() (*emulator.Emulators, awsclient.Clients) {
		t.Helper()
		e, err := emulator.StartAll(ctx, keep)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = e.Stop() })
		return e, awsclient.New(awsclient.ForEndpoint(e.Endpoints(), ""))
	}

	e, c := start()
	objects := emulator.S3(c.Config)
	if _, err := c.DynamoDB.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String("kept"),
		KeySchema:            []ddbtypes.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: ddbtypes.KeyTypeHash}},
		AttributeDefinitions: []ddbtypes.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: ddbtypes.ScalarAttributeTypeS}},
		BillingMode:          ddbtypes.BillingModePayPerRequest,
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DynamoDB.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("kept"), Item: map[string]ddbtypes.AttributeValue{
		"pk": &ddbtypes.AttributeValueMemberS{Value: "job-1"}, "status": &ddbtypes.AttributeValueMemberS{Value: "queued"},
	}}); err != nil {
		t.Fatal(err)
	}
	if _, err := objects.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("kept-bucket")}); err != nil {
		t.Fatal(err)
	}
	if _, err := objects.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("kept-bucket"), Key: aws.String("uploads/cat.png"), Body: bytes.NewReader([]byte("meow"))}); err != nil {
		t.Fatal(err)
	}
	q, err := c.SQS.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("kept.fifo"), Attributes: map[string]string{"FifoQueue": "true", "ContentBasedDeduplication": "true"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.SQS.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: q.QueueUrl, MessageBody: aws.String("job-1"), MessageGroupId: aws.String("g")}); err != nil {
		t.Fatal(err)
	}
	key, err := c.KMS.CreateKey(ctx, &kms.CreateKeyInput{})
	if err != nil {
		t.Fatal(err)
	}
	sealed, err := c.KMS.Encrypt(ctx, &kms.EncryptInput{KeyId: key.KeyMetadata.KeyId, Plaintext: []byte("refresh-token")})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Stop(); err != nil {
		t.Fatal(err)
	}

	_, c = start()
	objects = emulator.S3(c.Config)
	item, err := c.DynamoDB.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String("kept"), Key: map[string]ddbtypes.AttributeValue{"pk": &ddbtypes.AttributeValueMemberS{Value: "job-1"}}})
	if err != nil || item.Item["status"] == nil {
		t.Fatalf("the item after a restart: %v %v", item, err)
	}
	obj, err := objects.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("kept-bucket"), Key: aws.String("uploads/cat.png")})
	if err != nil {
		t.Fatalf("the object after a restart: %v", err)
	}
	body, _ := io.ReadAll(obj.Body)
	_ = obj.Body.Close()
	if string(body) != "meow" {
		t.Errorf("the object after a restart holds %q", body)
	}
	msgs, err := c.SQS.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: q.QueueUrl})
	if err != nil || len(msgs.Messages) != 1 || aws.ToString(msgs.Messages[0].Body) != "job-1" {
		t.Fatalf("the queued message after a restart: %+v %v", msgs, err)
	}
	plain, err := c.KMS.Decrypt(ctx, &kms.DecryptInput{CiphertextBlob: sealed.CiphertextBlob})
	if err != nil || string(plain.Plaintext) != "refresh-token" {
		t.Fatalf("decrypting after a restart: %v %v", plain, err)
	}
}
