package handler

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/conveyor/conveyor/internal/awsenv"
	"github.com/conveyor/conveyor/internal/config"
	"github.com/conveyor/conveyor/internal/metrics"
	"github.com/conveyor/conveyor/internal/secrets"
	"github.com/conveyor/conveyor/internal/store"
)

// Env is what a function is built from at cold start: its configuration,
// its AWS settings and the process-wide options. Each function's package
// (internal/handler/<name>fn) creates from it only the clients and
// services that function uses, so its binary links nothing else.
type Env struct {
	// Config is the validated configuration (config.FromEnv).
	Config config.Config
	// AWS is the SDK configuration the clients are made from.
	AWS aws.Config
	// Logger defaults to NewLogger.
	Logger *slog.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
	// HTTPClient is used for the external API (default a fresh client).
	HTTPClient *http.Client
	// Metrics receives EMF metric lines (default stdout).
	Metrics io.Writer
}

// Resolver completes a configuration from outside the environment before
// it is checked (secretref.FromAWS reads the secrets named by ARN).
type Resolver func(ctx context.Context, cfg *config.Config, awsCfg aws.Config) error

// Load is what every function's main does at cold start: the AWS settings
// Lambda gives the process (awsenv.Lambda), then FromConfig.
func Load(ctx context.Context, fn string, resolve Resolver) (Env, error) {
	awsCfg, err := awsenv.Lambda()
	if err != nil {
		return Env{}, err
	}
	return FromConfig(ctx, fn, awsCfg, resolve)
}

// FromConfig reads the configuration of the function fn (resources.Func…)
// from the environment, lets resolve complete it (nil: nothing to read),
// and refuses, naming what is wrong, a configuration that is invalid or
// lacks what fn needs. `make invoke -in-process` calls it with the SDK's
// usual configuration.
func FromConfig(ctx context.Context, fn string, awsCfg aws.Config, resolve Resolver) (Env, error) {
	cfg, err := config.FromEnv(fn)
	if err != nil {
		return Env{}, err
	}
	if resolve != nil {
		if err := resolve(ctx, &cfg, awsCfg); err != nil {
			return Env{}, err
		}
	}
	if err := cfg.Complete(fn); err != nil {
		return Env{}, err
	}
	return Env{Config: cfg, AWS: awsCfg}.WithDefaults(), nil
}

// WithDefaults fills the options left empty.
func (e Env) WithDefaults() Env {
	if e.Now == nil {
		e.Now = time.Now
	}
	if e.Logger == nil {
		e.Logger = NewLogger()
	}
	return e
}

// NewLogger returns the JSON logger every function uses.
func NewLogger() *slog.Logger {
	return slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

// Log is the logger with the environment's name on every line.
func (e Env) Log() *slog.Logger { return e.Logger.With("env", e.Config.Env) }

// DynamoDB is a DynamoDB client; it honours the DynamoDB endpoint the
// AWS settings name (DynamoDB Local) even when AWS_ENDPOINT_URL is set.
func (e Env) DynamoDB() *dynamodb.Client {
	return dynamodb.NewFromConfig(e.AWS, func(o *dynamodb.Options) {
		if ep, ok := awsenv.DynamoDBEndpoint(e.AWS); ok {
			o.BaseEndpoint = aws.String(ep)
		}
	})
}

// SQS is an SQS client.
func (e Env) SQS() *sqs.Client { return sqs.NewFromConfig(e.AWS) }

// Sealer seals and opens secrets with the environment's KMS key.
func (e Env) Sealer() *secrets.Sealer {
	return secrets.NewSealer(kms.NewFromConfig(e.AWS), e.Config.KMSKeyID)
}

// Store is the table.
func (e Env) Store(db *dynamodb.Client) *store.Store { return store.New(db, e.Config.Table, e.Now) }

// Emitter writes the function's EMF metrics.
func (e Env) Emitter() *metrics.Emitter {
	return metrics.New(e.Metrics, string(e.Config.Env), e.Now)
}

// QueueURLs indexes the tier queues' URLs by name, as the consumers need
// them to delay a message.
func (e Env) QueueURLs() QueueURLs {
	urls := make([]string, 0, len(e.Config.QueueURLs))
	for _, u := range e.Config.QueueURLs {
		urls = append(urls, u)
	}
	return NewQueueURLs(urls...)
}
