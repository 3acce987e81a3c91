package stack

import (
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"

	"github.com/conveyor/conveyor/internal/resources"
)

// Check applies the cdk-nag AwsSolutions pack to every stack under scope
// (the app, in the CDK app and in the tests alike). Findings become error
// and warning annotations; every accepted finding is suppressed in
// suppressions() with its reason.
func Check(scope constructs.IConstruct) {
	awscdk.Aspects_Of(scope).Add(cdknag.NewAwsSolutionsChecks(&cdknag.NagPackProps{Verbose: jsii.Bool(true)}), nil)
}

// Suppression is one accepted cdk-nag finding.
type Suppression struct {
	// Rule is the cdk-nag rule id (AwsSolutions-…).
	Rule string
	// Reason says why the finding is accepted.
	Reason string
	// AppliesTo narrows an IAM finding to these findings (regexes over
	// cdk-nag's "Action::…"/"Resource::…" strings); empty means the whole
	// rule for that resource.
	AppliesTo []string
}

func (s Suppression) nag() *cdknag.NagPackSuppression {
	n := &cdknag.NagPackSuppression{Id: jsii.String(s.Rule), Reason: jsii.String(s.Reason)}
	if len(s.AppliesTo) > 0 {
		var at []interface{}
		for _, re := range s.AppliesTo {
			at = append(at, &cdknag.RegexAppliesTo{Regex: jsii.String(re)})
		}
		n.AppliesTo = &at
	}
	return n
}

func suppress(c constructs.IConstruct, children bool, ss ...Suppression) {
	var list []*cdknag.NagPackSuppression
	for _, s := range ss {
		list = append(list, s.nag())
	}
	cdknag.NagSuppressions_AddResourceSuppressions(c, &list, jsii.Bool(children))
}

// The accepted findings, with their reasons.
var (
	// SuppressXRay: Tracing ACTIVE adds xray:PutTraceSegments and
	// xray:PutTelemetryRecords on "*" to each function's role.
	SuppressXRay = Suppression{
		Rule:      "AwsSolutions-IAM5",
		Reason:    "X-Ray tracing: xray:PutTraceSegments and xray:PutTelemetryRecords support no resource-level permissions, so their resource must be \"*\".",
		AppliesTo: []string{`/^Resource::\*$/`},
	}
	// SuppressUploadObjects: object-level S3 actions on the upload prefix.
	SuppressUploadObjects = Suppression{
		Rule: "AwsSolutions-IAM5",
		Reason: "Object keys are created per upload at run time (uploads/<owner>/<upload id>/<file>); " +
			"the statement is limited to the upload prefix of this one bucket and to the object actions the function uses.",
		AppliesTo: []string{`/^Resource::<Uploads[0-9A-F]+\.Arn>\/uploads\/\*$/`},
	}
	// SuppressSecretRotation: generated signing secrets are not rotated by
	// a rotation Lambda.
	SuppressSecretRotation = Suppression{
		Rule: "AwsSolutions-SMG4",
		Reason: "HMAC signing keys (JWT HS256, webhook signatures) are rotated by an operator with an overlap window " +
			"(tokens and receivers must accept old and new key for a while); an automatic single-step rotation would " +
			"invalidate every live token and every receiver's key at once.",
	}
	// SuppressOAuthClientRotation: the OAuth client secret is issued by
	// the external API's provider.
	SuppressOAuthClientRotation = Suppression{
		Rule: "AwsSolutions-SMG4",
		Reason: "The OAuth client credentials are issued by the external API's provider (DeviantArt's application " +
			"settings); only an operator can regenerate them there, then puts the new value into this secret.",
	}
	// SuppressAPIAuth: the HTTP API's routes carry no API Gateway authorizer.
	SuppressAPIAuth = Suppression{
		Rule: "AwsSolutions-APIG4",
		Reason: "The api function authenticates every non-public route itself with HS256 JWTs (internal/httpapi), " +
			"including admin role checks; API Gateway JWT authorizers only accept asymmetric keys from an OIDC issuer.",
	}
	// SuppressAccessLogBucket: the access log bucket does not log itself.
	SuppressAccessLogBucket = Suppression{
		Rule:   "AwsSolutions-S1",
		Reason: "This bucket receives the upload bucket's server access logs; logging it into itself would loop.",
	}
	// SuppressNotificationsHandler: CDK's singleton function that writes
	// the bucket's notification configuration (Custom::S3BucketNotifications).
	SuppressNotificationsHandler = Suppression{
		Rule:      "AwsSolutions-IAM4",
		Reason:    "CDK's BucketNotificationsHandler (a deploy-time custom resource) uses AWSLambdaBasicExecutionRole for its own logs.",
		AppliesTo: []string{`/^Policy::arn:<AWS::Partition>:iam::aws:policy\/service-role\/AWSLambdaBasicExecutionRole$/`},
	}
	// SuppressFailureQueueDLQ: the async failure queue is itself the end
	// of the line.
	SuppressFailureQueueDLQ = Suppression{
		Rule: "AwsSolutions-SQS3",
		Reason: "This queue is the on-failure destination of asynchronous invocations (a dead-letter queue in all but " +
			"name): nothing consumes it automatically, an operator inspects and deletes its messages, and it is alarmed.",
	}
	// SuppressSchedulerInvoke: the scheduler's role may invoke the
	// scheduled function's versions and aliases too.
	SuppressSchedulerInvoke = Suppression{
		Rule: "AwsSolutions-IAM5",
		Reason: "EventBridge Scheduler's role for the scheduled function: CDK's grantInvoke also covers the function's " +
			"versions and aliases (<function arn>:*); the role can invoke that one function and nothing else.",
		AppliesTo: []string{`/^Resource::<[A-Za-z0-9]+Function[0-9A-F]+\.Arn>:\*$/`},
	}
)

// suppressions attaches every accepted finding to the construct it is
// about, never to the whole stack.
func (b *builder) suppressions() {
	for _, fn := range b.def.Functions {
		role := b.fns[fn].Role()
		ss := []Suppression{SuppressXRay}
		switch fn {
		case resources.FuncUploads, resources.FuncConfirm, resources.FuncPublisher, resources.FuncRecovery:
			ss = append(ss, SuppressUploadObjects)
		}
		suppress(role, true, ss...)
	}
	suppress(b.jwtSecret, false, SuppressSecretRotation)
	if b.oauthClientCreated != nil {
		suppress(b.oauthClientCreated, false, SuppressOAuthClientRotation)
	}
	suppress(b.api, true, SuppressAPIAuth)
	suppress(b.logs, false, SuppressAccessLogBucket)
	suppress(b.failures, true, SuppressFailureQueueDLQ)
	// CDK creates these as singletons on the stack itself: the bucket
	// notification's handler and the scheduler's role per target function.
	for _, c := range *b.stack.Node().Children() {
		switch id := *c.Node().Id(); {
		case strings.HasPrefix(id, "BucketNotificationsHandler"):
			suppress(c, true, SuppressNotificationsHandler)
		case strings.HasPrefix(id, "SchedulerRoleForTarget"):
			suppress(c, true, SuppressSchedulerInvoke)
		}
	}
}
