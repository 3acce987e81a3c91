package emulator_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/conveyor/conveyor/internal/aws/awsclient"
	"github.com/conveyor/conveyor/localstack/emulator"
)

// TestStartAllServesEachServiceAndPausesBoth starts moto and DynamoDB Local,
// checks that each serves its services through one configuration, and that
// Pause freezes both.
func TestStartAllServesEachServiceAndPausesBoth(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, err := emulator.StartAll(ctx, emulator.AllOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Stop() })
	t.Logf("started: moto in %s, DynamoDB Local in %s", e.Moto.Started, e.DynamoDB.Started)
	ep := e.Endpoints()
	if ep.Default == ep.DynamoDB {
		t.Fatalf("one endpoint for both emulators: %+v", ep)
	}
	c := awsclient.New(awsclient.ForEndpoint(ep, ""))
	if _, err := c.DynamoDB.ListTables(ctx, &dynamodb.ListTablesInput{}); err != nil {
		t.Fatalf("DynamoDB Local: %v", err)
	}
	if _, err := c.SQS.ListQueues(ctx, &sqs.ListQueuesInput{}); err != nil {
		t.Fatalf("moto: %v", err)
	}
	// DynamoDB Local is the one that answered: its own validation message.
	_, err = c.DynamoDB.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String("x")})
	if err == nil {
		t.Fatal("DescribeTable of a one-letter table name succeeded")
	}

	thaw := e.Freeze()
	for name, ready := range map[string]func(context.Context, string) error{ep.Default: emulator.Ready, ep.DynamoDB: emulator.DynamoDBReady} {
		cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		if err := ready(cctx, name); err == nil {
			t.Errorf("%s answered while paused", name)
		}
		cancel()
	}
	thaw()
	if err := emulator.DynamoDBReady(ctx, ep.DynamoDB); err != nil {
		t.Errorf("DynamoDB Local after the pause: %v", err)
	}
	if err := emulator.Ready(ctx, ep.Default); err != nil {
		t.Errorf("moto after the pause: %v", err)
	}
}

func TestEngineNamesTheDynamoDBEmulator(t *testing.T) {
	t.Setenv("CONVEYOR_DYNAMODB_ENGINE", "")
	for in, want := range map[string]string{"": emulator.EngineDynamoDBLocal, emulator.EngineDynamoDBLocal: emulator.EngineDynamoDBLocal, emulator.EngineDynoxide: emulator.EngineDynoxide} {
		if got, err := emulator.Engine(in); err != nil || got != want {
			t.Errorf("emulator.Engine(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	t.Setenv("CONVEYOR_DYNAMODB_ENGINE", emulator.EngineDynoxide)
	if got, _ := emulator.Engine(""); got != emulator.EngineDynoxide {
		t.Errorf("with CONVEYOR_DYNAMODB_ENGINE=dynoxide, emulator.Engine(\"\") = %q", got)
	}
	if _, err := emulator.Engine("localstack"); err == nil {
		t.Error("an unknown engine is accepted")
	}
}
