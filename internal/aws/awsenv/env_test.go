package awsenv

import (
	"context"
	"testing"
)

// TestLambdaReadsWhatLambdaSets: region, the role's session credentials and
// the endpoint variables; without credentials only an emulator is allowed.
func TestLambdaReadsWhatLambdaSets(t *testing.T) {
	t.Setenv("AWS_REGION", "eu-west-3")
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "secret")
	t.Setenv("AWS_SESSION_TOKEN", "session")
	t.Setenv("AWS_ENDPOINT_URL", "")
	t.Setenv("AWS_ENDPOINT_URL_DYNAMODB", "http://127.0.0.1:1")
	cfg, err := LambdaEnv()
	if err != nil {
		t.Fatal(err)
	}
	creds, err := cfg.Credentials.Retrieve(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Region != "eu-west-3" || creds.AccessKeyID != "AKIDEXAMPLE" || creds.SessionToken != "session" || cfg.BaseEndpoint != nil {
		t.Errorf("config = region %q, creds %+v, base endpoint %v", cfg.Region, creds, cfg.BaseEndpoint)
	}
	if ep, ok := DynamoDBEndpoint(cfg); !ok || ep != "http://127.0.0.1:1" {
		t.Errorf("DynamoDB endpoint %q %v, want AWS_ENDPOINT_URL_DYNAMODB", ep, ok)
	}
	if PathStyle(cfg) {
		t.Error("path-style S3 without an endpoint of our own")
	}
	t.Setenv("AWS_ACCESS_KEY_ID", "")
	if _, err := LambdaEnv(); err == nil {
		t.Error("no credentials and no emulator: want an error")
	}
	t.Setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:2")
	cfg, err = LambdaEnv()
	if err != nil {
		t.Fatal(err)
	}
	if creds, _ := cfg.Credentials.Retrieve(context.Background()); creds.AccessKeyID != "test" || !PathStyle(cfg) {
		t.Errorf("emulated: creds %+v, path style %v; want the dummy keys and path-style S3", creds, PathStyle(cfg))
	}
}
