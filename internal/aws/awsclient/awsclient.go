// Package awsclient is how the local runtime, tools and tests talk to AWS:
// the SDK configuration they load or point at the emulators (Load,
// ForEndpoint), every service client at once (New), and the counting
// middleware the benchmark reads requests and capacity from (Counter,
// count.go; TxPricer, txunits.go). A deployed function reads its
// configuration from its environment through internal/aws/awsenv instead, so
// that no function links the SDK's shared-configuration loader (STS, SSO)
// or a service client it does not call. The only things that differ
// between the emulators and AWS are the SDK's standard endpoint variables
// (AWS_ENDPOINT_URL, and AWS_ENDPOINT_URL_DYNAMODB for DynamoDB Local) and
// the region.
package awsclient

import (
	"context"
	"fmt"
	"os"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go/middleware"

	"github.com/conveyor/conveyor/internal/aws/awsenv"
)

// Load returns the SDK configuration from the environment, standard AWS
// variables only: the SDK itself routes every service to AWS_ENDPOINT_URL
// and DynamoDB to AWS_ENDPOINT_URL_DYNAMODB when they are set. When
// AWS_ENDPOINT_URL points at an emulator and no credentials are configured,
// static dummy credentials are used so that nothing reaches for a profile or
// the instance metadata service.
func Load(ctx context.Context, optFns ...func(*config.LoadOptions) error) (aws.Config, error) {
	opts := []func(*config.LoadOptions) error{}
	if awsenv.Emulated() && os.Getenv("AWS_ACCESS_KEY_ID") == "" && os.Getenv("AWS_PROFILE") == "" {
		opts = append(opts, config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("test", "test", "")))
	}
	opts = append(opts, optFns...)
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return aws.Config{}, fmt.Errorf("loading AWS configuration: %w", err)
	}
	if cfg.Region == "" {
		// Only when nothing named one (AWS_REGION, the profile's region,
		// an option): a profile's region is never overridden.
		cfg.Region = awsenv.DefaultRegion
	}
	return cfg, nil
}

// Endpoints are the emulators a configuration built by ForEndpoint talks to.
type Endpoints struct {
	// Default serves every service without an endpoint of its own (moto),
	// as AWS_ENDPOINT_URL does.
	Default string
	// DynamoDB serves DynamoDB (DynamoDB Local), as AWS_ENDPOINT_URL_DYNAMODB
	// does; empty means Default.
	DynamoDB string
}

// ForEndpoint returns a configuration that talks to the emulators at ep with
// dummy credentials, whatever the process environment says. DynamoDB's own
// endpoint travels in the configuration's sources, where the SDK looks for
// per-service endpoints, so every DynamoDB client made from it (by New or by
// dynamodb.NewFromConfig) uses it. Requests AWS refuses for their size
// and the emulators take (a PutEvents over 256 KiB) are refused before
// they are sent, with AWS's error (limits.go).
func ForEndpoint(ep Endpoints, region string) aws.Config {
	if region == "" {
		region = awsenv.DefaultRegion
	}
	cfg := aws.Config{
		Region:           region,
		Credentials:      credentials.NewStaticCredentialsProvider("test", "test", ""),
		BaseEndpoint:     aws.String(ep.Default),
		RetryMaxAttempts: 3,
		// The emulators take what AWS refuses; these requests are refused
		// here as AWS refuses them.
		APIOptions: []func(*middleware.Stack) error{awsLimits},
	}
	if ep.DynamoDB != "" {
		cfg.ConfigSources = []any{awsenv.ServiceEndpoints{awsenv.DynamoDBServiceID: ep.DynamoDB}}
	}
	return cfg
}

// Clients holds one client per service, created once per cold start. S3 is
// not among them: the upload bucket is internal/aws/bucket's, and a tool
// that needs another S3 call makes its own client from Config.
type Clients struct {
	// Config is the configuration the clients were made from.
	Config      aws.Config
	DynamoDB    *dynamodb.Client
	SQS         *sqs.Client
	KMS         *kms.Client
	EventBridge *eventbridge.Client
	Lambda      *lambda.Client
	Scheduler   *scheduler.Client
}

// New creates every service client from cfg. DynamoDB uses the endpoint
// ForEndpoint gave it even when the process environment sets
// AWS_ENDPOINT_URL alone (the SDK then skips per-service sources).
func New(cfg aws.Config) Clients {
	return Clients{
		Config:      cfg,
		DynamoDB:    dynamodb.NewFromConfig(cfg, withDynamoDBEndpoint(cfg)),
		SQS:         sqs.NewFromConfig(cfg),
		KMS:         kms.NewFromConfig(cfg),
		EventBridge: eventbridge.NewFromConfig(cfg),
		Lambda:      lambda.NewFromConfig(cfg),
		Scheduler:   scheduler.NewFromConfig(cfg),
	}
}

// Streams returns a DynamoDB Streams client for cfg. Streams are served
// where DynamoDB is: ForEndpoint's DynamoDB endpoint (DynamoDB Local), else
// AWS_ENDPOINT_URL_DYNAMODB_STREAMS or the default endpoint as the SDK
// resolves them. Only the local runtime reads streams (in AWS the event
// source mapping does).
func Streams(cfg aws.Config) *dynamodbstreams.Client {
	return dynamodbstreams.NewFromConfig(cfg, func(o *dynamodbstreams.Options) {
		if ep, ok := awsenv.DynamoDBEndpoint(cfg); ok {
			o.BaseEndpoint = aws.String(ep)
		}
	})
}

// withDynamoDBEndpoint applies ForEndpoint's DynamoDB endpoint, if any, as
// the client's base endpoint.
func withDynamoDBEndpoint(cfg aws.Config) func(*dynamodb.Options) {
	return func(o *dynamodb.Options) {
		if ep, ok := awsenv.DynamoDBEndpoint(cfg); ok {
			o.BaseEndpoint = aws.String(ep)
			// DynamoDB Local runs every transaction of a table under one
			// table lock and answers a request that waited too long for it
			// with a 500 ("This request will succeed in actual DynamoDB
			// API"); on a loaded machine that wait is seconds. More
			// attempts for the emulator only: AWS locks items, not tables.
			o.RetryMaxAttempts = max(o.RetryMaxAttempts, DynamoDBLocalAttempts)
		}
	}
}

// DynamoDBLocalAttempts is the most attempts a request to an emulated
// DynamoDB endpoint makes (the SDK's retryer, exponential backoff).
const DynamoDBLocalAttempts = 8
