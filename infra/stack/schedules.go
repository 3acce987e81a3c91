package stack

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsscheduler"
	"github.com/aws/jsii-runtime-go"

	"github.com/conveyor/conveyor/internal/resources"
)

// SuppressUserSchedules: the schedules function creates one EventBridge
// Scheduler schedule per user's recurring schedule, named by its id at run
// time, so its rights cover the environment's group and nothing else (the
// partition, region and account are tokens, or literals in a stack bound to its
// account).
var SuppressUserSchedules = Suppression{
	Rule:      "AwsSolutions-IAM5",
	Reason:    "Users' recurring schedules are created at run time, one per definition, named by their id: the schedules function may manage any schedule of this environment's schedule group only.",
	AppliesTo: []string{`/^Resource::arn:(<AWS::Partition>|aws[a-z-]*):scheduler:(<AWS::Region>|[a-z0-9-]+):(<AWS::AccountId>|[0-9]{12}):schedule\/.*\/\*$/`},
}

// userSchedules is what the users' recurring schedules (internal/schedule)
// need: the environment's schedule group, the role EventBridge Scheduler
// assumes to invoke the recovery function with each tick, and the
// schedules function's right to manage the group's schedules and to pass
// that role (the api function has neither: resources.HTTPRoutes sends the
// schedules' routes to their own function).
func (b *builder) userSchedules() {
	group := awsscheduler.NewCfnScheduleGroup(b.stack, jsii.String("UserSchedules"), &awsscheduler.CfnScheduleGroupProps{
		Name: jsii.String(b.def.ScheduleGroup),
	})
	group.ApplyRemovalPolicy(b.removal(), nil)
	target := b.fn(resources.ScheduleTickFunction)
	role := awsiam.NewRole(b.stack, jsii.String("UserSchedulesRole"), &awsiam.RoleProps{
		AssumedBy: awsiam.NewServicePrincipal(jsii.String("scheduler.amazonaws.com"), &awsiam.ServicePrincipalOpts{
			Conditions: &map[string]any{"StringEquals": map[string]any{"aws:SourceAccount": b.stack.Account()}},
		}),
		Description: jsii.String("EventBridge Scheduler invoking the recovery function with users' schedule ticks (" + string(b.def.Env) + ")"),
	})
	role.AddToPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Effect: awsiam.Effect_ALLOW, Actions: jsii.Strings("lambda:InvokeFunction"), Resources: jsii.Strings(*target.FunctionArn()),
	}))
	schedules := awscdk.Stack_Of(b.stack).FormatArn(&awscdk.ArnComponents{
		Service: jsii.String("scheduler"), Resource: jsii.String("schedule"),
		ResourceName: jsii.String(b.def.ScheduleGroup + "/*"), ArnFormat: awscdk.ArnFormat_SLASH_RESOURCE_NAME,
	})
	owner := resources.FuncSchedules
	b.allow(owner, []string{"scheduler:CreateSchedule", "scheduler:UpdateSchedule", "scheduler:DeleteSchedule"}, schedules)
	b.allow(owner, []string{"iam:PassRole"}, role.RoleArn())
	fn := b.fn(owner)
	fn.AddEnvironment(jsii.String("CONVEYOR_SCHEDULE_GROUP"), jsii.String(b.def.ScheduleGroup), nil)
	fn.AddEnvironment(jsii.String("CONVEYOR_SCHEDULE_TARGET_ARN"), target.FunctionArn(), nil)
	fn.AddEnvironment(jsii.String("CONVEYOR_SCHEDULE_ROLE_ARN"), role.RoleArn(), nil)
	suppress(fn.Role(), true, SuppressUserSchedules)
}
