package secretref

import (
	"context"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/conveyor/conveyor/internal/config"
)

// DeferredReadTimeoutDefault bounds one background read of a deferred
// secret (the SDK's own retries included). A read that runs out is a
// failure like any other: the next Get starts another.
const DeferredReadTimeoutDefault = 10 * time.Second

// Deferred is a secret read in the background from the moment it is made,
// so that a cold start does not wait for Secrets Manager: the first Get
// waits for the read still in flight (or until its own context ends), a
// successful value is kept for the life of the process, and a failed read
// is never kept: the next Get starts a new one. It is safe for concurrent
// use; concurrent Gets share one read.
type Deferred struct {
	read    func(ctx context.Context) ([]byte, error)
	timeout time.Duration

	mu    sync.Mutex
	value []byte
	ok    bool
	cur   *attempt // the read in flight, or the last one (failed)
}

type attempt struct {
	done     chan struct{}
	finished bool // under Deferred.mu
	value    []byte
	err      error
}

// NewDeferred starts reading with read in the background and returns the
// Deferred that Get answers from. Each read gets a context of its own,
// bounded by DeferredReadTimeoutDefault, not any caller's.
func NewDeferred(read func(ctx context.Context) ([]byte, error)) *Deferred {
	d := &Deferred{read: read, timeout: DeferredReadTimeoutDefault}
	d.mu.Lock()
	d.start()
	d.mu.Unlock()
	return d
}

// Known returns a Deferred that already holds value: nothing is read.
func Known(value []byte) *Deferred {
	return &Deferred{value: append([]byte(nil), value...), ok: true}
}

// Get returns the secret, waiting for the read in flight; after a failed
// read it starts another. It returns ctx's error if ctx ends first (the
// read goes on for the next caller), and the read's error otherwise.
func (d *Deferred) Get(ctx context.Context) ([]byte, error) {
	d.mu.Lock()
	if d.ok {
		v := d.value
		d.mu.Unlock()
		return v, nil
	}
	a := d.cur
	if a == nil || (a.finished && a.err != nil) {
		a = d.start()
	}
	d.mu.Unlock()
	select {
	case <-a.done:
		if a.err != nil {
			return nil, a.err
		}
		return a.value, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// start begins a read; d.mu is held.
func (d *Deferred) start() *attempt {
	a := &attempt{done: make(chan struct{})}
	d.cur = a
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), d.timeout)
		v, err := d.read(ctx)
		cancel()
		d.mu.Lock()
		a.value, a.err, a.finished = v, err, true
		if err == nil {
			d.value, d.ok = v, true
		}
		d.mu.Unlock()
		close(a.done)
	}()
	return a
}

// JWTKey is the JWT key of cfg for the functions that verify tokens: the
// value when the configuration carries it, else the secret its ARN names,
// read from Secrets Manager (a client made from awsCfg) in the background
// from now on; with neither, an empty key (every token refused). The
// Resolver of such a function is ExceptJWT, so its cold start does not
// wait for the read: the first request that needs the key does.
func JWTKey(cfg config.Config, awsCfg aws.Config) *Deferred {
	if len(cfg.JWTSecret) > 0 || cfg.JWTSecretARN == "" {
		return Known(cfg.JWTSecret)
	}
	return JWTKeyAt(cfg.JWTSecretARN, awsCfg)
}

// JWTKeyAt reads the JWT key (the secret string) named by id, an ARN or a
// secret's name, with a Secrets Manager client made from awsCfg, in the
// background from now on (see Deferred): what a program outside a
// function (the CLI minting a token for a deployed environment) uses.
func JWTKeyAt(id string, awsCfg aws.Config) *Deferred {
	return JWTKeyFrom(id, secretsmanager.NewFromConfig(awsCfg))
}

// JWTKeyFrom reads the JWT key (the secret string) named by arn with sm,
// in the background from now on (see Deferred).
func JWTKeyFrom(arn string, sm SecretReader) *Deferred {
	return NewDeferred(func(ctx context.Context) ([]byte, error) {
		v, err := readSecret(ctx, sm, arn)
		if err != nil {
			return nil, err
		}
		return []byte(v), nil
	})
}
