package secretref_test

import (
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/google/go-cmp/cmp"

	"github.com/conveyor/conveyor/internal/aws/secretref"
	"github.com/conveyor/conveyor/internal/config"
	"github.com/conveyor/conveyor/internal/resources"
	"github.com/conveyor/conveyor/localstack/awstest"
)

// TestResolveSecrets reads the secrets a cold start reads, from the
// emulator's Secrets Manager, and checks what a function then refuses.
func TestResolveSecrets(t *testing.T) {
	t.Parallel()
	sm := secretsmanager.NewFromConfig(awstest.Config(t))
	put := func(t *testing.T, value string) string {
		t.Helper()
		out, err := sm.CreateSecret(context.Background(), &secretsmanager.CreateSecretInput{
			Name: aws.String(awstest.Name(t, "secret")), SecretString: aws.String(value)})
		if err != nil {
			t.Fatal(err)
		}
		return aws.ToString(out.ARN)
	}
	type creds struct{ ID, Secret, JWT string }
	tests := []struct {
		name string
		// cfg builds the configuration from the ARNs of the secrets made.
		value        string
		cfg          func(arn string) config.Config
		want         creds
		wantErr      string // in the resolve error
		wantComplete string // in the publisher's Complete error
	}{
		{
			name:  "the OAuth client by ARN",
			value: `{"clientId":"conveyor-prod","clientSecret":"s3cr3t-value"}`,
			cfg:   func(arn string) config.Config { return config.Config{DeviantArtClientSecretARN: arn} },
			want:  creds{ID: "conveyor-prod", Secret: "s3cr3t-value"},
		},
		{
			name:  "values already set win over the ARN (nothing is read)",
			value: `{"clientId":"unused","clientSecret":"unused"}`,
			cfg: func(string) config.Config {
				return config.Config{DeviantArtClientID: "id", DeviantArtClientSecret: "given",
					DeviantArtClientSecretARN: "arn:aws:secretsmanager:us-east-1:123456789012:secret:does-not-exist-AbCdEf"}
			},
			want: creds{ID: "id", Secret: "given"},
		},
		{
			// The publisher starts: jobs wait for the secret (OAuthClient).
			name:  "the stack's placeholder: no client id yet",
			value: `{"clientId":"","clientSecret":"generated-placeholder"}`,
			cfg:   func(arn string) config.Config { return config.Config{DeviantArtClientSecretARN: arn} },
			want:  creds{Secret: "generated-placeholder"},
		},
		{
			name:    "not JSON",
			value:   `s3cr3t-not-json`,
			cfg:     func(arn string) config.Config { return config.Config{DeviantArtClientSecretARN: arn} },
			wantErr: `is not a JSON object {"clientId":"…","clientSecret":"…"}`,
		},
		{
			name: "no such secret",
			cfg: func(string) config.Config {
				return config.Config{DeviantArtClientSecretARN: "arn:aws:secretsmanager:us-east-1:123456789012:secret:missing-AbCdEf"}
			},
			wantErr: "reading secret arn:aws:secretsmanager:us-east-1:123456789012:secret:missing-AbCdEf",
		},
		{
			name:  "the JWT key by ARN, as before",
			value: "jwt-key",
			cfg:   func(arn string) config.Config { return config.Config{JWTSecretARN: arn} },
			want:  creds{JWT: "jwt-key"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			arn := ""
			if tt.value != "" {
				arn = put(t, tt.value)
			}
			cfg := tt.cfg(arn)
			err := secretref.Resolve(context.Background(), &cfg, sm)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tt.wantErr)
				}
				if strings.Contains(err.Error(), "s3cr3t") {
					t.Errorf("error %q carries the secret's value", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := creds{ID: cfg.DeviantArtClientID, Secret: cfg.DeviantArtClientSecret, JWT: string(cfg.JWTSecret)}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("resolved (-want +got):\n%s", diff)
			}
			err = cfg.Complete(resources.FuncPublisher)
			switch {
			case tt.wantComplete == "" && err != nil && cfg.DeviantArtClientSecretARN != "":
				t.Errorf("Complete = %v, want nil", err)
			case tt.wantComplete != "" && (err == nil || !strings.Contains(err.Error(), tt.wantComplete)):
				t.Errorf("Complete = %v, want one containing %q", err, tt.wantComplete)
			case err != nil && strings.Contains(err.Error(), "placeholder"):
				t.Errorf("Complete = %q carries the secret's value", err)
			}
		})
	}
}
