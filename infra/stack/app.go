package stack

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"
)

// FeatureFlags are the CDK feature flags the stacks are written for; the
// project has no cdk.json, so the app sets them itself.
var FeatureFlags = map[string]interface{}{
	// Server access logs are delivered under a bucket policy, not an ACL
	// (the buckets enforce bucket-owner object ownership).
	"@aws-cdk/aws-s3:serverAccessLogsUseBucketPolicy": true,
	"@aws-cdk/aws-s3:createDefaultLoggingPolicy":      true,
	// One statement per resource set instead of one per grant.
	"@aws-cdk/aws-iam:minimizePolicies": true,
	// Key policies grant within the account and region only.
	"@aws-cdk/aws-kms:aliasNameRef":                        true,
	"@aws-cdk/aws-kms:reduceCrossAccountRegionPolicyScope": true,
	"@aws-cdk/core:checkSecretUsage":                       true,
	"@aws-cdk/core:validateSnapshotRemovalPolicy":          true,
}

// NewApp returns a CDK app with FeatureFlags set (context given on the
// command line still wins) and outdir as its output directory ("" for
// CDK's default: the CLI's, or a temporary directory).
func NewApp(outdir string) awscdk.App {
	props := &awscdk.AppProps{Context: &FeatureFlags}
	if outdir != "" {
		props.Outdir = jsii.String(outdir)
	}
	return awscdk.NewApp(props)
}
