package emulator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	kmstypes "github.com/aws/aws-sdk-go-v2/service/kms/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	schedtypes "github.com/aws/aws-sdk-go-v2/service/scheduler/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/conveyor/conveyor/internal/aws/awsclient"
	"github.com/conveyor/conveyor/internal/aws/awsenv"
	"github.com/conveyor/conveyor/internal/config"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/resources"
)

// Provisioned names what was provisioned: the URLs and ids the functions need.
type Provisioned struct {
	Definition resources.Definition
	// QueueURLs and DLQURLs by tier.
	QueueURLs map[job.Tier]string
	DLQURLs   map[job.Tier]string
	// DLQARNs by tier (the redrive target).
	DLQARNs map[job.Tier]string
	// KMSKeyID is the key behind the definition's alias.
	KMSKeyID string
	// EventBusARN is the environment's bus.
	EventBusARN string
	// TableStreamARN is the table's stream, which feeds the relay.
	TableStreamARN string
	// RelayFailureQueueURL and RelayFailureQueueARN are the event stream
	// mapping's on-failure destination.
	RelayFailureQueueURL, RelayFailureQueueARN string
	// EventArchiveARN is the bus's archive.
	EventArchiveARN string
	// NotificationQueueURL is the local bridge for the bucket's ObjectCreated
	// notification: moto cannot invoke a Lambda, so S3 sends the event to
	// this standard queue and the local runtime hands it to the confirm
	// handler exactly as Lambda would.
	NotificationQueueURL string
}

// Provision creates every resource of def on the emulators through c,
// idempotently: running it twice changes nothing, and a second run
// converges attributes that drifted. It is the offline twin of the CDK
// stacks, reading the same definition.
func Provision(ctx context.Context, c awsclient.Clients, def resources.Definition) (Provisioned, error) {
	r := Provisioned{
		Definition: def,
		QueueURLs:  map[job.Tier]string{},
		DLQURLs:    map[job.Tier]string{},
		DLQARNs:    map[job.Tier]string{},
	}
	for _, q := range def.Queues {
		if err := queue(ctx, c.SQS, q, &r); err != nil {
			return r, fmt.Errorf("provisioning queue %s: %w", q.Name, err)
		}
	}
	var err error
	if r.TableStreamARN, err = table(ctx, c.DynamoDB, def.Table); err != nil {
		return r, fmt.Errorf("provisioning table %s: %w", def.Table.Name, err)
	}
	if r.RelayFailureQueueURL, r.RelayFailureQueueARN, err = ensureQueue(ctx, c.SQS, def.EventStream.FailureQueueName, map[string]string{
		"MessageRetentionPeriod": secs(def.EventStream.FailureRetention),
	}); err != nil {
		return r, fmt.Errorf("provisioning queue %s: %w", def.EventStream.FailureQueueName, err)
	}
	if r.NotificationQueueURL, err = bucket(ctx, S3(c.Config), c.SQS, def); err != nil {
		return r, fmt.Errorf("provisioning bucket %s: %w", def.Bucket.Name, err)
	}
	if r.KMSKeyID, err = key(ctx, c.KMS, def.KMSAlias); err != nil {
		return r, fmt.Errorf("provisioning KMS key %s: %w", def.KMSAlias, err)
	}
	if r.EventBusARN, err = bus(ctx, c.EventBridge, def.EventBus); err != nil {
		return r, fmt.Errorf("provisioning event bus %s: %w", def.EventBus, err)
	}
	if r.EventArchiveARN, err = archive(ctx, c.EventBridge, r.EventBusARN, def); err != nil {
		return r, fmt.Errorf("provisioning event archive %s: %w", def.EventArchive.Name, err)
	}
	if err := scheduleGroup(ctx, c.Scheduler, def.ScheduleGroup); err != nil {
		return r, fmt.Errorf("provisioning schedule group %s: %w", def.ScheduleGroup, err)
	}
	slog.DebugContext(ctx, "provisioned", "env", def.Env, "prefix", def.Prefix)
	return r, nil
}

func secs(d time.Duration) string { return strconv.Itoa(int(d.Seconds())) }

// ensureQueue creates the queue or, when it exists, sets its attributes to
// the wanted ones (CreateQueue refuses differing attributes on AWS).
func ensureQueue(ctx context.Context, client *sqs.Client, name string, attrs map[string]string) (url, arn string, err error) {
	got, err := client.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(name)})
	var missing *sqstypes.QueueDoesNotExist
	switch {
	case errors.As(err, &missing):
		out, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: attrs})
		if err != nil {
			return "", "", err
		}
		url = aws.ToString(out.QueueUrl)
	case err != nil:
		return "", "", err
	default:
		url = aws.ToString(got.QueueUrl)
		set := map[string]string{}
		for k, v := range attrs {
			if k != string(sqstypes.QueueAttributeNameFifoQueue) {
				set[k] = v
			}
		}
		if _, err := client.SetQueueAttributes(ctx, &sqs.SetQueueAttributesInput{QueueUrl: aws.String(url), Attributes: set}); err != nil {
			return "", "", err
		}
	}
	a, err := client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl: aws.String(url), AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn},
	})
	if err != nil {
		return "", "", err
	}
	return url, a.Attributes[string(sqstypes.QueueAttributeNameQueueArn)], nil
}

func queue(ctx context.Context, client *sqs.Client, q resources.Queue, r *Provisioned) error {
	dlqURL, dlqARN, err := ensureQueue(ctx, client, q.DLQName, map[string]string{
		"FifoQueue":                 "true",
		"ContentBasedDeduplication": "false",
		"MessageRetentionPeriod":    secs(q.DLQRetention),
		"VisibilityTimeout":         secs(q.VisibilityTimeout),
	})
	if err != nil {
		return fmt.Errorf("dead-letter queue: %w", err)
	}
	redrive, _ := json.Marshal(map[string]any{"deadLetterTargetArn": dlqARN, "maxReceiveCount": q.MaxReceiveCount})
	attrs := map[string]string{
		"FifoQueue":                 "true",
		"ContentBasedDeduplication": "false",
		"MessageRetentionPeriod":    secs(q.Retention),
		"VisibilityTimeout":         secs(q.VisibilityTimeout),
		"RedrivePolicy":             string(redrive),
	}
	if q.DeduplicationScope != "" {
		attrs["DeduplicationScope"] = q.DeduplicationScope
	}
	if q.FifoThroughputLimit != "" {
		attrs["FifoThroughputLimit"] = q.FifoThroughputLimit
	}
	url, arn, err := ensureQueue(ctx, client, q.Name, attrs)
	if err != nil {
		return err
	}
	// Only this tier's queue may use the DLQ as its dead-letter queue.
	if _, err := client.SetQueueAttributes(ctx, &sqs.SetQueueAttributesInput{QueueUrl: aws.String(dlqURL),
		Attributes: map[string]string{"RedriveAllowPolicy": resources.RedriveAllowPolicy(arn)}}); err != nil {
		return fmt.Errorf("dead-letter queue's redrive-allow policy: %w", err)
	}
	r.QueueURLs[q.Tier], r.DLQURLs[q.Tier], r.DLQARNs[q.Tier] = url, dlqURL, dlqARN
	return nil
}

func attrType(t resources.KeyType) ddbtypes.ScalarAttributeType {
	if t == resources.Number {
		return ddbtypes.ScalarAttributeTypeN
	}
	return ddbtypes.ScalarAttributeTypeS
}

func keySchema(pk, sk resources.Key) []ddbtypes.KeySchemaElement {
	ks := []ddbtypes.KeySchemaElement{{AttributeName: aws.String(pk.Name), KeyType: ddbtypes.KeyTypeHash}}
	if sk.Name != "" {
		ks = append(ks, ddbtypes.KeySchemaElement{AttributeName: aws.String(sk.Name), KeyType: ddbtypes.KeyTypeRange})
	}
	return ks
}

func attributeDefinitions(t resources.Table) []ddbtypes.AttributeDefinition {
	seen := map[string]bool{}
	var defs []ddbtypes.AttributeDefinition
	add := func(k resources.Key) {
		if k.Name == "" || seen[k.Name] {
			return
		}
		seen[k.Name] = true
		defs = append(defs, ddbtypes.AttributeDefinition{AttributeName: aws.String(k.Name), AttributeType: attrType(k.Type)})
	}
	add(t.PartitionKey)
	add(t.SortKey)
	for _, ix := range t.Indexes {
		add(ix.PartitionKey)
		add(ix.SortKey)
	}
	return defs
}

func gsi(ix resources.Index) ddbtypes.GlobalSecondaryIndex {
	p := &ddbtypes.Projection{ProjectionType: ddbtypes.ProjectionType(ix.Projection())}
	if len(ix.Include) > 0 {
		p.NonKeyAttributes = ix.Include
	}
	return ddbtypes.GlobalSecondaryIndex{
		IndexName:  aws.String(ix.Name),
		KeySchema:  keySchema(ix.PartitionKey, ix.SortKey),
		Projection: p,
	}
}

// table creates or converges the table and returns its stream's ARN.
func table(ctx context.Context, client *dynamodb.Client, t resources.Table) (string, error) {
	if err := ensureTable(ctx, client, t); err != nil {
		return "", err
	}
	desc, err := client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(t.Name)})
	if err != nil {
		return "", err
	}
	spec := desc.Table.StreamSpecification
	if t.StreamView != "" && (spec == nil || !aws.ToBool(spec.StreamEnabled) || string(spec.StreamViewType) != t.StreamView) {
		if spec != nil && aws.ToBool(spec.StreamEnabled) {
			// A stream's view type cannot change in place: disable it first.
			if _, err := client.UpdateTable(ctx, &dynamodb.UpdateTableInput{TableName: aws.String(t.Name),
				StreamSpecification: &ddbtypes.StreamSpecification{StreamEnabled: aws.Bool(false)}}); err != nil {
				return "", fmt.Errorf("disabling the stream: %w", err)
			}
		}
		out, err := client.UpdateTable(ctx, &dynamodb.UpdateTableInput{TableName: aws.String(t.Name), StreamSpecification: streamSpec(t)})
		if err != nil {
			return "", fmt.Errorf("enabling the stream: %w", err)
		}
		return aws.ToString(out.TableDescription.LatestStreamArn), nil
	}
	return aws.ToString(desc.Table.LatestStreamArn), nil
}

// streamSpec is the table's stream, from the definition.
func streamSpec(t resources.Table) *ddbtypes.StreamSpecification {
	if t.StreamView == "" {
		return nil
	}
	return &ddbtypes.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: ddbtypes.StreamViewType(t.StreamView)}
}

// ensureTable brings table t to its definition: created if missing, else
// its missing indexes added and its retired ones dropped; then, the table
// existing, its TTL enabled on the definition's attribute.
func ensureTable(ctx context.Context, client *dynamodb.Client, t resources.Table) error {
	desc, err := client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(t.Name)})
	var missing *ddbtypes.ResourceNotFoundException
	switch {
	case errors.As(err, &missing):
		err = createTable(ctx, client, t)
	case err == nil:
		err = updateIndexes(ctx, client, t, desc.Table)
	}
	if err != nil {
		return err
	}
	if err := dynamodb.NewTableExistsWaiter(client).Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(t.Name)}, 2*time.Minute); err != nil {
		return err
	}
	return ensureTTL(ctx, client, t)
}

// createTable creates table t with its indexes and stream, on demand; a
// table another provisioner created meanwhile is no error.
func createTable(ctx context.Context, client *dynamodb.Client, t resources.Table) error {
	var gsis []ddbtypes.GlobalSecondaryIndex
	for _, ix := range t.Indexes {
		gsis = append(gsis, gsi(ix))
	}
	_, err := client.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:                 aws.String(t.Name),
		KeySchema:                 keySchema(t.PartitionKey, t.SortKey),
		AttributeDefinitions:      attributeDefinitions(t),
		GlobalSecondaryIndexes:    gsis,
		BillingMode:               ddbtypes.BillingModePayPerRequest,
		DeletionProtectionEnabled: aws.Bool(t.DeletionProtection),
		StreamSpecification:       streamSpec(t),
	})
	var inUse *ddbtypes.ResourceInUseException
	if err != nil && !errors.As(err, &inUse) {
		return err
	}
	return nil
}

// updateIndexes adds to the existing table (as described) each index of
// definition t it lacks, then drops the indexes the definition retired.
func updateIndexes(ctx context.Context, client *dynamodb.Client, t resources.Table, table *ddbtypes.TableDescription) error {
	have := map[string]bool{}
	for _, g := range table.GlobalSecondaryIndexes {
		have[aws.ToString(g.IndexName)] = true
	}
	if err := addIndexes(ctx, client, t, have); err != nil {
		return err
	}
	return dropRetiredIndexes(ctx, client, t, have)
}

// addIndexes adds each index of t not in have, waiting after each until
// the table's indexes are idle.
func addIndexes(ctx context.Context, client *dynamodb.Client, t resources.Table, have map[string]bool) error {
	for _, ix := range t.Indexes {
		if have[ix.Name] {
			continue
		}
		g := gsi(ix)
		if _, err := client.UpdateTable(ctx, &dynamodb.UpdateTableInput{
			TableName:            aws.String(t.Name),
			AttributeDefinitions: attributeDefinitions(t),
			GlobalSecondaryIndexUpdates: []ddbtypes.GlobalSecondaryIndexUpdate{{Create: &ddbtypes.CreateGlobalSecondaryIndexAction{
				IndexName: g.IndexName, KeySchema: g.KeySchema, Projection: g.Projection,
			}}},
		}); err != nil {
			return fmt.Errorf("adding index %s: %w", ix.Name, err)
		}
		// DynamoDB builds one index of a table at a time.
		if err := indexesIdle(ctx, client, t.Name); err != nil {
			return err
		}
	}
	return nil
}

// dropRetiredIndexes is the migration's last step (docs/migrations.md):
// the indexes the definition retired (in have, no longer in t) go once
// their replacements are active and filled, since the readers use only
// those.
func dropRetiredIndexes(ctx context.Context, client *dynamodb.Client, t resources.Table, have map[string]bool) error {
	for _, ix := range resources.RetiredIndexes {
		if !have[ix.Name] || slices.ContainsFunc(t.Indexes, func(d resources.Index) bool { return d.Name == ix.Name }) {
			continue
		}
		if _, err := client.UpdateTable(ctx, &dynamodb.UpdateTableInput{
			TableName:                   aws.String(t.Name),
			GlobalSecondaryIndexUpdates: []ddbtypes.GlobalSecondaryIndexUpdate{{Delete: &ddbtypes.DeleteGlobalSecondaryIndexAction{IndexName: aws.String(ix.Name)}}},
		}); err != nil {
			return fmt.Errorf("dropping the retired index %s: %w", ix.Name, err)
		}
		if err := indexesIdle(ctx, client, t.Name); err != nil {
			return err
		}
	}
	return nil
}

// ensureTTL enables the table's TTL on the definition's attribute unless
// it is enabled on it already.
func ensureTTL(ctx context.Context, client *dynamodb.Client, t resources.Table) error {
	ttl, err := client.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(t.Name)})
	if err != nil {
		return err
	}
	if d := ttl.TimeToLiveDescription; d == nil || d.TimeToLiveStatus != ddbtypes.TimeToLiveStatusEnabled || aws.ToString(d.AttributeName) != t.TTLAttribute {
		if _, err := client.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
			TableName:               aws.String(t.Name),
			TimeToLiveSpecification: &ddbtypes.TimeToLiveSpecification{AttributeName: aws.String(t.TTLAttribute), Enabled: aws.Bool(true)},
		}); err != nil {
			return fmt.Errorf("enabling TTL: %w", err)
		}
	}
	return nil
}

// indexesIdle waits until no index of the table is being created, updated
// or deleted: the next index change may start then.
func indexesIdle(ctx context.Context, client *dynamodb.Client, table string) error {
	for {
		desc, err := client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
		if err != nil {
			return err
		}
		idle := true
		for _, g := range desc.Table.GlobalSecondaryIndexes {
			idle = idle && g.IndexStatus == ddbtypes.IndexStatusActive
		}
		if idle {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for the table's index changes: %w", ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// S3 is an S3 client of cfg for provisioning and inspecting buckets,
// addressing them by path when cfg names an endpoint (the emulator needs
// it). The product reaches its bucket through internal/aws/bucket.
func S3(cfg aws.Config) *s3.Client {
	return s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = awsenv.PathStyle(cfg) })
}

func bucket(ctx context.Context, client *s3.Client, sqsClient *sqs.Client, def resources.Definition) (string, error) {
	b := def.Bucket
	if _, err := client.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(b.Name)}); err != nil {
		in := &s3.CreateBucketInput{Bucket: aws.String(b.Name)}
		if region := client.Options().Region; region != "us-east-1" {
			in.CreateBucketConfiguration = &s3types.CreateBucketConfiguration{LocationConstraint: s3types.BucketLocationConstraint(region)}
		}
		_, err := client.CreateBucket(ctx, in)
		var owned *s3types.BucketAlreadyOwnedByYou
		if err != nil && !errors.As(err, &owned) {
			return "", err
		}
	}
	if _, err := client.PutPublicAccessBlock(ctx, &s3.PutPublicAccessBlockInput{
		Bucket: aws.String(b.Name),
		PublicAccessBlockConfiguration: &s3types.PublicAccessBlockConfiguration{
			BlockPublicAcls: aws.Bool(true), BlockPublicPolicy: aws.Bool(true),
			IgnorePublicAcls: aws.Bool(true), RestrictPublicBuckets: aws.Bool(true),
		},
	}); err != nil {
		return "", fmt.Errorf("blocking public access: %w", err)
	}
	if _, err := client.PutBucketCors(ctx, &s3.PutBucketCorsInput{
		Bucket: aws.String(b.Name),
		CORSConfiguration: &s3types.CORSConfiguration{CORSRules: []s3types.CORSRule{{
			AllowedMethods: []string{"PUT"},
			AllowedOrigins: b.CORSOrigins,
			AllowedHeaders: []string{"Content-Type", "Content-Length", "Content-Disposition"},
			MaxAgeSeconds:  aws.Int32(3000),
		}}},
	}); err != nil {
		return "", fmt.Errorf("setting CORS: %w", err)
	}
	// The same lifecycle as the CDK stack (the emulator stores it; it does
	// not act on it).
	if _, err := client.PutBucketLifecycleConfiguration(ctx, &s3.PutBucketLifecycleConfigurationInput{
		Bucket: aws.String(b.Name),
		LifecycleConfiguration: &s3types.BucketLifecycleConfiguration{Rules: []s3types.LifecycleRule{{
			ID:         aws.String("expire-uploads-after-horizon"),
			Status:     s3types.ExpirationStatusEnabled,
			Filter:     &s3types.LifecycleRuleFilter{Prefix: aws.String(b.UploadPrefix)},
			Expiration: &s3types.LifecycleExpiration{Days: aws.Int32(int32(b.UploadObjectExpiry / (24 * time.Hour)))},
		}, {
			ID:                             aws.String("abort-incomplete-multipart-uploads"),
			Status:                         s3types.ExpirationStatusEnabled,
			Filter:                         &s3types.LifecycleRuleFilter{Prefix: aws.String("")},
			AbortIncompleteMultipartUpload: &s3types.AbortIncompleteMultipartUpload{DaysAfterInitiation: aws.Int32(1)},
		}}},
	}); err != nil {
		return "", fmt.Errorf("setting the lifecycle: %w", err)
	}
	// The local bridge for the ObjectCreated notification (see Provisioned).
	url, arn, err := ensureQueue(ctx, sqsClient, def.Prefix+"-s3-events", map[string]string{"VisibilityTimeout": "60"})
	if err != nil {
		return "", fmt.Errorf("notification bridge queue: %w", err)
	}
	if _, err := client.PutBucketNotificationConfiguration(ctx, &s3.PutBucketNotificationConfigurationInput{
		Bucket: aws.String(b.Name),
		NotificationConfiguration: &s3types.NotificationConfiguration{QueueConfigurations: []s3types.QueueConfiguration{{
			Id:       aws.String(b.NotifyFunction),
			QueueArn: aws.String(arn),
			Events:   []s3types.Event{s3types.EventS3ObjectCreated},
			Filter: &s3types.NotificationConfigurationFilter{Key: &s3types.S3KeyFilter{FilterRules: []s3types.FilterRule{{
				Name: s3types.FilterRuleNamePrefix, Value: aws.String(b.UploadPrefix),
			}}}},
		}}},
	}); err != nil {
		return "", fmt.Errorf("setting the ObjectCreated notification: %w", err)
	}
	return url, nil
}

func key(ctx context.Context, client *kms.Client, alias string) (string, error) {
	d, err := client.DescribeKey(ctx, &kms.DescribeKeyInput{KeyId: aws.String(alias)})
	var missing *kmstypes.NotFoundException
	switch {
	case err == nil:
		return aws.ToString(d.KeyMetadata.KeyId), nil
	case !errors.As(err, &missing):
		return "", err
	}
	k, err := client.CreateKey(ctx, &kms.CreateKeyInput{
		Description: aws.String("Conveyor envelope encryption of account tokens (" + alias + ")"),
		KeyUsage:    kmstypes.KeyUsageTypeEncryptDecrypt,
	})
	if err != nil {
		return "", err
	}
	id := aws.ToString(k.KeyMetadata.KeyId)
	if _, err := client.CreateAlias(ctx, &kms.CreateAliasInput{AliasName: aws.String(alias), TargetKeyId: aws.String(id)}); err != nil {
		var exists *kmstypes.AlreadyExistsException
		if !errors.As(err, &exists) {
			return "", err
		}
		// A concurrent run created the alias first: use its key.
		d, err := client.DescribeKey(ctx, &kms.DescribeKeyInput{KeyId: aws.String(alias)})
		if err != nil {
			return "", err
		}
		return aws.ToString(d.KeyMetadata.KeyId), nil
	}
	return id, nil
}

func bus(ctx context.Context, client *eventbridge.Client, name string) (string, error) {
	d, err := client.DescribeEventBus(ctx, &eventbridge.DescribeEventBusInput{Name: aws.String(name)})
	if err == nil {
		return aws.ToString(d.Arn), nil
	}
	var missing *ebtypes.ResourceNotFoundException
	if !errors.As(err, &missing) {
		return "", err
	}
	out, err := client.CreateEventBus(ctx, &eventbridge.CreateEventBusInput{Name: aws.String(name)})
	if err != nil {
		var exists *ebtypes.ResourceAlreadyExistsException
		if errors.As(err, &exists) {
			return bus(ctx, client, name)
		}
		return "", err
	}
	return aws.ToString(out.EventBusArn), nil
}

// archive creates the bus's archive (the same pattern as the CDK stacks:
// the environment's source) and returns its ARN.
func archive(ctx context.Context, client *eventbridge.Client, busARN string, def resources.Definition) (string, error) {
	a := def.EventArchive
	if a.Name == "" {
		return "", nil
	}
	d, err := client.DescribeArchive(ctx, &eventbridge.DescribeArchiveInput{ArchiveName: aws.String(a.Name)})
	if err == nil {
		return aws.ToString(d.ArchiveArn), nil
	}
	var missing *ebtypes.ResourceNotFoundException
	if !errors.As(err, &missing) {
		return "", err
	}
	pattern, _ := json.Marshal(map[string]any{"source": []string{resources.EventSource(def.Env)}})
	out, err := client.CreateArchive(ctx, &eventbridge.CreateArchiveInput{
		ArchiveName: aws.String(a.Name), EventSourceArn: aws.String(busARN), EventPattern: aws.String(string(pattern)),
		RetentionDays: aws.Int32(int32(a.Retention / (24 * time.Hour))),
		Description:   aws.String("Conveyor events of " + string(def.Env) + ", for replay"),
	})
	if err != nil {
		var exists *ebtypes.ResourceAlreadyExistsException
		if errors.As(err, &exists) {
			return archive(ctx, client, busARN, def)
		}
		return "", err
	}
	return aws.ToString(out.ArchiveArn), nil
}

// scheduleGroup creates the EventBridge Scheduler group of the users'
// recurring schedules unless it exists.
func scheduleGroup(ctx context.Context, client *scheduler.Client, name string) error {
	if name == "" {
		return nil
	}
	if _, err := client.GetScheduleGroup(ctx, &scheduler.GetScheduleGroupInput{Name: aws.String(name)}); err == nil {
		return nil
	}
	_, err := client.CreateScheduleGroup(ctx, &scheduler.CreateScheduleGroupInput{Name: aws.String(name)})
	var conflict *schedtypes.ConflictException
	if errors.As(err, &conflict) {
		return nil
	}
	return err
}

// Environ names the provisioned resources in the configuration's
// variables, as the CDK stacks do for each function.
func (res Provisioned) Environ() map[string]string {
	def := res.Definition
	env := map[string]string{
		config.VarEnv:      string(job.Local),
		config.VarTable:    def.Table.Name,
		config.VarBucket:   def.Bucket.Name,
		config.VarKMSKeyID: res.KMSKeyID,
		config.VarEventBus: def.EventBus,
		// The users' schedules live in the emulator's Scheduler; the local
		// runtime fires them at the recovery handler (ScheduleFirer).
		config.VarScheduleGroup:     def.ScheduleGroup,
		config.VarScheduleTargetARN: LocalFunctionARN(def.Prefix + "-" + resources.FuncRecovery),
		config.VarScheduleRoleARN:   "arn:aws:iam::123456789012:role/" + def.Prefix + "-scheduler",
	}
	for t, u := range res.QueueURLs {
		env[config.VarQueueURL(t)] = u
	}
	for t, u := range res.DLQURLs {
		env[config.VarDLQURL(t)] = u
	}
	return env
}

// LocalFunctionARN is the ARN a function named name would have in the
// emulator's account (schedules name their target by it).
func LocalFunctionARN(name string) string {
	return "arn:aws:lambda:us-east-1:123456789012:function:" + name
}
