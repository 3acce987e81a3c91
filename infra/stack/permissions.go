package stack

import (
	"fmt"
	"slices"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/jsii-runtime-go"

	"github.com/conveyor/conveyor/internal/envelope"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/resources"
)

// DynamoDB action sets. Transactions need no actions of their own: a
// TransactWriteItems is authorised item by item as PutItem, UpdateItem,
// DeleteItem and ConditionCheckItem. Scan is granted to nobody.
var (
	ddbRead  = []string{"dynamodb:GetItem", "dynamodb:BatchGetItem", "dynamodb:Query"}
	ddbWrite = []string{"dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem", "dynamodb:ConditionCheckItem"}
)

// without is set less the actions drop names: a function whose code
// makes none of them (make iam's static side reaches none) is not
// granted them.
func without(set []string, drop ...string) []string {
	return slices.DeleteFunc(slices.Clone(set), func(a string) bool { return slices.Contains(drop, a) })
}

func concat(sets ...[]string) []string {
	var out []string
	for _, s := range sets {
		out = append(out, s...)
	}
	return out
}

func (b *builder) allow(fn string, actions []string, resources ...*string) {
	b.allowWhen(fn, actions, nil, resources...)
}

// allowWhen is allow under conditions (nil: none).
func (b *builder) allowWhen(fn string, actions []string, conditions map[string]any, resources ...*string) {
	props := &awsiam.PolicyStatementProps{
		Effect:    awsiam.Effect_ALLOW,
		Actions:   jsii.Strings(actions...),
		Resources: &resources,
	}
	if conditions != nil {
		props.Conditions = &conditions
	}
	b.fn(fn).AddToRolePolicy(awsiam.NewPolicyStatement(props))
}

// PurposeCondition is the encryption context key that scopes every KMS
// grant: a function may seal (GenerateDataKey) or open (Decrypt) only the
// kinds of secret it works with (internal/envelope' purposes), so that the
// function delivering webhooks cannot open users' OAuth tokens, nor the
// publisher webhook signing keys.
const PurposeCondition = "kms:EncryptionContext:" + envelope.ContextPurpose

// kms allows fn the sealer's action on the key for the given purposes only.
func (b *builder) kms(fn, action string, purposes ...string) {
	b.allowWhen(fn, []string{action}, map[string]any{"StringEquals": map[string]any{PurposeCondition: purposes}}, b.key.KeyArn())
}

// listUploads allows fn to list the bucket under the upload prefix only:
// S3 answers a HeadObject (or GetObject) of a missing key with 404 only to
// a caller that may list the bucket (it evaluates s3:ListBucket with the
// key as s3:prefix), else with 403 — so without it, confirming an upload
// before its PUT landed would be a 500, not a 422.
func (b *builder) listUploads(fn string) {
	b.allowWhen(fn, []string{"s3:ListBucket"}, map[string]any{"StringLike": map[string]any{"s3:prefix": []string{b.def.Bucket.UploadPrefix + "*"}}},
		b.bucket.BucketArn())
}

// indexArn is the ARN of one of the table's indexes.
func (b *builder) indexArn(name string) *string {
	return awscdk.Fn_Join(jsii.String(""), &[]*string{b.table.TableArn(), jsii.String("/index/" + name)})
}

// tableAndIndexes is the table's ARN followed by the named indexes' ARNs
// (exact ARNs, no index/* wildcard).
// During a migration's stages that read the retired indexes, the
// retired index each named one replaces is named too.
func (b *builder) tableAndIndexes(indexes ...string) []*string {
	arns := []*string{b.table.TableArn()}
	for _, ix := range indexes {
		arns = append(arns, b.indexArn(ix))
		if old, ok := resources.Replaced[ix]; ok && b.readRetired {
			arns = append(arns, b.indexArn(old))
		}
	}
	return arns
}

func (b *builder) allIndexes() []string {
	var names []string
	for _, ix := range b.def.Table.Indexes {
		names = append(names, ix.Name)
	}
	return names
}

// uploadObjects is the ARN of every object under the upload prefix.
func (b *builder) uploadObjects() *string {
	return b.bucket.ArnForObjects(jsii.String(b.def.Bucket.UploadPrefix + "*"))
}

func (b *builder) queueArns(tiers ...job.Tier) []*string {
	var arns []*string
	for _, t := range tiers {
		arns = append(arns, b.queues[t].QueueArn())
	}
	return arns
}

func (b *builder) dlqArns() []*string {
	var arns []*string
	for _, q := range b.def.Queues {
		arns = append(arns, b.dlqs[q.Tier].QueueArn())
	}
	return arns
}

// permissions gives each function exactly the actions its code calls
// (internal/handler wires which services each function runs) on exactly the
// resources it uses them on. Grant methods are used where they are exact
// (events:PutEvents on the bus, the event sources' consume grants);
// elsewhere statements are written out, since the table and secret grants
// include actions nobody here needs (Scan, DescribeSecret, …).
//
// Who calls what:
//   - api: jobs, accounts (Connect only seals account tokens, never opens
//     them), webhooks (their signing secret: sealed and opened). No admin
//     power, no S3, no Scheduler.
//   - admin: the admin routes (resources.AdminPathPrefix), the only holder
//     of the admin powers (DLQ peek/delete/redrive, event source mapping
//     updates); no S3, no KMS.
//   - uploads: the uploads routes (resources.UploadsPathPrefix): the
//     upload records, the bucket's uploads/ prefix and the owners' rate
//     buckets; nothing else.
//   - schedules: the recurring schedules' routes (resources.SchedulesPath):
//     their records, the owners' rate buckets and the environment's
//     Scheduler group (schedules.go); no queue (the ticks' jobs are
//     submitted by recovery), no S3, no KMS.
//   - publisher: loads, refreshes and stores tokens (Decrypt,
//     GenerateDataKey), streams media, records progress. The only
//     message it sends moves a waiting job out of its owner's slot on its
//     own queue (short retries are visibility changes); it emits no event
//     (events go through the outbox).
//   - system: webhook deliveries; no message, no event.
//   - recovery: sweeps, requeues (every tier: jobs and their webhooks),
//     retention, schedule ticks (which seal http headers).
//   - relay: the table's stream to the bus (the only caller of
//     PutEvents) and the webhooks' queue.
//   - confirm, stream: reads and one conditional update.
//   - relay: the bus, the system queue, and the webhook endpoints' summaries
//     in the table (relay.go).
//
// Every KMS grant is scoped to the purposes of the secrets the function
// seals or opens (PurposeCondition). The IAM conformance check
// (docs/iam.md) holds every request the functions make against these
// roles, and every grant against the requests.
func (b *builder) permissions() {
	for _, fn := range b.def.Functions {
		switch fn {
		case resources.FuncAPI:
			b.apiPermissions()
		case resources.FuncAdmin:
			b.adminPermissions()
		case resources.FuncUploads:
			// Sign (a new upload record), get, and confirm on demand (the
			// conditional update that settles it); the owner's rate bucket
			// (UpdateItem, GetItem: store.RateLease).
			b.allow(fn, []string{"dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem"}, b.table.TableArn())
			// Presigned PUTs are signed with the function's credentials, so
			// the role needs PutObject; HeadObject and the ranged GET that
			// sniffs the content type (confirm on demand) are GetObject.
			b.allow(fn, []string{"s3:PutObject", "s3:GetObject"}, b.uploadObjects())
			b.listUploads(fn)
			b.allow(fn, []string{"secretsmanager:GetSecretValue"}, b.jwtSecret.SecretArn())
		case resources.FuncSchedules:
			// The owner's schedules: one partition (list and count are a
			// Query on its key, never an index), conditional puts, deletes;
			// and the owner's rate bucket (UpdateItem, and GetItem when a
			// lease's refusal carries no value: store.RateLease), which the
			// api and uploads functions move too. The Scheduler rights are
			// userSchedules'.
			b.allow(fn, []string{"dynamodb:GetItem", "dynamodb:Query", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem"}, b.table.TableArn())
			b.allow(fn, []string{"secretsmanager:GetSecretValue"}, b.jwtSecret.SecretArn())
			// A template's secret values (an http job's headers) are
			// sealed apart from it; recovery opens them at each tick.
			b.kms(fn, "kms:GenerateDataKey", envelope.PurposeScheduleTemplate)
		case resources.FuncConfirm:
			// Mark the upload confirmed; HeadObject and the ranged GET that
			// sniffs the content type are both s3:GetObject.
			b.allow(fn, []string{"dynamodb:GetItem", "dynamodb:UpdateItem"}, b.table.TableArn())
			b.allow(fn, []string{"s3:GetObject"}, b.uploadObjects())
			// An event can come late, for an object gone since: 404, not 403.
			b.listUploads(fn)
		case resources.FuncPublisher:
			// Consuming high/medium/low (ReceiveMessage, DeleteMessage,
			// ChangeMessageVisibility for backoff, GetQueueAttributes) is
			// granted by the event sources.
			b.allow(fn, concat(ddbRead, ddbWrite), b.table.TableArn())
			b.allow(fn, []string{"s3:GetObject"}, b.uploadObjects())
			// An item's object can be gone when its job runs (retention, a
			// replaced upload): 404, the job failed as expired media, not a
			// 403 retried to the end of its attempts.
			b.listUploads(fn)
			// A message that must wait leaves its owner's slot: a copy is
			// sent into its job's own group (queue.MoveOut) on its queue.
			b.allow(fn, []string{"sqs:SendMessage"}, b.queueArns(job.High, job.Medium, job.Low)...)
			// Decrypt opens an account's tokens and an http job's headers;
			// GenerateDataKey re-seals rotated tokens.
			b.kms(fn, "kms:Decrypt", envelope.PurposeAccountToken, envelope.PurposeHTTPHeaders)
			b.kms(fn, "kms:GenerateDataKey", envelope.PurposeAccountToken)
		case resources.FuncSystem:
			// Webhook deliveries; the bulk operations' jobs, selected from
			// the inspector's indexes a bulk filter picks. Its writes put
			// and update; none deletes or checks a condition apart.
			b.allow(fn, concat(ddbRead, without(ddbWrite, "dynamodb:DeleteItem", "dynamodb:ConditionCheckItem")), b.tableAndIndexes(resources.BulkIndexes...)...)
			// An operation's restarts go to their tiers; its stops send a
			// cancelled running job for reconciliation.
			b.allow(fn, []string{"sqs:SendMessage"}, b.queueArns(job.High, job.Medium, job.Low)...)
			// A delivery that must wait leaves its owner's slot (a copy sent
			// into a group of its own) and goes back to it once due
			// (queue.MoveOut, queue.Readmit), on the system queue.
			b.allow(fn, []string{"sqs:SendMessage"}, b.queueArns(job.System)...)
			// Each delivery is signed with its owner's secret, sealed in the
			// table: Decrypt opens it; GenerateDataKey seals a first one.
			b.kms(fn, "kms:Decrypt", envelope.PurposeWebhookSigning)
			b.kms(fn, "kms:GenerateDataKey", envelope.PurposeWebhookSigning)
		case resources.FuncRecovery:
			// Sweeps query the sparse sweep index, never scan. Retention
			// expires items by TTL: recovery deletes none itself.
			b.allow(fn, concat(ddbRead, without(ddbWrite, "dynamodb:DeleteItem")), b.tableAndIndexes(resources.IndexBySweep)...)
			// Requeued jobs go back to their tier.
			b.allow(fn, []string{"sqs:SendMessage"}, b.queueArns(job.Tiers...)...)
			// Retention removes finished jobs' media.
			b.allow(fn, []string{"s3:DeleteObject"}, b.uploadObjects())
			// A schedule's tick submits its job template: its sealed values
			// are opened, and an http job's headers sealed at submission.
			b.kms(fn, "kms:Decrypt", envelope.PurposeScheduleTemplate)
			b.kms(fn, "kms:GenerateDataKey", envelope.PurposeHTTPHeaders)
		case resources.FuncStream:
			// A job's event log (the table), for GET /v1/events the caller's
			// newest and recently updated jobs (two indexes), for the admin
			// feed the feed index; the per-user stream slots are conditional
			// writes on the table.
			b.allow(fn, ddbRead, b.tableAndIndexes(resources.IndexByOwner, resources.IndexByOwnerUpdated, resources.IndexByFeed)...)
			b.allow(fn, []string{"dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem"}, b.table.TableArn())
			b.allow(fn, []string{"secretsmanager:GetSecretValue"}, b.jwtSecret.SecretArn())
		case resources.FuncRelay:
			b.relayPermissions()
		default:
			panic(fmt.Sprintf("infra: function %q has no permissions defined", fn))
		}
		if resources.NeedsOAuthClient(fn) {
			// The OAuth client credentials, read once per cold start.
			b.allow(fn, []string{"secretsmanager:GetSecretValue"}, b.oauthClient.SecretArn())
		}
	}
}

// apiPermissions: the api function serves the users' routes.
func (b *builder) apiPermissions() {
	fn := resources.FuncAPI
	// Jobs (and the uploads they name), accounts, webhooks, lists (every
	// index).
	b.allow(fn, concat(ddbRead, ddbWrite), b.tableAndIndexes(b.allIndexes()...)...)
	// Submissions.
	b.allow(fn, []string{"sqs:SendMessage"}, b.queueArns(job.Tiers...)...)
	// Connecting an account seals its tokens, an http job its headers, the
	// webhook routes the owner's signing secret (created on first use,
	// rotated); those routes also open it (GET /v1/webhooks/secret).
	b.kms(fn, "kms:GenerateDataKey", envelope.PurposeAccountToken, envelope.PurposeWebhookSigning, envelope.PurposeHTTPHeaders)
	b.kms(fn, "kms:Decrypt", envelope.PurposeWebhookSigning)
	b.allow(fn, []string{"secretsmanager:GetSecretValue"}, b.jwtSecret.SecretArn())
}

// adminPermissions: the admin function serves the admin routes
// (httpapi.RegisterAdmin), so it alone holds the admin powers.
func (b *builder) adminPermissions() {
	fn := resources.FuncAdmin
	// Restarts, stops, the inspector's searches (every index), breakers,
	// tier flags, the overview's counts and stats; no transaction of its
	// checks a condition apart.
	b.allow(fn, concat(ddbRead, without(ddbWrite, "dynamodb:ConditionCheckItem")), b.tableAndIndexes(b.allIndexes()...)...)
	// Restarts and redrive targets; the overview's depths.
	b.allow(fn, []string{"sqs:SendMessage", "sqs:GetQueueAttributes"}, b.queueArns(job.Tiers...)...)
	// DLQ peek (receive, then release with a visibility change), the
	// redrive fallback's delete, and redrive to the original queue with a
	// message move task (which itself needs receive, delete and
	// GetQueueAttributes on the DLQ and SendMessage on the destination).
	b.allow(fn, []string{
		"sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:ChangeMessageVisibility", "sqs:GetQueueAttributes",
		"sqs:StartMessageMoveTask",
	}, b.dlqArns()...)
	b.allow(fn, []string{"secretsmanager:GetSecretValue"}, b.jwtSecret.SecretArn())
	// Pause/resume a tier (disable/enable its mapping); the paused flag
	// itself is read from the table.
	var esms []*string
	for _, q := range b.def.Queues {
		esms = append(esms, b.esms[q.Tier].EventSourceMappingArn())
	}
	b.allow(fn, []string{"lambda:UpdateEventSourceMapping"}, esms...)
}
