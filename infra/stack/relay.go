package stack

import (
	"strconv"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambdaeventsources"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/jsii-runtime-go"

	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/resources"
)

// EventArchiveRetentionContextKey is the CDK context key (cdk deploy -c
// key=days) that overrides the event archive's retention of env, in days
// (0: keep forever); the definition's EventArchive.Retention is the default.
func EventArchiveRetentionContextKey(env job.Env) string {
	return "conveyor:" + string(env) + ":eventArchiveRetentionDays"
}

// SuppressRelayFailures: the relay mapping's on-failure queue has no DLQ.
var SuppressRelayFailures = Suppression{
	Rule: "AwsSolutions-SQS3",
	Reason: "This queue is the relay's on-failure destination (the last stop of a stream batch that ran out of " +
		"retries); nothing consumes it automatically, an operator reads it, so it needs no dead-letter queue of its own.",
}

// SuppressListStreams: the relay's stream mapping lists the table's streams.
var SuppressListStreams = Suppression{
	Rule: "AwsSolutions-IAM5",
	Reason: "dynamodb:ListStreams (granted with the stream read for the relay's event source mapping) supports no " +
		"resource-level permissions; the stream reads themselves are limited to this table's stream.",
	AppliesTo: []string{`/^Resource::\*$/`},
}

// eventRelay feeds the table's stream to the relay function: new event
// items only (FilterCriteria on the event name and the sort key prefix),
// batched, several batches per shard at once (ParallelizationFactor: each
// a lane of partition keys, so one job's events stay in order), partial
// batch failures reported, a failed invocation bisected,
// and a batch that ran out of retries described on a queue so it is kept,
// not lost. It also archives the bus's events for replay.
func (b *builder) eventRelay() {
	m := b.def.EventStream
	failures := awssqs.NewQueue(b.stack, jsii.String("RelayFailures"), &awssqs.QueueProps{
		QueueName:       jsii.String(m.FailureQueueName),
		RetentionPeriod: dur(m.FailureRetention),
		Encryption:      awssqs.QueueEncryption_SQS_MANAGED,
		EnforceSSL:      jsii.Bool(true),
		RemovalPolicy:   b.removal(),
	})
	suppress(failures, false, SuppressRelayFailures)
	b.relayFailures = failures
	b.fn(m.Function).AddEventSource(awslambdaeventsources.NewDynamoEventSource(b.table, &awslambdaeventsources.DynamoEventSourceProps{
		StartingPosition:        awslambda.StartingPosition(m.StartingPosition),
		BatchSize:               jsii.Number(float64(m.BatchSize)),
		MaxBatchingWindow:       dur(m.BatchingWindow),
		ParallelizationFactor:   jsii.Number(float64(m.ParallelizationFactor)),
		RetryAttempts:           jsii.Number(float64(m.MaxRetries)),
		BisectBatchOnError:      jsii.Bool(m.BisectOnError),
		ReportBatchItemFailures: jsii.Bool(true),
		OnFailure:               awslambdaeventsources.NewSqsDlq(failures),
		Filters:                 &[]*map[string]interface{}{{"pattern": jsii.String(m.Filter)}},
	}))

	a := b.def.EventArchive
	retention := a.Retention
	if v, ok := b.stack.Node().TryGetContext(jsii.String(EventArchiveRetentionContextKey(b.def.Env))).(string); ok && v != "" {
		if days, err := strconv.Atoi(v); err == nil && days >= 0 {
			retention = time.Duration(days) * day
		} else {
			panic("infra: " + EventArchiveRetentionContextKey(b.def.Env) + " must be a whole number of days, got " + v)
		}
	}
	props := &awsevents.ArchiveProps{
		ArchiveName:    jsii.String(a.Name),
		Description:    jsii.String("Conveyor events of " + string(b.def.Env) + ", for replay"),
		SourceEventBus: b.bus,
		EventPattern:   &awsevents.EventPattern{Source: jsii.Strings(resources.EventSource(b.def.Env))},
	}
	if retention > 0 {
		props.Retention = awscdk.Duration_Days(jsii.Number(float64(retention / day)))
	}
	awsevents.NewArchive(b.stack, jsii.String("EventArchive"), props)
	suppress(b.fn(m.Function).Role(), true, SuppressListStreams)
}

const day = 24 * time.Hour

// relayPermissions: the stream read and the failure queue are granted by
// the event source; the relay puts events on the bus and queues webhook
// deliveries on the system tier. To know which endpoints an event goes to,
// it reads the owners' endpoint summaries (one BatchGetItem a batch) and
// rebuilds a missing or old one from the endpoint items (a Query of the
// owner's partition, a conditional PutItem); nothing else of the table.
func (b *builder) relayPermissions() {
	fn := resources.FuncRelay
	b.allow(fn, []string{"sqs:SendMessage"}, b.queueArns(job.System)...)
	b.allow(fn, []string{"dynamodb:BatchGetItem", "dynamodb:Query", "dynamodb:PutItem"}, b.table.TableArn())
	b.bus.GrantPutEventsTo(b.fn(fn), nil)
}
