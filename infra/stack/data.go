package stack

import (
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambdaeventsources"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssecretsmanager"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/resources"
)

// builder carries the constructs of one stack between its build steps.
type builder struct {
	stack awscdk.Stack
	def   resources.Definition
	props Props
	// readRetired: the functions query the retired indexes (a stage of
	// the index migration, IndexStageContextKey).
	readRetired bool

	queues map[job.Tier]awssqs.Queue
	dlqs   map[job.Tier]awssqs.Queue
	// failures is the on-failure destination of asynchronous invocations.
	failures awssqs.Queue
	table    awsdynamodb.ITable
	bucket   awss3.Bucket
	logs     awss3.Bucket
	key      awskms.IKey
	bus      awsevents.EventBus

	jwtSecret awssecretsmanager.Secret
	// oauthClient holds the external API's client credentials: created
	// here (oauthClientCreated) or referenced by Props.OAuthClientSecretARN.
	oauthClient        awssecretsmanager.ISecret
	oauthClientCreated awssecretsmanager.Secret

	fns    map[string]awslambda.Function
	fnLogs map[string]awslogs.LogGroup
	esms   map[job.Tier]awslambdaeventsources.SqsEventSource
	// relayFailures is the event stream mapping's on-failure queue.
	relayFailures awssqs.Queue
	apiLogs       awslogs.LogGroup
	api           awsapigatewayv2.HttpApi
}

// removal is the removal policy of the stateful resources: in production
// they outlive a stack deletion or a replacement, but not the rollback of
// a failed create (CloudFormation's RetainExceptOnCreate), since a
// retained resource with a fixed name would make the retried create fail
// with "already exists"; in staging they go with the stack.
func (b *builder) removal() awscdk.RemovalPolicy {
	if b.def.Env.Production() {
		return awscdk.RemovalPolicy_RETAIN_ON_UPDATE_OR_DELETE
	}
	return awscdk.RemovalPolicy_DESTROY
}

func dur(d time.Duration) awscdk.Duration {
	return awscdk.Duration_Seconds(jsii.Number(d.Seconds()))
}

func (b *builder) data() {
	b.queuesAndDLQs()
	b.tableFromDefinition()
	b.uploadBucket()

	b.tokenKey()

	b.bus = awsevents.NewEventBus(b.stack, jsii.String("EventBus"), &awsevents.EventBusProps{
		EventBusName: jsii.String(b.def.EventBus),
		Description:  jsii.String("Conveyor job and webhook events"),
	})

	secret := func(id, name, what string) awssecretsmanager.Secret {
		return awssecretsmanager.NewSecret(b.stack, jsii.String(id), &awssecretsmanager.SecretProps{
			SecretName:  jsii.String(b.def.Prefix + "/" + name),
			Description: jsii.String(what),
			GenerateSecretString: &awssecretsmanager.SecretStringGenerator{
				PasswordLength:     jsii.Number(64),
				ExcludePunctuation: jsii.Bool(true),
			},
			RemovalPolicy: b.removal(),
		})
	}
	b.jwtSecret = secret("JWTSecret", "jwt", "HS256 key that signs and verifies Conveyor bearer tokens")
	b.oauthClientSecret()
}

// tokenKey makes the key that envelope-encrypts account tokens
// (internal/envelope: a data key per record, the secret sealed under it,
// only the wrapped data key stored), or adopts an existing one
// (Config.Adopt.TokenKeyARN: the key a deleted stack kept, which opens the
// tokens of its restored table). Either way the alias names it, under the
// same construct path (so the same logical id: switching updates the
// alias in place).
func (b *builder) tokenKey() {
	if arn := b.props.Config.Adopt.TokenKeyARN; arn != "" {
		scope := constructs.NewConstruct(b.stack, jsii.String("TokenKey"))
		key := awskms.Key_FromKeyArn(scope, jsii.String("Adopted"), jsii.String(arn))
		awskms.NewAlias(scope, jsii.String("Alias"), &awskms.AliasProps{AliasName: jsii.String(b.def.KMSAlias), TargetKey: key})
		b.key = key
		return
	}
	b.key = awskms.NewKey(b.stack, jsii.String("TokenKey"), &awskms.KeyProps{
		Alias:             jsii.String(b.def.KMSAlias),
		Description:       jsii.String("Conveyor " + string(b.def.Env) + ": envelope encryption of connected-account tokens"),
		EnableKeyRotation: jsii.Bool(true),
		PendingWindow:     awscdk.Duration_Days(jsii.Number(30)),
		// Production keeps it when the stack goes (the tokens of a kept
		// or restored table are sealed under it), never after a failed
		// create; staging's is scheduled for deletion with the stack.
		RemovalPolicy: b.removal(),
	})
}

// oauthClientSecret references the OAuth client secret given by ARN, or
// creates one whose clientId is empty: the credentials come from the
// provider, so an operator puts them in (docs/operations.md), and until then the
// functions that refresh tokens refuse to start, saying so, rather than
// fail every user's refresh. The generated clientSecret only keeps a
// placeholder from being a well-known value.
func (b *builder) oauthClientSecret() {
	if arn := b.props.OAuthClientSecretARN; arn != "" {
		b.oauthClient = awssecretsmanager.Secret_FromSecretCompleteArn(b.stack, jsii.String("OAuthClientSecret"), jsii.String(arn))
		return
	}
	b.oauthClientCreated = awssecretsmanager.NewSecret(b.stack, jsii.String("OAuthClientSecret"), &awssecretsmanager.SecretProps{
		SecretName: jsii.String(OAuthClientSecretName(b.def.Env)),
		Description: jsii.String(`External API OAuth client credentials, {"clientId":"…","clientSecret":"…"}: ` +
			"put the registered application's values here; read by the publisher at cold start"),
		GenerateSecretString: &awssecretsmanager.SecretStringGenerator{
			SecretStringTemplate: jsii.String(`{"clientId":""}`),
			GenerateStringKey:    jsii.String("clientSecret"),
			PasswordLength:       jsii.Number(32),
			ExcludePunctuation:   jsii.Bool(true),
		},
		RemovalPolicy: b.removal(),
	})
	b.oauthClient = b.oauthClientCreated
}

func (b *builder) queuesAndDLQs() {
	b.queues = map[job.Tier]awssqs.Queue{}
	b.dlqs = map[job.Tier]awssqs.Queue{}
	for _, q := range b.def.Queues {
		tier := title(string(q.Tier))
		dlq := awssqs.NewQueue(b.stack, jsii.String(tier+"DLQ"), &awssqs.QueueProps{
			QueueName:                 jsii.String(q.DLQName),
			Fifo:                      jsii.Bool(true),
			ContentBasedDeduplication: jsii.Bool(false),
			RetentionPeriod:           dur(q.DLQRetention),
			VisibilityTimeout:         dur(q.VisibilityTimeout),
			Encryption:                awssqs.QueueEncryption_SQS_MANAGED,
			EnforceSSL:                jsii.Bool(true),
			RemovalPolicy:             b.removal(),
		})
		b.dlqs[q.Tier] = dlq
		// Only this tier's queue may send dead letters here. Its ARN is
		// built from its fixed name: a reference to the queue would make
		// queue → DLQ → queue a dependency cycle.
		dlq.Node().DefaultChild().(awssqs.CfnQueue).SetRedriveAllowPolicy(map[string]any{
			"redrivePermission": "byQueue",
			"sourceQueueArns":   []*string{queueARN(q.Name)},
		})
		main := awssqs.NewQueue(b.stack, jsii.String(tier+"Queue"), &awssqs.QueueProps{
			QueueName:                 jsii.String(q.Name),
			Fifo:                      jsii.Bool(true),
			ContentBasedDeduplication: jsii.Bool(false),
			RetentionPeriod:           dur(q.Retention),
			VisibilityTimeout:         dur(q.VisibilityTimeout),
			Encryption:                awssqs.QueueEncryption_SQS_MANAGED,
			EnforceSSL:                jsii.Bool(true),
			DeadLetterQueue: &awssqs.DeadLetterQueue{
				Queue:           dlq,
				MaxReceiveCount: jsii.Number(float64(q.MaxReceiveCount)),
			},
			RemovalPolicy: b.removal(),
		})
		// High-throughput FIFO (the definition's attributes).
		cfn := main.Node().DefaultChild().(awssqs.CfnQueue)
		cfn.SetDeduplicationScope(jsii.String(q.DeduplicationScope))
		cfn.SetFifoThroughputLimit(jsii.String(q.FifoThroughputLimit))
		b.queues[q.Tier] = main
	}
	b.asyncFailureQueue()
}

// queueARN is the ARN of this stack's queue named name.
func queueARN(name string) *string {
	return awscdk.Fn_Sub(jsii.String("arn:${AWS::Partition}:sqs:${AWS::Region}:${AWS::AccountId}:"+name), nil)
}

// asyncFailureQueue receives the asynchronous invocations that failed
// after Lambda's retries (the on-failure destination of confirm). A
// standard queue: Lambda destinations cannot target FIFO queues.
func (b *builder) asyncFailureQueue() {
	b.failures = awssqs.NewQueue(b.stack, jsii.String("AsyncFailures"), &awssqs.QueueProps{
		QueueName:       jsii.String(b.def.AsyncFailureQueue),
		RetentionPeriod: awscdk.Duration_Days(jsii.Number(14)),
		Encryption:      awssqs.QueueEncryption_SQS_MANAGED,
		EnforceSSL:      jsii.Bool(true),
		RemovalPolicy:   b.removal(),
	})
}

func attrType(t resources.KeyType) awsdynamodb.AttributeType {
	if t == resources.Number {
		return awsdynamodb.AttributeType_NUMBER
	}
	return awsdynamodb.AttributeType_STRING
}

func attr(k resources.Key) *awsdynamodb.Attribute {
	if k.Name == "" {
		return nil
	}
	return &awsdynamodb.Attribute{Name: jsii.String(k.Name), Type: attrType(k.Type)}
}

func (b *builder) tableFromDefinition() {
	t := b.def.Table
	if a := b.props.Config.Adopt; a.Table != "" {
		// A restored table: the stack names it, creates nothing of it.
		var indexes []*string
		for _, ix := range t.Indexes {
			indexes = append(indexes, jsii.String(ix.Name))
		}
		b.table = awsdynamodb.Table_FromTableAttributes(b.stack, jsii.String("Table"), &awsdynamodb.TableAttributes{
			TableName: jsii.String(a.Table), TableStreamArn: jsii.String(a.TableStreamARN), GlobalIndexes: &indexes,
		})
		return
	}
	// AWS-owned-by-service (aws/dynamodb) encryption, not the token key:
	// the only secrets in the table (refresh tokens) are already sealed
	// under the customer-managed key by the application, and a CMK on the
	// table would add kms:Decrypt/GenerateDataKey to every function's role
	// and a KMS request to many table operations.
	table := awsdynamodb.NewTable(b.stack, jsii.String("Table"), &awsdynamodb.TableProps{
		TableName:           jsii.String(t.Name),
		PartitionKey:        attr(t.PartitionKey),
		SortKey:             attr(t.SortKey),
		BillingMode:         awsdynamodb.BillingMode_PAY_PER_REQUEST,
		Encryption:          awsdynamodb.TableEncryption_AWS_MANAGED,
		TimeToLiveAttribute: jsii.String(t.TTLAttribute),
		Stream:              awsdynamodb.StreamViewType(t.StreamView),
		PointInTimeRecoverySpecification: &awsdynamodb.PointInTimeRecoverySpecification{
			PointInTimeRecoveryEnabled: jsii.Bool(t.PointInTimeRecovery),
		},
		// From the configuration, not the definition: a protected table
		// survives the rollback of a failed first create (see Config).
		DeletionProtection: jsii.Bool(b.props.Config.TableDeletionProtection),
		RemovalPolicy:      b.removal(),
	})
	for _, ix := range t.Indexes {
		props := &awsdynamodb.GlobalSecondaryIndexProps{
			IndexName:      jsii.String(ix.Name),
			PartitionKey:   attr(ix.PartitionKey),
			SortKey:        attr(ix.SortKey),
			ProjectionType: awsdynamodb.ProjectionType(ix.Projection()),
		}
		if len(ix.Include) > 0 {
			props.NonKeyAttributes = jsii.Strings(ix.Include...)
		}
		table.AddGlobalSecondaryIndex(props)
	}
	b.table = table
}

// BucketName is the upload bucket's name in the cloud: the definition's
// name with the account id appended, since bucket names are global.
func BucketName(def resources.Definition) *string {
	return awscdk.Fn_Join(jsii.String("-"), &[]*string{jsii.String(def.Bucket.Name), awscdk.Aws_ACCOUNT_ID()})
}

func (b *builder) uploadBucket() {
	bk := b.def.Bucket
	// Server access logs of the upload bucket. It needs SSE-S3 (the log
	// delivery service cannot use a KMS key) and keeps logs for 90 days.
	b.logs = awss3.NewBucket(b.stack, jsii.String("AccessLogs"), &awss3.BucketProps{
		BlockPublicAccess: awss3.BlockPublicAccess_BLOCK_ALL(),
		Encryption:        awss3.BucketEncryption_S3_MANAGED,
		EnforceSSL:        jsii.Bool(true),
		ObjectOwnership:   awss3.ObjectOwnership_BUCKET_OWNER_ENFORCED,
		LifecycleRules: &[]*awss3.LifecycleRule{{
			Id:         jsii.String("expire-access-logs"),
			Expiration: awscdk.Duration_Days(jsii.Number(90)),
		}},
		// Its name is generated, so a kept bucket never collides with a
		// re-created stack's: the audit trail outlives the stack.
		RemovalPolicy: awscdk.RemovalPolicy_RETAIN_ON_UPDATE_OR_DELETE,
	})
	// SSE-S3 rather than a KMS key: presigned browser PUTs and the
	// functions' reads would otherwise each need kms:GenerateDataKey or
	// kms:Decrypt, for media that is not secret once published.
	b.bucket = awss3.NewBucket(b.stack, jsii.String("Uploads"), &awss3.BucketProps{
		BucketName:             BucketName(b.def),
		BlockPublicAccess:      awss3.BlockPublicAccess_BLOCK_ALL(),
		Encryption:             awss3.BucketEncryption_S3_MANAGED,
		EnforceSSL:             jsii.Bool(true),
		ObjectOwnership:        awss3.ObjectOwnership_BUCKET_OWNER_ENFORCED,
		ServerAccessLogsBucket: b.logs,
		ServerAccessLogsPrefix: jsii.String(bk.Name + "/"),
		Cors:                   b.uploadCORS(),
		LifecycleRules: &[]*awss3.LifecycleRule{{
			Id:         jsii.String("expire-uploads-after-horizon"),
			Prefix:     jsii.String(bk.UploadPrefix),
			Expiration: dur(bk.UploadObjectExpiry),
		}, {
			Id:                                  jsii.String("abort-incomplete-multipart-uploads"),
			AbortIncompleteMultipartUploadAfter: awscdk.Duration_Days(jsii.Number(1)),
		}},
		// Production keeps users' media if the stack is deleted. Staging's
		// goes with the stack (CloudFormation refuses to delete a bucket
		// that still holds objects: empty it first), so a re-created
		// staging stack never collides with a kept bucket of the same name.
		RemovalPolicy: b.removal(),
	})
}

// uploadCORS lets the configured browser origins PUT to presigned URLs;
// none without origins (S3 refuses a rule without one).
func (b *builder) uploadCORS() *[]*awss3.CorsRule {
	origins := b.props.Config.AllowedOrigins
	if len(origins) == 0 {
		return nil
	}
	return &[]*awss3.CorsRule{{
		Id:             jsii.String("browser-presigned-put"),
		AllowedMethods: &[]awss3.HttpMethods{awss3.HttpMethods_PUT},
		AllowedOrigins: jsii.Strings(origins...),
		AllowedHeaders: jsii.Strings("Content-Type", "Content-Length", "Content-Disposition"),
		ExposedHeaders: jsii.Strings("ETag"),
		MaxAge:         jsii.Number(3600),
	}}
}
