package stack

import (
	"encoding/json"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2integrations"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambdaeventsources"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3notifications"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsscheduler"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsschedulertargets"
	"github.com/aws/jsii-runtime-go"

	"github.com/conveyor/conveyor/internal/config"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/resources"
)

// triggers wires every function to what invokes it: the tier queues, the
// bucket notification, the HTTP API, the SSE function URL, the schedules
// and the table's stream (eventRelay).
func (b *builder) triggers() {
	b.eventSourceMappings()
	b.uploadNotification()
	b.httpAPI()
	b.streamURL()
	b.schedules()
	b.eventRelay()
}

// eventSourceMappings feeds each tier queue to its consumer. The maximum
// concurrency per mapping gives the tiers their weights; partial batch
// failures keep one failed message from redelivering its batch mates.
func (b *builder) eventSourceMappings() {
	b.esms = map[job.Tier]awslambdaeventsources.SqsEventSource{}
	for _, q := range b.def.Queues {
		src := awslambdaeventsources.NewSqsEventSource(b.queues[q.Tier], &awslambdaeventsources.SqsEventSourceProps{
			BatchSize:               jsii.Number(float64(q.BatchSize)),
			MaxConcurrency:          jsii.Number(float64(q.MaxConcurrency)),
			ReportBatchItemFailures: jsii.Bool(true),
		})
		b.fn(q.Consumer).AddEventSource(src)
		b.esms[q.Tier] = src
	}
	// The admin function pauses and resumes a tier by disabling its mapping.
	adm := b.fn(resources.FuncAdmin)
	for _, q := range b.def.Queues {
		adm.AddEnvironment(jsii.String(config.VarESMUUID(q.Tier)), b.esms[q.Tier].EventSourceMappingId(), nil)
	}
}

// uploadNotification sends ObjectCreated events under the upload prefix to
// the confirm function (S3 cannot notify a FIFO queue).
func (b *builder) uploadNotification() {
	bk := b.def.Bucket
	b.bucket.AddEventNotification(awss3.EventType_OBJECT_CREATED,
		awss3notifications.NewLambdaDestination(b.fn(bk.NotifyFunction)),
		&awss3.NotificationKeyFilter{Prefix: jsii.String(bk.UploadPrefix)})
}

// accessLogFormat is the HTTP API's JSON access log line
// (resources.AccessLogFields).
var accessLogFormat = func() string {
	b, _ := json.Marshal(resources.AccessLogFields)
	return string(b)
}()

// DashboardPath is where the api function serves the operators' dashboard
// (web/, embedded in its binary).
const DashboardPath = "/dashboard/"

// httpAPI routes every request ($default) to the api function, which does
// its own routing and authentication (HS256 JWT), except the route groups
// of resources.HTTPRoutes (the route table the local gateway routes by
// too): ANY /v1/admin/{proxy+} to the admin function, ANY
// /v1/uploads/{proxy+} to the uploads function, ANY /v1/schedules and ANY
// /v1/schedules/{proxy+} to the schedules function, each verifying tokens
// the same way. It names the dashboard's routes explicitly (GET /dashboard
// and GET /dashboard/{proxy+}), so they stay on the api function whatever
// other routes the API gets.
func (b *builder) httpAPI() {
	integration := awsapigatewayv2integrations.NewHttpLambdaIntegration(jsii.String("ApiIntegration"), b.fn(resources.FuncAPI),
		&awsapigatewayv2integrations.HttpLambdaIntegrationProps{
			PayloadFormatVersion: awsapigatewayv2.PayloadFormatVersion_VERSION_2_0(),
		})
	api := awsapigatewayv2.NewHttpApi(b.stack, jsii.String("HttpApi"), &awsapigatewayv2.HttpApiProps{
		ApiName:            jsii.String(b.def.Prefix + "-api"),
		Description:        jsii.String("Conveyor HTTP API (" + string(b.def.Env) + ")"),
		DefaultIntegration: integration,
		CorsPreflight:      b.apiCORS(),
	})
	b.apiLogs = awslogs.NewLogGroup(b.stack, jsii.String("HttpApiAccessLogs"), &awslogs.LogGroupProps{
		LogGroupName:  jsii.String("/aws/apigateway/" + b.def.Prefix + "-api"),
		Retention:     b.logRetention(),
		RemovalPolicy: b.removal(),
	})
	stage := api.DefaultStage().Node().DefaultChild().(awsapigatewayv2.CfnStage)
	stage.SetAccessLogSettings(&awsapigatewayv2.CfnStage_AccessLogSettingsProperty{
		DestinationArn: b.apiLogs.LogGroupArn(),
		Format:         jsii.String(accessLogFormat),
	})
	stage.SetDefaultRouteSettings(&awsapigatewayv2.CfnStage_RouteSettingsProperty{
		ThrottlingBurstLimit: jsii.Number(500),
		ThrottlingRateLimit:  jsii.Number(1000),
	})
	dashboard := strings.TrimSuffix(DashboardPath, "/")
	for _, path := range []string{dashboard, dashboard + "/{proxy+}"} {
		api.AddRoutes(&awsapigatewayv2.AddRoutesOptions{
			Path:        jsii.String(path),
			Methods:     &[]awsapigatewayv2.HttpMethod{awsapigatewayv2.HttpMethod_GET, awsapigatewayv2.HttpMethod_HEAD},
			Integration: integration,
		})
	}
	for _, r := range resources.HTTPRoutes {
		// One integration per function, shared by its routes.
		fnIntegration := awsapigatewayv2integrations.NewHttpLambdaIntegration(jsii.String(title(r.Function)+"Integration"), b.fn(r.Function),
			&awsapigatewayv2integrations.HttpLambdaIntegrationProps{
				PayloadFormatVersion: awsapigatewayv2.PayloadFormatVersion_VERSION_2_0(),
			})
		for _, key := range r.RouteKeys() {
			_, path, _ := strings.Cut(key, " ")
			api.AddRoutes(&awsapigatewayv2.AddRoutesOptions{
				Path:        jsii.String(path),
				Methods:     &[]awsapigatewayv2.HttpMethod{awsapigatewayv2.HttpMethod_ANY},
				Integration: fnIntegration,
			})
		}
	}
	awscdk.NewCfnOutput(b.stack, jsii.String("ApiUrl"), &awscdk.CfnOutputProps{
		Value:       api.ApiEndpoint(),
		Description: jsii.String("Base URL of the HTTP API"),
	})
	awscdk.NewCfnOutput(b.stack, jsii.String("DashboardUrl"), &awscdk.CfnOutputProps{
		Value:       awscdk.Fn_Join(jsii.String(""), &[]*string{api.ApiEndpoint(), jsii.String(DashboardPath)}),
		Description: jsii.String("The operators' dashboard, served by the api function"),
	})
	b.api = api
}

// apiCORS lets the configured browser origins call the HTTP API as
// resources.APICORS says (the local gateway serves the same); none without
// origins (the dashboard is served by the API itself: same origin).
func (b *builder) apiCORS() *awsapigatewayv2.CorsPreflightOptions {
	origins := b.props.Config.AllowedOrigins
	if len(origins) == 0 {
		return nil
	}
	c := resources.APICORS
	methods := make([]awsapigatewayv2.CorsHttpMethod, 0, len(c.AllowMethods))
	for _, m := range c.AllowMethods {
		methods = append(methods, awsapigatewayv2.CorsHttpMethod(m))
	}
	return &awsapigatewayv2.CorsPreflightOptions{
		AllowOrigins:  jsii.Strings(origins...),
		AllowMethods:  &methods,
		AllowHeaders:  jsii.Strings(c.AllowHeaders...),
		ExposeHeaders: jsii.Strings(c.ExposeHeaders...),
		MaxAge:        dur(c.MaxAge),
	}
}

// streamURL gives the SSE function a public URL with response streaming.
// Auth is NONE on purpose: the function verifies the caller's JWT itself
// (browsers' EventSource cannot sign requests with SigV4). Browsers may
// read it from the configured origins and from the dashboard's own (the
// HTTP API's endpoint), which opens its live streams here.
func (b *builder) streamURL() {
	origins := append([]*string{b.api.ApiEndpoint()}, *jsii.Strings(b.props.Config.AllowedOrigins...)...)
	var methods []awslambda.HttpMethod
	for _, m := range resources.StreamCORS.AllowMethods {
		methods = append(methods, awslambda.HttpMethod(m))
	}
	url := b.fn(resources.FuncStream).AddFunctionUrl(&awslambda.FunctionUrlOptions{
		AuthType:   awslambda.FunctionUrlAuthType_NONE,
		InvokeMode: awslambda.InvokeMode_RESPONSE_STREAM,
		Cors: &awslambda.FunctionUrlCorsOptions{
			AllowedOrigins: &origins,
			AllowedMethods: &methods,
			AllowedHeaders: jsii.Strings(resources.StreamCORS.AllowHeaders...),
			MaxAge:         dur(resources.StreamCORS.MaxAge),
		},
	})
	awscdk.NewCfnOutput(b.stack, jsii.String("StreamUrl"), &awscdk.CfnOutputProps{
		Value:       url.Url(),
		Description: jsii.String("URL of the server-sent events endpoint"),
	})
}

// schedules invokes the scheduled functions through EventBridge Scheduler
// (the L2 awsscheduler constructs are stable in this CDK version). The
// payload is shaped like an EventBridge event, with the task in its detail,
// so the handler reads it as events.EventBridgeEvent just as locally.
func (b *builder) schedules() {
	for _, s := range b.def.Schedules {
		input := awsscheduler.ScheduleTargetInput_FromObject(map[string]interface{}{
			"version":     "0",
			"id":          awsscheduler.ContextAttribute_ExecutionId(),
			"detail-type": "Scheduled Event",
			"source":      "aws.scheduler",
			"account":     awscdk.Aws_ACCOUNT_ID(),
			"time":        awsscheduler.ContextAttribute_ScheduledTime(),
			"region":      awscdk.Aws_REGION(),
			"resources":   []interface{}{awsscheduler.ContextAttribute_ScheduleArn()},
			"detail":      s.Detail(),
		})
		awsscheduler.NewSchedule(b.stack, jsii.String(title(strings.TrimPrefix(s.Name, b.def.Prefix+"-"))+"Schedule"), &awsscheduler.ScheduleProps{
			ScheduleName: jsii.String(s.Name),
			Description:  jsii.String("Conveyor " + s.Task + " (" + string(b.def.Env) + ")"),
			Schedule:     awsscheduler.ScheduleExpression_Expression(jsii.String(s.Expression), nil),
			Target: awsschedulertargets.NewLambdaInvoke(b.fn(s.Function), &awsschedulertargets.ScheduleTargetBaseProps{
				Input: input,
				// A missed run is covered by the next one.
				RetryAttempts: jsii.Number(0),
				MaxEventAge:   awscdk.Duration_Minutes(jsii.Number(1)),
			}),
		})
	}
}
