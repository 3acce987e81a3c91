package secretref

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/conveyor/conveyor/internal/config"
)

// CodeOAuthClientNotSet is the job error code, and the reason a job waits,
// while the OAuth client secret holds no usable credentials.
const CodeOAuthClientNotSet = "oauth_client_not_set"

// OAuthClient is the external API's OAuth client credentials, read from a
// Secrets Manager secret when first needed rather than at cold start, so
// that a publisher deployed before an operator filled the secret in starts
// anyway. Until the secret holds both values it is re-read at most once per
// recheck interval; every Get in between answers at once with the last
// *ClientNotSetError. Credentials once read are kept for the life of the
// process. It is safe for concurrent use; concurrent Gets share one read.
type OAuthClient struct {
	read    func(ctx context.Context) (string, error) // the secret string
	arn     string
	recheck time.Duration
	now     func() time.Time

	mu       sync.Mutex
	id, sec  string
	ok       bool
	readAt   time.Time // of the last read; zero before the first
	lastErr  *ClientNotSetError
	inflight chan struct{}
}

// ClientNotSetError says why the OAuth client cannot be used yet; it names
// the secret, never a value. RetryAt is when the secret is read again.
type ClientNotSetError struct {
	// Secret is the secret's ARN.
	Secret string
	// Why is what is wrong with it, in words for an operator.
	Why string
	// RetryAt is the earliest next read.
	RetryAt time.Time
}

func (e *ClientNotSetError) Error() string {
	return fmt.Sprintf("the OAuth client secret is not set: %s (put {\"clientId\":\"…\",\"clientSecret\":\"…\"} in %s)", e.Why, e.Secret)
}

// JobErrorCode is CodeOAuthClientNotSet (see publish's error codes).
func (e *ClientNotSetError) JobErrorCode() string { return CodeOAuthClientNotSet }

// NewOAuthClient reads the credentials from the secret arn with sm (a
// JSON object {"clientId","clientSecret"}), at most once per recheck while
// they are missing; now is the clock (time.Now when nil).
func NewOAuthClient(arn string, sm SecretReader, recheck time.Duration, now func() time.Time) *OAuthClient {
	if now == nil {
		now = time.Now
	}
	return &OAuthClient{
		read: func(ctx context.Context) (string, error) { return readSecret(ctx, sm, arn) },
		arn:  arn, recheck: recheck, now: now,
	}
}

// OAuthClientFor is the OAuth client of cfg for a function that refreshes
// tokens: nil when the configuration carries the values (nothing to read)
// or names no secret; else the secret its ARN names, read with a client
// made from awsCfg when first needed.
func OAuthClientFor(cfg config.Config, awsCfg aws.Config, now func() time.Time) *OAuthClient {
	if cfg.DeviantArtClientSecretARN == "" || (cfg.DeviantArtClientID != "" && cfg.DeviantArtClientSecret != "") {
		return nil
	}
	return NewOAuthClient(cfg.DeviantArtClientSecretARN, secretsmanager.NewFromConfig(awsCfg), cfg.OAuthClientRecheck, now)
}

// Get returns the client id and secret, reading the secret if it is
// time to; while the secret holds no credentials (or cannot be read) it
// returns a *ClientNotSetError. It returns ctx's error if ctx ends while
// it waits for another caller's read.
func (c *OAuthClient) Get(ctx context.Context) (id, secret string, err error) {
	for {
		c.mu.Lock()
		switch {
		case c.ok:
			defer c.mu.Unlock()
			return c.id, c.sec, nil
		case c.inflight != nil:
			wait := c.inflight
			c.mu.Unlock()
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				return "", "", ctx.Err()
			}
		case c.lastErr != nil && c.now().Sub(c.readAt) < c.recheck:
			defer c.mu.Unlock()
			return "", "", c.lastErr
		}
		done := make(chan struct{})
		c.inflight, c.readAt = done, c.now()
		c.mu.Unlock()

		v, rerr := c.read(context.WithoutCancel(ctx))
		id, sec, why := parseClient(v, rerr)

		c.mu.Lock()
		if why == "" {
			c.id, c.sec, c.ok, c.lastErr = id, sec, true, nil
		} else {
			c.lastErr = &ClientNotSetError{Secret: c.arn, Why: why, RetryAt: c.readAt.Add(c.recheck)}
		}
		c.inflight = nil
		close(done)
		c.mu.Unlock()
	}
}

// parseClient reads the secret's value; why says what is wrong with it
// ("" when both values are there), never quoting it.
func parseClient(v string, err error) (id, secret, why string) {
	if err != nil {
		return "", "", "it could not be read: " + err.Error()
	}
	var oc oauthClient
	if json.Unmarshal([]byte(v), &oc) != nil {
		return "", "", `it is not a JSON object {"clientId":"…","clientSecret":"…"}`
	}
	switch {
	case oc.ClientID == "" && oc.ClientSecret == "":
		return "", "", "clientId and clientSecret are empty"
	case oc.ClientID == "":
		return "", "", "clientId is empty (the deployed placeholder)"
	case oc.ClientSecret == "":
		return "", "", "clientSecret is empty"
	}
	return oc.ClientID, oc.ClientSecret, ""
}
