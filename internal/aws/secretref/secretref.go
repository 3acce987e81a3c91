// Package secretref reads the secrets a function's configuration names by
// Secrets Manager ARN instead of carrying them (the JWT key, the OAuth
// client). Only the functions that need a secret import it, so only they
// link the Secrets Manager client.
package secretref

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/conveyor/conveyor/internal/config"
)

// SecretReader is the part of the Secrets Manager client Resolve uses.
type SecretReader interface {
	GetSecretValue(ctx context.Context, in *secretsmanager.GetSecretValueInput, optFns ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error)
}

// oauthClient is the value of the OAuth client secret.
type oauthClient struct {
	ClientID     string `json:"clientId"`
	ClientSecret string `json:"clientSecret"`
}

// Resolve reads from Secrets Manager the secrets the configuration
// names by ARN instead of carrying them: the JWT key (the secret string
// is the key) and the OAuth client credentials (a JSON
// object {"clientId","clientSecret"}). A value already set wins over its
// ARN. Errors name the secret, never its value.
func Resolve(ctx context.Context, cfg *config.Config, sm SecretReader) error {
	return resolve(ctx, cfg, sm, true)
}

// ExceptJWT resolves, with a Secrets Manager client made from awsCfg, what
// a function that verifies tokens reads at cold start: every secret but
// the JWT key, which their wiring reads in the
// background with JWTKey, so their cold start does not wait for it.
func ExceptJWT(ctx context.Context, cfg *config.Config, awsCfg aws.Config) error {
	if cfg.DeviantArtClientSecretARN == "" {
		return nil // nothing to read: no client made
	}
	return resolve(ctx, cfg, secretsmanager.NewFromConfig(awsCfg), false)
}

// readSecret returns the secret string of arn; its error names the
// secret, never a value.
func readSecret(ctx context.Context, sm SecretReader, arn string) (string, error) {
	out, err := sm.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String(arn)})
	if err != nil {
		return "", fmt.Errorf("reading secret %s: %w", arn, err)
	}
	return aws.ToString(out.SecretString), nil
}

func resolve(ctx context.Context, cfg *config.Config, sm SecretReader, jwt bool) error {
	read := func(arn string) (string, error) { return readSecret(ctx, sm, arn) }
	if jwt && cfg.JWTSecretARN != "" && len(cfg.JWTSecret) == 0 {
		v, err := read(cfg.JWTSecretARN)
		if err != nil {
			return err
		}
		cfg.JWTSecret = []byte(v)
	}
	if arn := cfg.DeviantArtClientSecretARN; arn != "" && (cfg.DeviantArtClientID == "" || cfg.DeviantArtClientSecret == "") {
		v, err := read(arn)
		if err != nil {
			return err
		}
		var c oauthClient
		if err := json.Unmarshal([]byte(v), &c); err != nil {
			// The decoder's message may quote the value: leave it out.
			return fmt.Errorf(`secret %s is not a JSON object {"clientId":"…","clientSecret":"…"}`, arn)
		}
		cfg.DeviantArtClientID, cfg.DeviantArtClientSecret = c.ClientID, c.ClientSecret
	}
	return nil
}
