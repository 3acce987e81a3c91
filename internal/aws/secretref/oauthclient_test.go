package secretref_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/conveyor/conveyor/internal/aws/secretref"
	"github.com/conveyor/conveyor/internal/config"
	"github.com/conveyor/conveyor/localstack/awstest"
)

// countingReader counts GetSecretValue calls on the emulator's client.
type countingReader struct {
	secretref.SecretReader
	mu sync.Mutex
	n  int
}

func (c *countingReader) GetSecretValue(ctx context.Context, in *secretsmanager.GetSecretValueInput, opts ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error) {
	c.mu.Lock()
	c.n++
	c.mu.Unlock()
	return c.SecretReader.GetSecretValue(ctx, in, opts...)
}

func (c *countingReader) reads() int { c.mu.Lock(); defer c.mu.Unlock(); return c.n }

// TestOAuthClientWaitsForTheSecret reads the emulator's secret: nothing at
// construction; the placeholder is "not set" (naming the secret, never its
// value), re-read at most once per recheck however often it is asked; once
// the operator puts the credentials in, the next read after the recheck
// returns them and they are kept without another read.
func TestOAuthClientWaitsForTheSecret(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sm := secretsmanager.NewFromConfig(awstest.Config(t))
	out, err := sm.CreateSecret(ctx, &secretsmanager.CreateSecretInput{Name: aws.String(awstest.Name(t, "oauth")),
		SecretString: aws.String(`{"clientId":"","clientSecret":"placeholder-s3cr3t"}`)})
	if err != nil {
		t.Fatal(err)
	}
	arn := aws.ToString(out.ARN)
	reader := &countingReader{SecretReader: sm}
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	c := secretref.NewOAuthClient(arn, reader, time.Minute, clock)
	if n := reader.reads(); n != 0 {
		t.Fatalf("%d reads at construction, want 0", n)
	}
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			_, _, err := c.Get(ctx)
			var notSet *secretref.ClientNotSetError
			if !errors.As(err, &notSet) || notSet.JobErrorCode() != secretref.CodeOAuthClientNotSet || !notSet.RetryAt.Equal(clock().Add(time.Minute)) {
				t.Errorf("Get of the placeholder: %v", err)
				return
			}
			if msg := err.Error(); !strings.Contains(msg, "clientId is empty") || !strings.Contains(msg, arn) || strings.Contains(msg, "placeholder-s3cr3t") {
				t.Errorf("error %q: want why and the secret's name, never its value", msg)
			}
		})
	}
	wg.Wait()
	advance(59 * time.Second)
	if _, _, err := c.Get(ctx); err == nil {
		t.Fatal("Get within the recheck: no error")
	}
	if n := reader.reads(); n != 1 {
		t.Fatalf("%d reads within the recheck interval, want 1", n)
	}

	if _, err := sm.PutSecretValue(ctx, &secretsmanager.PutSecretValueInput{SecretId: out.ARN,
		SecretString: aws.String(`{"clientId":"conveyor","clientSecret":"real-s3cr3t"}`)}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Get(ctx); err == nil {
		t.Fatal("the new value before the recheck: want the old answer")
	}
	advance(time.Second)
	for range 3 {
		if id, sec, err := c.Get(ctx); err != nil || id != "conveyor" || sec != "real-s3cr3t" {
			t.Fatalf("Get once set: %q %q %v", id, sec, err)
		}
		advance(time.Hour)
	}
	if n := reader.reads(); n != 2 {
		t.Errorf("%d reads, want 2 (the placeholder, then the credentials, kept)", n)
	}

	// What else is "not set": unreadable, not JSON, a half.
	for value, why := range map[string]string{`not json`: "not a JSON object", `{"clientId":"x","clientSecret":""}`: "clientSecret is empty",
		`{}`: "clientId and clientSecret are empty"} {
		o, err := sm.CreateSecret(ctx, &secretsmanager.CreateSecretInput{Name: aws.String(awstest.Name(t, "oauth")), SecretString: aws.String(value)})
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := secretref.NewOAuthClient(aws.ToString(o.ARN), sm, time.Minute, nil).Get(ctx); err == nil || !strings.Contains(err.Error(), why) {
			t.Errorf("%s: %v, want %q", value, err, why)
		}
	}
	missing := strings.Replace(arn, ":secret:", ":secret:never-created-", 1)
	if _, _, err := secretref.NewOAuthClient(missing, sm, time.Minute, nil).Get(ctx); err == nil || !strings.Contains(err.Error(), "could not be read") {
		t.Errorf("a missing secret: %v", err)
	}

	// Values in the configuration: nothing to read.
	if c := secretref.OAuthClientFor(config.Config{DeviantArtClientID: "a", DeviantArtClientSecret: "b", DeviantArtClientSecretARN: arn}, aws.Config{}, nil); c != nil {
		t.Error("OAuthClientFor with the values set: want nil")
	}
}
