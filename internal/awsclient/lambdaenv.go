package awsclient

import (
	"errors"
	"os"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
)

// LambdaEnv returns the SDK configuration of a Lambda function from the
// variables Lambda sets — AWS_REGION and the execution role's
// AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN — and the
// endpoint variables the SDK honours (AWS_ENDPOINT_URL, and
// AWS_ENDPOINT_URL_DYNAMODB for DynamoDB). It does not use the SDK's
// shared-configuration loader (profiles, SSO, STS, the instance metadata
// service): a function never needs them, and leaving them out takes about
// 1.6 MB off every bootstrap and their work off every cold start. With
// AWS_ENDPOINT_URL set and no keys, the emulators' dummy keys are used, as
// Load does. Outside Lambda (no keys, no emulator) it is an error: use Load.
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
		cfg.ConfigSources = []any{serviceEndpoints{dynamoDBServiceID: ep}}
	}
	return cfg, nil
}
