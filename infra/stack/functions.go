package stack

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/conveyor/conveyor/internal/config"
	"github.com/conveyor/conveyor/internal/resources"
)

// FunctionSpec is the sizing of one function (from the resource
// definition) and its description.
type FunctionSpec struct {
	resources.FunctionSize
	// Description says what the function does.
	Description string
}

// FunctionSpecs describes every function of the definition. A function
// added to the definition without a spec here, or without a size in
// resources.FunctionSizes, fails the synth, naming it.
var FunctionSpecs = map[string]FunctionSpec{
	resources.FuncAPI:       spec(resources.FuncAPI, "HTTP API: accounts, jobs, webhooks, dashboard (every route the others do not take)"),
	resources.FuncAdmin:     spec(resources.FuncAdmin, "HTTP API admin routes (/v1/admin/*): overview, inspector, restart, stop, DLQs, tiers, breakers"),
	resources.FuncUploads:   spec(resources.FuncUploads, "HTTP API uploads routes (/v1/uploads/*): presigned PUTs, confirm on demand, read"),
	resources.FuncSchedules: spec(resources.FuncSchedules, "HTTP API recurring schedules (/v1/schedules, /v1/schedules/*): create, list, read, pause, resume, delete"),
	resources.FuncConfirm:   spec(resources.FuncConfirm, "confirms an upload on its S3 ObjectCreated event"),
	resources.FuncPublisher: spec(resources.FuncPublisher, "publishes jobs from the high, medium and low tier queues"),
	resources.FuncSystem:    spec(resources.FuncSystem, "delivers webhooks and other system-tier work"),
	resources.FuncRecovery:  spec(resources.FuncRecovery, "requeues stuck jobs, releases scheduled ones, applies retention"),
	resources.FuncStream:    spec(resources.FuncStream, "server-sent events: a job's snapshot, then live events"),
	resources.FuncRelay:     spec(resources.FuncRelay, "relays the table's new event items to the event bus and queues their webhooks"),
}

func spec(fn, description string) FunctionSpec {
	return FunctionSpec{FunctionSize: resources.FunctionSizes[fn], Description: description}
}

// FunctionName is the deployed name of a function of def.
func FunctionName(def resources.Definition, fn string) string { return def.Prefix + "-" + fn }

// logRetention is the configured retention of the functions' and the
// API's logs (validated: one of CloudWatch Logs' periods).
func (b *builder) logRetention() awslogs.RetentionDays {
	return retentionDays[b.props.Config.LogRetentionDays]
}

// commonEnv is the configuration every function reads at cold start
// (internal/config): the resource names, URLs and ids, and the external
// API's base URL from the environment's configuration.
func (b *builder) commonEnv() map[string]*string {
	env := map[string]*string{
		config.VarEnv:           jsii.String(string(b.def.Env)),
		config.VarTable:         b.table.TableName(),
		config.VarBucket:        b.bucket.BucketName(),
		config.VarKMSKeyID:      b.key.KeyArn(),
		config.VarEventBus:      b.bus.EventBusName(),
		config.VarDeviantArtURL: jsii.String(b.props.Config.ExternalAPI.URL),
	}
	if b.readRetired {
		// A migration's stage before every replacement index exists.
		env[config.VarTableIndexes] = jsii.String(config.TableIndexesRetired)
	}
	if b.props.WriteJobAttributes {
		// The first deploy of compact job items: older code still runs.
		env[config.VarJobItems] = jsii.String(config.JobItemsAttributes)
	}
	for _, q := range b.def.Queues {
		env[config.VarQueueURL(q.Tier)] = b.queues[q.Tier].QueueUrl()
		env[config.VarDLQURL(q.Tier)] = b.dlqs[q.Tier].QueueUrl()
	}
	// Every function that sends a job reads the owners' slots; all get
	// the same, so no two send with different groups.
	for k, v := range b.props.Config.Fairness.env() {
		env[k] = jsii.String(v)
	}
	for k, v := range b.props.Config.Tracing.env() {
		env[k] = jsii.String(v)
	}
	return env
}

// layers is the functions' layers: the configured trace collector's, if any.
func (b *builder) layers(id string) *[]awslambda.ILayerVersion {
	arn := b.props.Config.Tracing.CollectorLayer
	if arn == "" {
		return nil
	}
	return &[]awslambda.ILayerVersion{awslambda.LayerVersion_FromLayerVersionArn(b.stack, jsii.String(id+"CollectorLayer"), jsii.String(arn))}
}

// secretEnv names the secrets a function may read, by ARN; the function
// fetches their values once per cold start.
func (b *builder) secretEnv(fn string) map[string]*string {
	env := map[string]*string{}
	if resources.ReadsJWTSecret(fn) {
		env[config.VarJWTSecretARN] = b.jwtSecret.SecretArn()
		// The functions that verify tokens also accept the configured
		// identity provider's (none when OIDC is off).
		for k, v := range b.props.Config.OIDC.env() {
			env[k] = jsii.String(v)
		}
	}
	if resources.NeedsOAuthClient(fn) {
		env[config.VarDeviantArtClientSecretARN] = b.oauthClient.SecretArn()
	}
	return env
}

func (b *builder) functions() {
	b.fns = map[string]awslambda.Function{}
	b.fnLogs = map[string]awslogs.LogGroup{}
	for _, fn := range b.def.Functions {
		spec, ok := FunctionSpecs[fn]
		if !ok || spec.MemoryMB == 0 || spec.Timeout == 0 {
			panic(fmt.Sprintf("infra: function %q of the definition has no FunctionSpec (memory, timeout)", fn))
		}
		id := title(fn)
		name := FunctionName(b.def, fn)
		logs := awslogs.NewLogGroup(b.stack, jsii.String(id+"Logs"), &awslogs.LogGroupProps{
			LogGroupName:  jsii.String("/aws/lambda/" + name),
			Retention:     b.logRetention(),
			RemovalPolicy: b.removal(),
		})
		// A role per function with no managed policy: permissions() adds
		// exactly what the function uses; here only its own log group.
		role := awsiam.NewRole(b.stack, jsii.String(id+"Role"), &awsiam.RoleProps{
			AssumedBy:   awsiam.NewServicePrincipal(jsii.String("lambda.amazonaws.com"), nil),
			Description: jsii.String("Conveyor " + fn + " function (" + string(b.def.Env) + ")"),
		})
		logs.GrantWrite(role)

		env := b.commonEnv()
		for k, v := range b.secretEnv(fn) {
			env[k] = v
		}
		// Every function that writes a job counts it with the same quotas.
		for k, v := range b.props.Config.Quotas.env() {
			env[k] = jsii.String(v)
		}
		if fn == resources.FuncAPI || fn == resources.FuncUploads || fn == resources.FuncSchedules {
			// The functions that serve user tokens admit their requests by
			// the owner's rate (the admin function's tokens are operators').
			for k, v := range b.props.Config.Rates.env() {
				env[k] = jsii.String(v)
			}
		}
		if fn == b.def.EventStream.Function {
			// The relay alone decides what goes on the bus.
			env[config.VarBusEvents] = jsii.String(string(b.props.Config.Bus()))
		}
		f := awslambda.NewFunction(b.stack, jsii.String(id+"Function"), &awslambda.FunctionProps{
			FunctionName: jsii.String(name),
			Description:  jsii.String(spec.Description),
			Runtime:      awslambda.Runtime_PROVIDED_AL2023(),
			Architecture: awslambda.Architecture_ARM_64(),
			Handler:      jsii.String("bootstrap"),
			Code:         awslambda.Code_FromAsset(jsii.String(filepath.Join(b.props.FunctionsDir, fn)), nil),
			MemorySize:   jsii.Number(float64(spec.MemoryMB)),
			Timeout:      dur(spec.Timeout),
			Role:         role,
			LogGroup:     logs,
			// The functions write JSON lines (log/slog, EMF); Lambda's own
			// lines are JSON too, filtered by the configured system level
			// (WARN: no start and report lines for invocations that
			// succeed). Application lines are kept from INFO up: Lambda
			// reads each line's "level" and gives the EMF metric lines,
			// which have none, INFO.
			LoggingFormat:         awslambda.LoggingFormat_JSON,
			SystemLogLevelV2:      awslambda.SystemLogLevel(b.props.Config.SystemLevel()),
			ApplicationLogLevelV2: awslambda.ApplicationLogLevel_INFO,
			Environment:           &env,
			Tracing:               b.tracing(),
			Layers:                b.layers(id),
			RecursiveLoop:         awslambda.RecursiveLoop_TERMINATE,
			// Off unless the configuration reserves some: a floor and a
			// ceiling, out of the account's pool (Config.ReservedConcurrency).
			ReservedConcurrentExecutions: b.reservation(fn),
		})
		b.fns[fn] = f
		b.fnLogs[fn] = logs
	}
	b.asyncInvokes()
}

// asyncInvokes configures every asynchronously invoked function
// (resources.Definition.AsyncInvoked: S3 invokes confirm, EventBridge
// Scheduler invokes recovery) with its retries and maximum event age
// (resources.AsyncInvokes, where each is reasoned), and the failure queue
// as its on-failure destination: an event Lambda gives up on is kept there,
// with the error, alarmed, for an operator to replay, instead of dropped.
func (b *builder) asyncInvokes() {
	for _, fn := range b.def.AsyncInvoked() {
		cfg, ok := resources.AsyncInvokes[fn]
		if !ok {
			panic(fmt.Sprintf("infra: function %q is invoked asynchronously but has no resources.AsyncInvokes setting", fn))
		}
		b.fn(fn).ConfigureAsyncInvoke(&awslambda.EventInvokeConfigOptions{
			OnFailure:     &sendOnly{queue: b.failures},
			RetryAttempts: jsii.Number(float64(cfg.RetryAttempts)),
			MaxEventAge:   dur(cfg.MaxEventAge),
		})
	}
}

// sendOnly is an on-failure destination on an SQS queue that grants the
// function's role sqs:SendMessage on the queue and nothing else: what
// Lambda needs to deliver a failed asynchronous invocation's record.
// (awslambdadestinations.SqsDestination grants the queue's whole send set,
// GetQueueAttributes and GetQueueUrl too, which Lambda never calls.)
type sendOnly struct{ queue awssqs.IQueue }

// Bind grants the send and names the queue as the destination.
func (d *sendOnly) Bind(_ constructs.Construct, fn awslambda.IFunction, _ *awslambda.DestinationOptions) *awslambda.DestinationConfig {
	fn.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Effect:    awsiam.Effect_ALLOW,
		Actions:   jsii.Strings("sqs:SendMessage"),
		Resources: jsii.Strings(*d.queue.QueueArn()),
	}))
	return &awslambda.DestinationConfig{Destination: d.queue.QueueArn()}
}

// reservation is fn's configured reserved concurrency, nil for none.
func (b *builder) reservation(fn string) *float64 {
	if n, ok := b.props.Config.ReservedConcurrency[fn]; ok {
		return jsii.Number(float64(n))
	}
	return nil
}

// tracing is the functions' X-Ray mode: active when the configuration
// turns tracing on, else none set (Lambda's default, PassThrough: only an
// invocation its caller sampled is traced, and no trigger of these
// functions samples; the roles get no X-Ray grant). X-Ray sampling rules
// do not apply to Lambda's own sampling, so the stack makes none.
func (b *builder) tracing() awslambda.Tracing {
	if b.props.Config.Tracing.Enabled {
		return awslambda.Tracing_ACTIVE
	}
	return awslambda.Tracing_DISABLED
}

// title turns "prod-ru" or "api" into "ProdRu" or "Api" for construct ids.
func title(s string) string {
	var out strings.Builder
	for _, part := range strings.FieldsFunc(s, func(r rune) bool { return r == '-' || r == '_' }) {
		out.WriteString(strings.ToUpper(part[:1]) + part[1:])
	}
	return out.String()
}

// fn returns the function named name, panicking with its name when the
// definition lacks it (a trigger that would otherwise point nowhere).
func (b *builder) fn(name string) awslambda.Function {
	f, ok := b.fns[name]
	if !ok {
		panic(fmt.Sprintf("infra: the definition has no function %q", name))
	}
	return f
}
