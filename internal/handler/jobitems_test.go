package handler_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/conveyor/conveyor/internal/config"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/resources"
	"github.com/conveyor/conveyor/internal/testfactory"
	"github.com/conveyor/conveyor/localstack/awstest"
)

// TestJobItemsFollowTheConfiguration: a function's store writes compact job
// items (phases and items in jobZ), and with CONVEYOR_JOB_ITEMS=attributes
// — the first deploy of compact items — every attribute, as code from
// before reads them (docs/migrations.md).
func TestJobItemsFollowTheConfiguration(t *testing.T) {
	t.Parallel()
	res := awstest.Provision(t)
	ctx := context.Background()
	for mode, want := range map[string]string{"": "jobZ", config.JobItemsAttributes: "phases"} {
		vars := map[string]string{}
		if mode != "" {
			vars[config.VarJobItems] = mode
		}
		env := res.Function(t, resources.FuncAPI, vars)
		st := env.Store(env.DynamoDB())
		j := testfactory.Build(testfactory.JobOpts{Owner: "u-items", At: time.Now().UTC()})
		if err := st.ImportJobs(ctx, []job.Job{j}); err != nil {
			t.Fatal(err)
		}
		out, err := env.DynamoDB().GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(env.Config.Table), ConsistentRead: aws.Bool(true),
			Key: map[string]types.AttributeValue{resources.AttrPK: &types.AttributeValueMemberS{Value: "JOB#" + j.ID},
				resources.AttrSK: &types.AttributeValueMemberS{Value: "JOB"}}})
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := out.Item[want]; !ok {
			t.Errorf("CONVEYOR_JOB_ITEMS=%q: the job item has no %s: %v", mode, want, out.Item)
		}
		if back, err := st.GetJob(ctx, j.ID); err != nil || len(back.Phases) != len(j.Phases) {
			t.Errorf("CONVEYOR_JOB_ITEMS=%q: read back %+v, %v", mode, back, err)
		}
	}
}
