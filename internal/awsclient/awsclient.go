// Package awsclient builds the AWS SDK configuration and service clients the
// same way for Lambda, the local runtime and tests. The only thing that
// differs between the emulator and AWS is AWS_ENDPOINT_URL and the region.
package awsclient

import (
	"context"
	"fmt"
	"os"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// DefaultRegion is used when neither AWS_REGION nor AWS_DEFAULT_REGION is set.
const DefaultRegion = "us-east-1"

// Load returns the SDK configuration from the environment. When
// AWS_ENDPOINT_URL points at an emulator and no credentials are configured,
// static dummy credentials are used so that nothing reaches for a profile or
// the instance metadata service.
func Load(ctx context.Context, optFns ...func(*config.LoadOptions) error) (aws.Config, error) {
	opts := []func(*config.LoadOptions) error{}
	if os.Getenv("AWS_REGION") == "" && os.Getenv("AWS_DEFAULT_REGION") == "" {
		opts = append(opts, config.WithRegion(DefaultRegion))
	}
	if Emulated() && os.Getenv("AWS_ACCESS_KEY_ID") == "" && os.Getenv("AWS_PROFILE") == "" {
		opts = append(opts, config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("test", "test", "")))
	}
	opts = append(opts, optFns...)
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return aws.Config{}, fmt.Errorf("loading AWS configuration: %w", err)
	}
	return cfg, nil
}

// ForEndpoint returns a configuration that talks to the emulator at
// endpoint with dummy credentials, whatever the process environment says.
func ForEndpoint(endpoint, region string) aws.Config {
	if region == "" {
		region = DefaultRegion
	}
	return aws.Config{
		Region:           region,
		Credentials:      credentials.NewStaticCredentialsProvider("test", "test", ""),
		BaseEndpoint:     aws.String(endpoint),
		RetryMaxAttempts: 3,
	}
}

// Emulated reports whether AWS_ENDPOINT_URL redirects the SDK to an emulator.
func Emulated() bool { return os.Getenv("AWS_ENDPOINT_URL") != "" }

// Clients holds one client per service, created once per cold start.
type Clients struct {
	DynamoDB    *dynamodb.Client
	SQS         *sqs.Client
	S3          *s3.Client
	KMS         *kms.Client
	EventBridge *eventbridge.Client
	Lambda      *lambda.Client
}

// New creates every service client from cfg. S3 uses path-style addressing
// when the configuration points at an endpoint (emulators need it).
func New(cfg aws.Config) Clients {
	pathStyle := cfg.BaseEndpoint != nil || Emulated()
	return Clients{
		DynamoDB:    dynamodb.NewFromConfig(cfg),
		SQS:         sqs.NewFromConfig(cfg),
		S3:          s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = pathStyle }),
		KMS:         kms.NewFromConfig(cfg),
		EventBridge: eventbridge.NewFromConfig(cfg),
		Lambda:      lambda.NewFromConfig(cfg),
	}
}
