package secretref_test

import (
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/conveyor/conveyor/internal/aws/secretref"
	"github.com/conveyor/conveyor/internal/config"
	"github.com/conveyor/conveyor/localstack/awstest"
)

// TestJWTKeyFromSecretsManager reads the key in the background from the
// emulator's Secrets Manager; a secret that does not exist is an error
// naming it, for every Get (never a key).
func TestJWTKeyFromSecretsManager(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sm := secretsmanager.NewFromConfig(awstest.Config(t))
	out, err := sm.CreateSecret(ctx, &secretsmanager.CreateSecretInput{
		Name: aws.String(awstest.Name(t, "jwt")), SecretString: aws.String("a-jwt-key-of-32-bytes-or-more-xx")})
	if err != nil {
		t.Fatal(err)
	}
	k := secretref.JWTKeyFrom(aws.ToString(out.ARN), sm)
	if v, err := k.Get(ctx); err != nil || string(v) != "a-jwt-key-of-32-bytes-or-more-xx" {
		t.Errorf("Get: %q, %v", v, err)
	}

	prefix, _, _ := strings.Cut(aws.ToString(out.ARN), ":secret:")
	missing := prefix + ":secret:never-created-AbCdEf"
	k = secretref.JWTKeyFrom(missing, sm)
	for i := range 2 {
		v, err := k.Get(ctx)
		if err == nil || v != nil || !strings.Contains(err.Error(), missing) {
			t.Errorf("Get %d of a missing secret: %q, %v; want an error naming %s", i, v, err, missing)
		}
	}

	// A key carried by the configuration is used as it is: nothing read.
	if v, err := secretref.JWTKey(config.Config{JWTSecret: []byte("carried"), JWTSecretARN: missing}, aws.Config{}).Get(ctx); err != nil || string(v) != "carried" {
		t.Errorf("carried key: %q, %v", v, err)
	}
}
