package stack

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatchactions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssns"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssnssubscriptions"
	"github.com/aws/aws-cdk-go/awscdk/v2/interfaces/interfacesawscloudwatch"
	"github.com/aws/jsii-runtime-go"

	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/resources"
)

// The breaker metric the publisher emits (EMF, internal/handler): per
// external host, BreakerOpen is 1 on a transition to open, 0 on a
// transition to closed, and 1 again as a gauge on every recovery run while
// the host's circuit stays open. Its dimensions are exactly Environment
// and Host (CloudWatch matches the whole dimension set). Token-scoped
// breakers (one user's 429) are not emitted under this metric.
const (
	BreakerNamespace     = "Conveyor"
	BreakerMetricName    = "BreakerOpen"
	BreakerHostDimension = "Host"
	// maxAlarmMetrics is the most metrics one alarm's math may use.
	maxAlarmMetrics = 10
)

// BreakerHosts are the external hosts whose circuit gets an alarm: the
// host of the external API the publisher calls (cfg.ExternalAPI.URL; the
// publisher's breaker is keyed by it, internal/handler.APIHost).
func BreakerHosts(cfg Config) []string {
	u, err := url.Parse(cfg.ExternalAPI.URL)
	if err != nil || u.Host == "" {
		panic("infra: externalApi.url has no host: " + cfg.ExternalAPI.URL)
	}
	return []string{u.Host}
}

// Alarm thresholds.
const (
	// APIServerErrorRatePercent: the share of HTTP API requests answered
	// 5xx over 5 minutes that raises the alarm.
	APIServerErrorRatePercent = 1
	// APIServerErrorMinRequests: below this many requests in 5 minutes the
	// rate is not judged (the api function's Errors alarm still is).
	APIServerErrorMinRequests = 20
	// APILatencyP99 is the p99 latency of the HTTP API, over 5 minutes,
	// that raises the alarm when it holds for 3 periods in a row.
	APILatencyP99 = 2 * time.Second
	// DurationNearTimeoutPercent: a function whose maximum duration over 5
	// minutes exceeds this share of its timeout raises the alarm.
	DurationNearTimeoutPercent = 80
	// RelayIteratorAgeLimit is the age of the newest stream record the
	// relay has read, when the alarm fires: events (and webhooks) are
	// that late.
	RelayIteratorAgeLimit = 5 * time.Minute
	// AccountConcurrencyPercentDefault is the share of the account's
	// concurrency quota (Config.AccountConcurrency) whose use raises the
	// account-concurrency alarm (alarms.accountConcurrencyPercent).
	AccountConcurrencyPercentDefault = 80
)

// SweepScheduleGroup is the EventBridge Scheduler group of the stack's own
// schedules (the sweeps): they name none, so they are in the account's
// default group, whose metrics every environment of the account shares.
const SweepScheduleGroup = "default"

// AccountConcurrencyThreshold is the account's concurrent executions (the
// highest of a minute) that raise the account-concurrency alarm: the
// configured share (alarms.accountConcurrencyPercent, default
// AccountConcurrencyPercentDefault) of the configured quota
// (accountConcurrency, default AccountConcurrencyDefault), rounded up.
func AccountConcurrencyThreshold(cfg Config) int {
	return (cfg.Quota()*accountConcurrencyPercent(cfg) + 99) / 100
}

// accountConcurrencyPercent is the configured share, or the default.
func accountConcurrencyPercent(cfg Config) int {
	if p := cfg.Alarms.AccountConcurrencyPercent; p > 0 {
		return p
	}
	return AccountConcurrencyPercentDefault
}

// DurationAlarmed reports whether fn gets the duration-near-timeout alarm.
// The stream function runs each SSE connection up to its timeout by
// design (clients reconnect with Last-Event-ID), so its duration says
// nothing.
func DurationAlarmed(fn string) bool { return fn != resources.FuncStream }

// OldestMessageAlarmAfter is, per tier, the age of the oldest message that
// raises an alarm. It allows for retry backoff held in the visibility
// timeout (up to 15 minutes per attempt); the low tier is allowed to lag.
var OldestMessageAlarmAfter = map[job.Tier]time.Duration{
	job.High:   30 * time.Minute,
	job.Medium: 30 * time.Minute,
	job.Low:    2 * time.Hour,
	job.System: 30 * time.Minute,
}

// monitoring adds the alarms (to an encrypted SNS topic) and the dashboard.
func (b *builder) monitoring() {
	a := &alarmSet{b: b, action: awscloudwatchactions.NewSnsAction(b.alarmTopic())}
	b.queueAlarms(a)
	b.functionAlarms(a)
	b.concurrencyAlarm(a)
	b.schedulerAlarms(a)
	b.apiAlarms(a)
	b.tableAlarms(a)
	breakers := b.breakerAlarms(a)
	b.dashboard(breakers, a.all)
}

// alarmTopic is the topic the alarms notify: the configured existing one,
// or the stack's own encrypted topic with the configured subscribers.
func (b *builder) alarmTopic() awssns.ITopic {
	alarms := b.props.Config.Alarms
	if alarms.TopicARN != "" {
		return awssns.Topic_FromTopicArn(b.stack, jsii.String("AlarmTopic"), jsii.String(alarms.TopicARN))
	}
	if len(alarms.Subscribers) == 0 {
		awscdk.Annotations_Of(b.stack).AddWarningV2(jsii.String("conveyor:noAlarmSubscriber"), jsii.String(
			"no alarm subscriber: set alarms.subscribers or alarms.topicArn in infra/env/"+string(b.def.Env)+
				".json, or subscribe to the AlarmTopicArn output by hand"))
	}
	// CloudWatch publishes as the alarm (aws:SourceArn) of this account
	// (aws:SourceAccount): only this stack's alarms, all named
	// <prefix>-…, may use the topic and its key.
	cloudwatch := awsiam.NewServicePrincipal(jsii.String("cloudwatch.amazonaws.com"), nil)
	fromAlarms := &map[string]any{
		"StringEquals": map[string]any{"aws:SourceAccount": b.stack.Account()},
		"ArnLike":      map[string]any{"aws:SourceArn": b.alarmARNs()},
	}
	// CloudWatch cannot publish to a topic encrypted with the AWS managed
	// SNS key, so the topic has its own key that CloudWatch may use (SNS
	// asks it for a data key per message on CloudWatch's behalf). It is
	// not the token key: that one stays limited to the functions.
	alarmKey := awskms.NewKey(b.stack, jsii.String("AlarmTopicKey"), &awskms.KeyProps{
		Description:       jsii.String("Conveyor " + string(b.def.Env) + ": encryption of the alarm topic"),
		EnableKeyRotation: jsii.Bool(true),
		RemovalPolicy:     b.removal(),
		PendingWindow:     awscdk.Duration_Days(jsii.Number(7)),
	})
	alarmKey.AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:        jsii.String("CloudWatchAlarmsPublish"),
		Principals: &[]awsiam.IPrincipal{cloudwatch},
		Actions:    jsii.Strings("kms:Decrypt", "kms:GenerateDataKey*"),
		Resources:  jsii.Strings("*"),
		Conditions: fromAlarms,
	}), nil)
	// EnforceSSL gives the topic a policy of its own, which replaces SNS's
	// default one (the account's principals may publish): it would hold
	// only the TLS Deny, and CloudWatch could not publish. The Allow
	// beside it lets the stack's alarms publish.
	topic := awssns.NewTopic(b.stack, jsii.String("AlarmTopic"), &awssns.TopicProps{
		TopicName:   jsii.String(b.def.Prefix + "-alarms"),
		DisplayName: jsii.String("Conveyor " + string(b.def.Env) + " alarms"),
		MasterKey:   alarmKey,
		EnforceSSL:  jsii.Bool(true),
	})
	topic.AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:        jsii.String("CloudWatchAlarmsPublish"),
		Principals: &[]awsiam.IPrincipal{cloudwatch},
		Actions:    jsii.Strings("sns:Publish"),
		Resources:  jsii.Strings(*topic.TopicArn()),
		Conditions: fromAlarms,
	}))
	awscdk.NewCfnOutput(b.stack, jsii.String("AlarmTopicArn"), &awscdk.CfnOutputProps{
		Value:       topic.TopicArn(),
		Description: jsii.String("Subscribe operators to this topic"),
	})
	for _, sub := range alarms.Subscribers {
		if strings.HasPrefix(sub, "https://") {
			topic.AddSubscription(awssnssubscriptions.NewUrlSubscription(jsii.String(sub), &awssnssubscriptions.UrlSubscriptionProps{
				Protocol: awssns.SubscriptionProtocol_HTTPS,
			}))
		} else {
			topic.AddSubscription(awssnssubscriptions.NewEmailSubscription(jsii.String(sub), nil))
		}
	}
	return topic
}

// alarmARNs matches the ARNs of the stack's alarms (every alarm is named
// <prefix>-<name>, alarmSet).
func (b *builder) alarmARNs() *string {
	return awscdk.Stack_Of(b.stack).FormatArn(&awscdk.ArnComponents{
		Service: jsii.String("cloudwatch"), Resource: jsii.String("alarm"),
		ResourceName: jsii.String(b.def.Prefix + "-*"), ArnFormat: awscdk.ArnFormat_COLON_RESOURCE_NAME,
	})
}

// alarmSet makes the stack's alarms: each one notifies action when it
// fires and when it clears, and is kept for the dashboard's status widget.
type alarmSet struct {
	b      *builder
	action awscloudwatch.IAlarmAction
	all    []interfacesawscloudwatch.IAlarmRef
}

// addN adds an alarm named prefix-name that fires when datapoints of the
// last periods of metric compare (op) to threshold; missing data is not
// breaching.
func (a *alarmSet) addN(id, name, desc string, metric awscloudwatch.IMetric, op awscloudwatch.ComparisonOperator, threshold float64, periods, datapoints int) {
	al := awscloudwatch.NewAlarm(a.b.stack, jsii.String(id), &awscloudwatch.AlarmProps{
		AlarmName:          jsii.String(a.b.def.Prefix + "-" + name),
		AlarmDescription:   jsii.String(desc),
		Metric:             metric,
		Threshold:          jsii.Number(threshold),
		ComparisonOperator: op,
		EvaluationPeriods:  jsii.Number(float64(periods)),
		DatapointsToAlarm:  jsii.Number(float64(datapoints)),
		TreatMissingData:   awscloudwatch.TreatMissingData_NOT_BREACHING,
	})
	al.AddAlarmAction(a.action)
	al.AddOkAction(a.action)
	a.all = append(a.all, al)
}

// add adds an alarm on one period's datapoint.
func (a *alarmSet) add(id, name, desc string, metric awscloudwatch.IMetric, op awscloudwatch.ComparisonOperator, threshold float64) {
	a.addN(id, name, desc, metric, op, threshold, 1, 1)
}

// minutes is a period of n minutes.
func minutes(n float64) awscdk.Duration { return awscdk.Duration_Minutes(jsii.Number(n)) }

// maxOver is a metric's maximum over period p.
func maxOver(p awscdk.Duration) *awscloudwatch.MetricOptions {
	return &awscloudwatch.MetricOptions{Period: p, Statistic: jsii.String("Maximum")}
}

// sumOver5 is a metric's sum over 5 minutes.
func sumOver5() *awscloudwatch.MetricOptions {
	return &awscloudwatch.MetricOptions{Period: minutes(5), Statistic: jsii.String("Sum")}
}

// queueAlarms: per tier, messages in the DLQ and the age of the oldest
// message.
func (b *builder) queueAlarms(a *alarmSet) {
	for _, q := range b.def.Queues {
		tier := string(q.Tier)
		a.add(title(tier)+"DLQDepthAlarm", tier+"-dlq-depth",
			"Messages in the "+tier+" tier's DLQ ("+q.DLQName+"): inspect and redrive them",
			b.dlqs[q.Tier].MetricApproximateNumberOfMessagesVisible(maxOver(minutes(1))),
			awscloudwatch.ComparisonOperator_GREATER_THAN_THRESHOLD, 0)
		after := OldestMessageAlarmAfter[q.Tier]
		if after == 0 {
			after = 30 * time.Minute
		}
		a.add(title(tier)+"OldestMessageAlarm", tier+"-oldest-message-age",
			"The "+tier+" tier's oldest message is older than "+after.String()+": consumers are stalled, paused or too slow",
			b.queues[q.Tier].MetricApproximateAgeOfOldestMessage(maxOver(minutes(5))),
			awscloudwatch.ComparisonOperator_GREATER_THAN_THRESHOLD, after.Seconds())
	}
}

// functionAlarms: per function, errors, throttles and a duration near the
// timeout; and the asynchronous invocations that failed for good.
func (b *builder) functionAlarms(a *alarmSet) {
	for _, fn := range b.def.Functions {
		f := b.fns[fn]
		a.add(title(fn)+"ErrorsAlarm", fn+"-errors",
			"The "+fn+" function failed (crash, timeout or returned error): read its log group (/aws/lambda/"+FunctionName(b.def, fn)+") for the cause",
			f.MetricErrors(sumOver5()), awscloudwatch.ComparisonOperator_GREATER_THAN_THRESHOLD, 0)
		a.add(title(fn)+"ThrottlesAlarm", fn+"-throttles",
			"Lambda throttled the "+fn+" function: "+throttled(b.def, fn)+". "+
				"If it has a reservation (reservedConcurrency) that it fills, raise it; otherwise the account's unreserved pool is used up: "+
				"see the account-concurrency alarm and the dashboard's throttles, and ask for a higher concurrency quota (Service Quotas) "+
				"or reserve for the functions that must not wait",
			f.MetricThrottles(sumOver5()), awscloudwatch.ComparisonOperator_GREATER_THAN_THRESHOLD, 0)
	}
	for _, fn := range b.def.Functions {
		if !DurationAlarmed(fn) {
			continue
		}
		timeout := FunctionSpecs[fn].Timeout
		limit := timeout * DurationNearTimeoutPercent / 100
		a.add(title(fn)+"DurationAlarm", fn+"-duration-near-timeout",
			fmt.Sprintf("The %s function ran longer than %d%% of its %v timeout (%v): it is about to time out", fn, DurationNearTimeoutPercent, timeout, limit),
			b.fns[fn].MetricDuration(maxOver(minutes(5))), awscloudwatch.ComparisonOperator_GREATER_THAN_THRESHOLD, float64(limit.Milliseconds()))
	}
	a.add("AsyncFailuresAlarm", "async-failures",
		"An asynchronous invocation failed after Lambda's retries or outlived its maximum age (confirm: an upload's S3 event; "+
			"recovery: a sweep or a user's schedule tick): its record, with the event and the error, is in "+b.def.AsyncFailureQueue+". "+
			"confirm: confirm the upload (POST /v1/uploads/{id}/confirm). recovery: a sweep needs nothing (the next run covers it); "+
			"a tick (detail.task schedule): fix the cause, then invoke recovery again with the record's requestPayload. Then delete the message",
		b.failures.MetricApproximateNumberOfMessagesVisible(maxOver(minutes(1))),
		awscloudwatch.ComparisonOperator_GREATER_THAN_THRESHOLD, 0)
	for _, fn := range b.def.AsyncInvoked() {
		// confirm's alarm keeps the construct id it was created with: an
		// alarm of a fixed name cannot be replaced.
		id := title(fn) + "AsyncEventsDroppedAlarm"
		if fn == b.def.Bucket.NotifyFunction {
			id = "AsyncEventsDroppedAlarm"
		}
		a.add(id, fn+"-async-events-dropped",
			"Lambda dropped asynchronous events to the "+fn+" function without delivering them to the failure queue "+
				"(the failure queue refused them): "+dropped(b.def, fn)+"; read the "+fn+" function's logs and check that its role may send to "+
				b.def.AsyncFailureQueue+" (make iam)",
			b.fns[fn].Metric(jsii.String("AsyncEventsDropped"), sumOver5()),
			awscloudwatch.ComparisonOperator_GREATER_THAN_THRESHOLD, 0)
	}
	b.relayAlarms(a)
}

// throttled says what a throttle of fn costs.
func throttled(def resources.Definition, fn string) string {
	switch {
	case slices.Contains(def.AsyncInvoked(), fn):
		age := resources.AsyncInvokes[fn].MaxEventAge
		return fmt.Sprintf("its asynchronous events wait (Lambda keeps trying them for up to %v, then they go to the failure queue)", age)
	case fn == def.EventStream.Function:
		return "the table's stream waits and events, SSE and webhooks fall behind (see relay-iterator-age)"
	case slices.ContainsFunc(def.Queues, func(q resources.Queue) bool { return q.Consumer == fn }):
		return "its tier queues' messages wait in the queue (see the oldest-message-age alarms)"
	case fn == resources.FuncStream:
		return "event streams could not open"
	}
	return "HTTP API requests to it failed"
}

// dropped says what an asynchronous event of fn that Lambda dropped costs.
func dropped(def resources.Definition, fn string) string {
	if fn == def.Bucket.NotifyFunction {
		return "those uploads stay unconfirmed until their client calls POST /v1/uploads/{id}/confirm"
	}
	return "dropped sweeps are covered by the next run, but a dropped user's schedule tick submitted no job"
}

// concurrencyAlarm: the account's concurrent executions (every function of
// the region, every environment of the account) near its quota, when the
// functions without a reservation start to be throttled.
func (b *builder) concurrencyAlarm(a *alarmSet) {
	cfg := b.props.Config
	threshold := AccountConcurrencyThreshold(cfg)
	a.addN("AccountConcurrencyAlarm", "account-concurrency",
		fmt.Sprintf("The account's Lambda concurrent executions in this region reached %d (%d%% of its quota of %d; alarms.accountConcurrencyPercent, accountConcurrency) "+
			"in 3 of 5 minutes: functions without a reservation will be throttled. Find the functions using it (the dashboard's throttles, "+
			"ConcurrentExecutions per function), then ask for a higher quota (Service Quotas, Lambda, Concurrent executions) and set accountConcurrency, "+
			"or lower what runs at once (the tiers' maximum concurrency)", threshold, accountConcurrencyPercent(cfg), cfg.Quota()),
		awscloudwatch.NewMetric(&awscloudwatch.MetricProps{
			Namespace: jsii.String("AWS/Lambda"), MetricName: jsii.String("ConcurrentExecutions"),
			Period: minutes(1), Statistic: jsii.String("Maximum"),
		}),
		awscloudwatch.ComparisonOperator_GREATER_THAN_OR_EQUAL_TO_THRESHOLD, float64(threshold), 5, 3)
}

// schedulerAlarms: EventBridge Scheduler failing to invoke a schedule's
// target (TargetErrorCount: the Invoke call itself failed — a role that
// may not invoke, a missing function) and giving up on an invocation
// (InvocationDroppedCount: its retry policy is exhausted), for the users'
// schedules' group and for the group of the sweeps (the account's default
// group, shared with any other environment of the account).
func (b *builder) schedulerAlarms(a *alarmSet) {
	groups := []struct{ id, label, group, dropped string }{
		{"UserSchedules", "user-schedules", b.def.ScheduleGroup,
			"those ticks submitted no job: fire them again by invoking " + FunctionName(b.def, resources.ScheduleTickFunction) + " with the tick's input, " +
				"or let the next tick run"},
		{"SweepSchedules", "sweep-schedules", SweepScheduleGroup,
			"those sweeps did not run (the next run covers them); the group is the account's default, so another environment of the account may be the one failing"},
	}
	for _, g := range groups {
		metric := func(name string) awscloudwatch.IMetric {
			return awscloudwatch.NewMetric(&awscloudwatch.MetricProps{
				Namespace: jsii.String("AWS/Scheduler"), MetricName: jsii.String(name),
				DimensionsMap: &map[string]*string{"ScheduleGroup": jsii.String(g.group)},
				Period:        minutes(5), Statistic: jsii.String("Sum"),
			})
		}
		a.add(g.id+"TargetErrorsAlarm", g.label+"-target-errors",
			"EventBridge Scheduler could not invoke the target of a schedule of group "+g.group+" (the Invoke call failed): "+
				"check that the function exists and that the schedule's role may invoke it (make iam evaluates it); Scheduler retries per the schedule's retry policy",
			metric("TargetErrorCount"), awscloudwatch.ComparisonOperator_GREATER_THAN_THRESHOLD, 0)
		a.add(g.id+"DroppedAlarm", g.label+"-dropped",
			"EventBridge Scheduler gave up on invocations of schedules of group "+g.group+" (retry policy exhausted): "+g.dropped+
				"; the target-errors alarm of the group says why",
			metric("InvocationDroppedCount"), awscloudwatch.ComparisonOperator_GREATER_THAN_THRESHOLD, 0)
	}
}

// relayAlarms: what the relay's own Errors cannot show, since it reports
// per-record failures: batches that ran out of retries, and a stream
// falling behind.
func (b *builder) relayAlarms(a *alarmSet) {
	m := b.def.EventStream
	a.add("RelayFailuresAlarm", "relay-failures",
		"Stream batches ran out of the relay's retries: their events did not reach the bus and their webhooks were not queued. "+
			"Each message in "+m.FailureQueueName+" names the shard and sequence range given up on; read the relay's logs for the cause "+
			"and fix it; the events stay in the jobs' event logs (GET /v1/jobs/{id}/events) to relay again; then delete the message",
		b.relayFailures.MetricApproximateNumberOfMessagesVisible(maxOver(minutes(1))),
		awscloudwatch.ComparisonOperator_GREATER_THAN_THRESHOLD, 0)
	a.addN("RelayIteratorAgeAlarm", "relay-iterator-age",
		fmt.Sprintf("The relay is more than %v behind the table's stream (events, SSE and webhooks are late; records older than 24 h are lost): "+
			"look for relay errors or throttles, and raise its reserved concurrency if it has one", RelayIteratorAgeLimit),
		b.fns[m.Function].Metric(jsii.String("IteratorAge"), maxOver(minutes(5))),
		awscloudwatch.ComparisonOperator_GREATER_THAN_THRESHOLD, float64(RelayIteratorAgeLimit.Milliseconds()), 2, 2)
}

// apiAlarms: the HTTP API (what fronts the api function): the share of
// 5xx, and the p99 latency.
func (b *builder) apiAlarms(a *alarmSet) {
	five := minutes(5)
	requests := b.api.MetricCount(sumOver5())
	errors5xx := b.api.MetricServerError(sumOver5())
	a.add("ApiServerErrorRateAlarm", "api-5xx-rate",
		fmt.Sprintf("More than %d%% of HTTP API requests answered 5xx over 5 minutes", APIServerErrorRatePercent),
		awscloudwatch.NewMathExpression(&awscloudwatch.MathExpressionProps{
			Expression:   jsii.String(fmt.Sprintf("IF(requests >= %d, 100 * FILL(errors, 0) / requests, 0)", APIServerErrorMinRequests)),
			UsingMetrics: &map[string]awscloudwatch.IMetric{"requests": requests, "errors": errors5xx},
			Label:        jsii.String("5xx %"),
			Period:       five,
		}), awscloudwatch.ComparisonOperator_GREATER_THAN_THRESHOLD, APIServerErrorRatePercent)
	a.addN("ApiLatencyAlarm", "api-latency-p99",
		fmt.Sprintf("The HTTP API's p99 latency stayed above %v for 15 minutes", APILatencyP99),
		b.api.MetricLatency(&awscloudwatch.MetricOptions{Period: five, Statistic: jsii.String("p99")}),
		awscloudwatch.ComparisonOperator_GREATER_THAN_THRESHOLD, float64(APILatencyP99.Milliseconds()), 3, 3)
}

// tableAlarms: DynamoDB throttles, on the table and on each index (a
// throttled index also throttles the table's writes). An alarm's math may
// use at most 10 metrics, so the table and its indexes are summed in
// groups of 10: the first alarm holds the table and the first nine
// indexes.
func (b *builder) tableAlarms(a *alarmSet) {
	five := minutes(5)
	for _, op := range []string{"Read", "Write"} {
		dims := []map[string]*string{{"TableName": b.table.TableName()}}
		for _, ix := range b.def.Table.Indexes {
			dims = append(dims, map[string]*string{"TableName": b.table.TableName(), "GlobalSecondaryIndexName": jsii.String(ix.Name)})
		}
		lower := strings.ToLower(op)
		for g := 0; g*maxAlarmMetrics < len(dims); g++ {
			group := dims[g*maxAlarmMetrics : min((g+1)*maxAlarmMetrics, len(dims))]
			metrics := map[string]awscloudwatch.IMetric{}
			var terms []string
			for i, d := range group {
				id := fmt.Sprintf("m%d", i)
				metrics[id] = awscloudwatch.NewMetric(&awscloudwatch.MetricProps{
					Namespace: jsii.String("AWS/DynamoDB"), MetricName: jsii.String(op + "ThrottleEvents"),
					DimensionsMap: &d, Period: five, Statistic: jsii.String("Sum"),
				})
				terms = append(terms, "FILL("+id+", 0)")
			}
			id, name := "DynamoDB"+op+"ThrottlesAlarm", "dynamodb-"+lower+"-throttles"
			if g > 0 {
				id, name = fmt.Sprintf("%s%d", id, g+1), fmt.Sprintf("%s-%d", name, g+1)
			}
			a.add(id, name,
				"DynamoDB throttled "+lower+"s on the table or one of its indexes (on-demand: a sudden hot partition or above the account's table limits)",
				awscloudwatch.NewMathExpression(&awscloudwatch.MathExpressionProps{
					Expression:   jsii.String("SUM([" + strings.Join(terms, ", ") + "])"),
					UsingMetrics: &metrics,
					Label:        jsii.String(op + " throttle events"),
					Period:       five,
				}), awscloudwatch.ComparisonOperator_GREATER_THAN_THRESHOLD, 0)
		}
	}
}

// breakerAlarms adds one alarm per external host's circuit and returns
// their metrics, labelled by host, for the dashboard. The gauge keeps it
// in alarm while the circuit stays open; a datapoint in either of the last
// two 5-minute periods counts, so a gap between two recovery runs does not
// clear it.
func (b *builder) breakerAlarms(a *alarmSet) []awscloudwatch.IMetric {
	var breakers []awscloudwatch.IMetric
	for _, host := range BreakerHosts(b.props.Config) {
		m := awscloudwatch.NewMetric(&awscloudwatch.MetricProps{
			Namespace:  jsii.String(BreakerNamespace),
			MetricName: jsii.String(BreakerMetricName),
			DimensionsMap: &map[string]*string{
				"Environment":        jsii.String(string(b.def.Env)),
				BreakerHostDimension: jsii.String(host),
			},
			Period:    minutes(5),
			Statistic: jsii.String("Maximum"),
		})
		// A label would turn the alarm's metric into a math expression.
		breakers = append(breakers, m.With(&awscloudwatch.MetricOptions{Label: jsii.String(host)}))
		a.addN("BreakerOpen"+hostID(host)+"Alarm", "breaker-open-"+host,
			"The circuit breaker around "+host+" is open: every call to it fails fast and jobs wait (no attempt spent) until a probe succeeds",
			m, awscloudwatch.ComparisonOperator_GREATER_THAN_OR_EQUAL_TO_THRESHOLD, 1, 2, 1)
	}
	return breakers
}

// hostID turns a host name into a construct id part.
func hostID(host string) string {
	var out strings.Builder
	for _, part := range strings.FieldsFunc(host, func(r rune) bool { return r == '.' || r == '-' || r == ':' }) {
		out.WriteString(strings.ToUpper(part[:1]) + part[1:])
	}
	return out.String()
}

func (b *builder) dashboard(breakers []awscloudwatch.IMetric, alarms []interfacesawscloudwatch.IAlarmRef) {
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
	brk := graph("Circuit open, per external host", &breakers)
	api := graph("HTTP API", &[]awscloudwatch.IMetric{
		b.api.MetricClientError(opts("4xx", "Sum")),
		b.api.MetricServerError(opts("5xx", "Sum")),
		b.api.MetricCount(opts("requests", "Sum")),
	})
	latency := graph("HTTP API latency (ms)", &[]awscloudwatch.IMetric{
		b.api.MetricLatency(opts("p50", "p50")),
		b.api.MetricLatency(opts("p99", "p99")),
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
			{latency},
		},
	})
}
