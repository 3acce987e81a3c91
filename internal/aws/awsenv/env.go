// Package awsenv is the AWS environment of a deployed function: the SDK
// configuration Lambda's variables give it (LambdaEnv; the emulators'
// endpoints through the SDK's standard AWS_ENDPOINT_URL variables), and each
// request recorded as the IAM action and resource it is authorised as, per
// function, for `make iam` (Recorder, record.go and access.go). It imports
// no service client and not the SDK's shared-configuration loader, so every
// function's binary links only the clients its wiring makes; the local
// runtime, tools and tests load their configuration through
// internal/aws/awsclient.
package awsenv

import (
	"context"
	"errors"
	"os"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
)

// DefaultRegion is used when neither AWS_REGION nor AWS_DEFAULT_REGION is set.
const DefaultRegion = "us-east-1"

// DynamoDBServiceID is the SDK's service id for DynamoDB (the suffix of
// AWS_ENDPOINT_URL_DYNAMODB, before normalisation).
const DynamoDBServiceID = "DynamoDB"

// LambdaEnv returns the SDK configuration of a Lambda function from the
// variables Lambda sets — AWS_REGION and the execution role's
// AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN — and the
// endpoint variables the SDK honours (AWS_ENDPOINT_URL, and
// AWS_ENDPOINT_URL_DYNAMODB for DynamoDB). It does not use the SDK's
// shared-configuration loader (Load): a function never needs it, and
// leaving it out takes its work (profiles, SSO, the instance metadata
// service) off every cold start. With AWS_ENDPOINT_URL set and no keys,
// the emulators' dummy keys are used. Outside Lambda (no keys, no emulator)
// it is an error.
func LambdaEnv() (aws.Config, error) {
	region := os.Getenv("AWS_REGION")
	if region == "" {
		region = os.Getenv("AWS_DEFAULT_REGION")
	}
	if region == "" {
		region = DefaultRegion
	}
	id, secret, token := os.Getenv("AWS_ACCESS_KEY_ID"), os.Getenv("AWS_SECRET_ACCESS_KEY"), os.Getenv("AWS_SESSION_TOKEN")
	if id == "" || secret == "" {
		if !Emulated() {
			return aws.Config{}, errors.New("no AWS credentials in the environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY): not running under Lambda")
		}
		id, secret, token = "test", "test", ""
	}
	cfg := aws.Config{
		Region:      region,
		Credentials: aws.NewCredentialsCache(credentials.NewStaticCredentialsProvider(id, secret, token)),
	}
	if ep := os.Getenv("AWS_ENDPOINT_URL"); ep != "" {
		cfg.BaseEndpoint = aws.String(ep)
	}
	if ep := os.Getenv("AWS_ENDPOINT_URL_DYNAMODB"); ep != "" {
		cfg.ConfigSources = []any{ServiceEndpoints{DynamoDBServiceID: ep}}
	}
	return cfg, nil
}

// Emulated reports whether AWS_ENDPOINT_URL redirects the SDK to an
// emulator. AWS_ENDPOINT_URL_DYNAMODB alone does not count: it moves one
// service, and the others still need real credentials.
func Emulated() bool { return os.Getenv("AWS_ENDPOINT_URL") != "" }

// PathStyle reports whether S3 clients made from cfg must address buckets
// by path (an endpoint of our own: the emulators need it).
func PathStyle(cfg aws.Config) bool { return cfg.BaseEndpoint != nil || Emulated() }

// ServiceEndpoints maps SDK service ids to base endpoints. It implements
// the SDK's per-service endpoint source (GetServiceBaseEndpoint), the same
// one the environment's AWS_ENDPOINT_URL_<SERVICE> feeds.
type ServiceEndpoints map[string]string

// GetServiceBaseEndpoint returns the endpoint configured for sdkID.
func (s ServiceEndpoints) GetServiceBaseEndpoint(_ context.Context, sdkID string) (string, bool, error) {
	ep, ok := s[sdkID]
	return ep, ok && ep != "", nil
}

// DynamoDBEndpoint is the DynamoDB endpoint cfg's sources name, if any. A
// DynamoDB client must set it as its base endpoint itself: with
// AWS_ENDPOINT_URL set the SDK skips per-service sources.
func DynamoDBEndpoint(cfg aws.Config) (string, bool) {
	for _, src := range cfg.ConfigSources {
		if s, ok := src.(ServiceEndpoints); ok {
			if ep, ok := s[DynamoDBServiceID]; ok && ep != "" {
				return ep, true
			}
		}
	}
	return "", false
}
