package stack

import (
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatchactions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssns"
	"github.com/aws/aws-cdk-go/awscdk/v2/interfaces/interfacesawscloudwatch"
	"github.com/aws/jsii-runtime-go"

	"github.com/conveyor/conveyor/internal/resources"
)

// BreakerMetric is the metric the publisher emits (EMF, internal/metrics)
// when a circuit changes state: BreakerOpen is 1 on a transition to open.
// Its dimensions are Environment and To (the new state).
const (
	BreakerNamespace  = "Conveyor"
	BreakerMetricName = "BreakerOpen"
	BreakerOpenState  = "open"
)

// OldestMessageAlarmAfter is, per tier, the age of the oldest message that
// raises an alarm. It allows for retry backoff held in the visibility
// timeout (up to 15 minutes per attempt); the low tier is allowed to lag.
var OldestMessageAlarmAfter = map[resources.Tier]time.Duration{
	resources.High:   30 * time.Minute,
	resources.Medium: 30 * time.Minute,
	resources.Low:    2 * time.Hour,
	resources.System: 30 * time.Minute,
}

// monitoring adds the alarms (to an encrypted SNS topic) and the dashboard.
func (b *builder) monitoring() {
	// CloudWatch cannot publish to a topic encrypted with the AWS managed
	// SNS key, so the topic has its own key that CloudWatch may use. It is
	// not the token key: that one stays limited to the functions.
	alarmKey := awskms.NewKey(b.stack, jsii.String("AlarmTopicKey"), &awskms.KeyProps{
		Description:       jsii.String("Conveyor " + string(b.def.Env) + ": encryption of the alarm topic"),
		EnableKeyRotation: jsii.Bool(true),
		RemovalPolicy:     b.removal(),
		PendingWindow:     awscdk.Duration_Days(jsii.Number(7)),
	})
	alarmKey.AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:        jsii.String("CloudWatchAlarmsPublish"),
		Principals: &[]awsiam.IPrincipal{awsiam.NewServicePrincipal(jsii.String("cloudwatch.amazonaws.com"), nil)},
		Actions:    jsii.Strings("kms:Decrypt", "kms:GenerateDataKey"),
		Resources:  jsii.Strings("*"),
	}), nil)
	topic := awssns.NewTopic(b.stack, jsii.String("AlarmTopic"), &awssns.TopicProps{
		TopicName:   jsii.String(b.def.Prefix + "-alarms"),
		DisplayName: jsii.String("Conveyor " + string(b.def.Env) + " alarms"),
		MasterKey:   alarmKey,
		EnforceSSL:  jsii.Bool(true),
	})
	awscdk.NewCfnOutput(b.stack, jsii.String("AlarmTopicArn"), &awscdk.CfnOutputProps{
		Value:       topic.TopicArn(),
		Description: jsii.String("Subscribe operators to this topic"),
	})
	action := awscloudwatchactions.NewSnsAction(topic)

	var alarms []interfacesawscloudwatch.IAlarmRef
	alarm := func(id, name, desc string, metric awscloudwatch.IMetric, op awscloudwatch.ComparisonOperator, threshold float64) {
		a := awscloudwatch.NewAlarm(b.stack, jsii.String(id), &awscloudwatch.AlarmProps{
			AlarmName:          jsii.String(b.def.Prefix + "-" + name),
			AlarmDescription:   jsii.String(desc),
			Metric:             metric,
			Threshold:          jsii.Number(threshold),
			ComparisonOperator: op,
			EvaluationPeriods:  jsii.Number(1),
			TreatMissingData:   awscloudwatch.TreatMissingData_NOT_BREACHING,
		})
		a.AddAlarmAction(action)
		alarms = append(alarms, a)
	}
	minute, five := awscdk.Duration_Minutes(jsii.Number(1)), awscdk.Duration_Minutes(jsii.Number(5))
	max := func(p awscdk.Duration) *awscloudwatch.MetricOptions {
		return &awscloudwatch.MetricOptions{Period: p, Statistic: jsii.String("Maximum")}
	}
	sum := &awscloudwatch.MetricOptions{Period: five, Statistic: jsii.String("Sum")}

	for _, q := range b.def.Queues {
		tier := string(q.Tier)
		alarm(title(tier)+"DLQDepthAlarm", tier+"-dlq-depth",
			"Messages in the "+tier+" tier's DLQ ("+q.DLQName+"): inspect and redrive them",
			b.dlqs[q.Tier].MetricApproximateNumberOfMessagesVisible(max(minute)),
			awscloudwatch.ComparisonOperator_GREATER_THAN_THRESHOLD, 0)
		after := OldestMessageAlarmAfter[q.Tier]
		if after == 0 {
			after = 30 * time.Minute
		}
		alarm(title(tier)+"OldestMessageAlarm", tier+"-oldest-message-age",
			"The "+tier+" tier's oldest message is older than "+after.String()+": consumers are stalled, paused or too slow",
			b.queues[q.Tier].MetricApproximateAgeOfOldestMessage(max(five)),
			awscloudwatch.ComparisonOperator_GREATER_THAN_THRESHOLD, after.Seconds())
	}
	for _, fn := range b.def.Functions {
		f := b.fns[fn]
		alarm(title(fn)+"ErrorsAlarm", fn+"-errors",
			"The "+fn+" function failed (crash, timeout or returned error)",
			f.MetricErrors(sum), awscloudwatch.ComparisonOperator_GREATER_THAN_THRESHOLD, 0)
		alarm(title(fn)+"ThrottlesAlarm", fn+"-throttles",
			"The "+fn+" function was throttled",
			f.MetricThrottles(sum), awscloudwatch.ComparisonOperator_GREATER_THAN_THRESHOLD, 0)
	}
	breaker := awscloudwatch.NewMetric(&awscloudwatch.MetricProps{
		Namespace:  jsii.String(BreakerNamespace),
		MetricName: jsii.String(BreakerMetricName),
		DimensionsMap: &map[string]*string{
			"Environment": jsii.String(string(b.def.Env)),
			"To":          jsii.String(BreakerOpenState),
		},
		Period:    minute,
		Statistic: jsii.String("Maximum"),
	})
	alarm("BreakerOpenAlarm", "breaker-open",
		"A circuit breaker around the external API opened: calls fail fast until a probe succeeds",
		breaker, awscloudwatch.ComparisonOperator_GREATER_THAN_OR_EQUAL_TO_THRESHOLD, 1)

	b.dashboard(breaker, alarms)
}

func (b *builder) dashboard(breaker awscloudwatch.IMetric, alarms []interfacesawscloudwatch.IAlarmRef) {
	minute := awscdk.Duration_Minutes(jsii.Number(1))
	perTier := func(metric func(resources.Queue) awscloudwatch.IMetric) *[]awscloudwatch.IMetric {
		var ms []awscloudwatch.IMetric
		for _, q := range b.def.Queues {
			ms = append(ms, metric(q))
		}
		return &ms
	}
	opts := func(label, stat string) *awscloudwatch.MetricOptions {
		return &awscloudwatch.MetricOptions{Label: jsii.String(label), Period: minute, Statistic: jsii.String(stat)}
	}
	perFunction := func(metric func(fn string) awscloudwatch.IMetric) *[]awscloudwatch.IMetric {
		var ms []awscloudwatch.IMetric
		for _, fn := range b.def.Functions {
			ms = append(ms, metric(fn))
		}
		return &ms
	}
	graph := func(title string, left *[]awscloudwatch.IMetric) awscloudwatch.IWidget {
		return awscloudwatch.NewGraphWidget(&awscloudwatch.GraphWidgetProps{
			Title: jsii.String(title), Left: left, Width: jsii.Number(8), Height: jsii.Number(6),
		})
	}
	waiting := graph("Queue depth (waiting)", perTier(func(q resources.Queue) awscloudwatch.IMetric {
		return b.queues[q.Tier].MetricApproximateNumberOfMessagesVisible(opts(string(q.Tier), "Maximum"))
	}))
	inFlight := graph("In flight", perTier(func(q resources.Queue) awscloudwatch.IMetric {
		return b.queues[q.Tier].MetricApproximateNumberOfMessagesNotVisible(opts(string(q.Tier), "Maximum"))
	}))
	age := graph("Oldest message age (s)", perTier(func(q resources.Queue) awscloudwatch.IMetric {
		return b.queues[q.Tier].MetricApproximateAgeOfOldestMessage(opts(string(q.Tier), "Maximum"))
	}))
	dlq := graph("DLQ depth", perTier(func(q resources.Queue) awscloudwatch.IMetric {
		return b.dlqs[q.Tier].MetricApproximateNumberOfMessagesVisible(opts(string(q.Tier), "Maximum"))
	}))
	errs := graph("Function errors", perFunction(func(fn string) awscloudwatch.IMetric {
		return b.fns[fn].MetricErrors(opts(fn, "Sum"))
	}))
	duration := graph("Function duration p99 (ms)", perFunction(func(fn string) awscloudwatch.IMetric {
		return b.fns[fn].MetricDuration(opts(fn, "p99"))
	}))
	throttles := graph("Function throttles", perFunction(func(fn string) awscloudwatch.IMetric {
		return b.fns[fn].MetricThrottles(opts(fn, "Sum"))
	}))
	brk := graph("Circuit breaker opened", &[]awscloudwatch.IMetric{breaker})
	api := graph("HTTP API", &[]awscloudwatch.IMetric{
		b.api.MetricClientError(opts("4xx", "Sum")),
		b.api.MetricServerError(opts("5xx", "Sum")),
		b.api.MetricCount(opts("requests", "Sum")),
	})
	status := awscloudwatch.NewAlarmStatusWidget(&awscloudwatch.AlarmStatusWidgetProps{
		Title: jsii.String("Alarms"), Alarms: &alarms, Width: jsii.Number(24), Height: jsii.Number(4),
	})
	awscloudwatch.NewDashboard(b.stack, jsii.String("Dashboard"), &awscloudwatch.DashboardProps{
		DashboardName: jsii.String(b.def.Prefix),
		Widgets: &[]*[]awscloudwatch.IWidget{
			{status},
			{waiting, inFlight, age},
			{dlq, brk, api},
			{errs, duration, throttles},
		},
	})
}
