//go:build tools

// This file pins modules the project uses before code imports them, so that
// `go mod tidy` keeps the versions known to be served by the module proxy.
package resources

import (
	_ "github.com/aws/aws-cdk-go/awscdk/v2"
	_ "github.com/aws/aws-lambda-go/lambda"
	_ "github.com/aws/aws-sdk-go-v2/config"
	_ "github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	_ "github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	_ "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	_ "github.com/aws/aws-sdk-go-v2/service/eventbridge"
	_ "github.com/aws/aws-sdk-go-v2/service/kms"
	_ "github.com/aws/aws-sdk-go-v2/service/s3"
	_ "github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	_ "github.com/aws/aws-sdk-go-v2/service/sqs"
	_ "github.com/aws/constructs-go/constructs/v10"
	_ "github.com/aws/jsii-runtime-go"
	_ "github.com/cdklabs/cdk-nag-go/cdknag/v2"
	_ "github.com/golang-jwt/jwt/v5"
	_ "github.com/google/go-cmp/cmp"
	_ "go.uber.org/goleak"
)
