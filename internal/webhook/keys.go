package webhook

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/conveyor/conveyor/internal/envelope"
	"github.com/conveyor/conveyor/internal/fault"
)

// Defaults of KeysConfig.
const (
	// OverlapDefault is how long a rotated-out secret keeps signing
	// alongside the new one.
	OverlapDefault = 24 * time.Hour
	// KeyCacheDefault is how long a function reuses a user's opened keys
	// before it reads them again (one KMS Decrypt per user per period).
	KeyCacheDefault = time.Minute
)

// Sealer seals secrets at rest (sealer.Sealer: KMS envelope encryption).
type Sealer interface {
	Seal(ctx context.Context, plaintext []byte, aad map[string]string) (envelope.Envelope, error)
	Open(ctx context.Context, e envelope.Envelope, aad map[string]string) ([]byte, error)
}

// SecretStore keeps each user's sealed secret (*store.Store: "HOOKS#<user>"
// / "SECRET" in the table).
type SecretStore interface {
	// GetWebhookSecret returns owner's secret, fault.ErrNotFound when
	// there is none yet.
	GetWebhookSecret(ctx context.Context, owner string) (SecretRecord, error)
	// PutWebhookSecret stores rec in place of version prev (0: none),
	// fault.ErrConflict when the stored one is not that.
	PutWebhookSecret(ctx context.Context, rec SecretRecord, prev int64) error
}

// KeysConfig configures Keys.
type KeysConfig struct {
	// Store holds the sealed secrets (required).
	Store SecretStore
	// Sealer seals every secret before it reaches the table (required).
	Sealer Sealer
	// Overlap is how long the previous secret keeps signing after a
	// rotation (default OverlapDefault, 24h). It must be at least Cache.
	Overlap time.Duration
	// Cache is how long opened keys are reused (default KeyCacheDefault,
	// 1m). A rotation done elsewhere is picked up within Cache; the
	// overlap keeps the old signature valid meanwhile.
	Cache time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Keys keeps each user's signing secret: created on first use, sealed with
// KMS under a context naming the user and the purpose (so a sealed secret
// copied to another user does not open), readable by its owner, rotated
// with an overlap during which both secrets sign. It is safe for
// concurrent use.
type Keys struct {
	cfg   KeysConfig
	cache userCache[[][]byte]
}

// NewKeys validates cfg and returns Keys.
func NewKeys(cfg KeysConfig) (*Keys, error) {
	if cfg.Overlap == 0 {
		cfg.Overlap = OverlapDefault
	}
	if cfg.Cache == 0 {
		cfg.Cache = KeyCacheDefault
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	switch {
	case cfg.Store == nil || cfg.Sealer == nil:
		return nil, errors.New("webhook keys: Store and Sealer are required")
	case cfg.Overlap < cfg.Cache:
		return nil, fmt.Errorf("webhook keys: the rotation overlap (%s) must be at least the key cache (%s), or a function could sign with a retired secret", cfg.Overlap, cfg.Cache)
	}
	return &Keys{cfg: cfg}, nil
}

// Secret is what the owner sees of their signing secret.
type Secret struct {
	// Secret is the current secret, "whsec_<base64>".
	Secret string `json:"secret"`
	// PreviousExpiresAt is when the rotated-out secret stops signing, while
	// it still does.
	PreviousExpiresAt *time.Time `json:"previousExpiresAt,omitempty"`
}

func aad(owner string) map[string]string {
	return map[string]string{"user": owner, envelope.ContextPurpose: envelope.PurposeWebhookSigning}
}

// Get returns owner's secret, creating it on first use.
func (k *Keys) Get(ctx context.Context, owner string) (Secret, error) {
	rec, err := k.load(ctx, owner)
	if err != nil {
		return Secret{}, err
	}
	return k.view(ctx, owner, rec)
}

// Rotate replaces owner's secret with a fresh one; the replaced one keeps
// signing alongside it for the overlap. Rotating again during an overlap
// retires the oldest secret at once.
func (k *Keys) Rotate(ctx context.Context, owner string) (Secret, error) {
	for range 5 {
		rec, err := k.load(ctx, owner)
		if err != nil {
			return Secret{}, err
		}
		env, err := k.cfg.Sealer.Seal(ctx, NewSecretKey(), aad(owner))
		if err != nil {
			return Secret{}, fmt.Errorf("sealing a webhook secret: %w", err)
		}
		now := k.cfg.Now().UTC()
		prev := rec.Current
		next := SecretRecord{Owner: owner, Current: env, Previous: &prev, PreviousUntilMs: now.Add(k.cfg.Overlap).UnixMilli(),
			Version: rec.Version + 1, CreatedAt: rec.CreatedAt, RotatedAt: &now}
		err = k.cfg.Store.PutWebhookSecret(ctx, next, rec.Version)
		if errors.Is(err, fault.ErrConflict) {
			continue // rotated concurrently: rotate what is there now
		}
		if err != nil {
			return Secret{}, err
		}
		k.forget(owner)
		return k.view(ctx, owner, next)
	}
	return Secret{}, errors.New("webhook keys: the secret kept changing during the rotation")
}

// SigningKeys returns the keys that sign owner's deliveries now: the
// current one first, then the previous one during a rotation's overlap.
// The secret is created when the owner has none yet.
func (k *Keys) SigningKeys(ctx context.Context, owner string) ([][]byte, error) {
	now := k.cfg.Now()
	if keys, ok := k.cache.get(owner, now); ok {
		return keys, nil
	}
	rec, err := k.load(ctx, owner)
	if err != nil {
		return nil, err
	}
	cur, err := k.cfg.Sealer.Open(ctx, rec.Current, aad(owner))
	if err != nil {
		return nil, fmt.Errorf("opening the webhook secret of %s: %w", owner, err)
	}
	keys := [][]byte{cur}
	until := now.Add(k.cfg.Cache)
	if rec.Previous != nil && now.UnixMilli() < rec.PreviousUntilMs {
		prev, err := k.cfg.Sealer.Open(ctx, *rec.Previous, aad(owner))
		if err != nil {
			return nil, fmt.Errorf("opening the previous webhook secret of %s: %w", owner, err)
		}
		keys = append(keys, prev)
		// Stop sending the old signature as soon as the overlap ends.
		until = minTime(until, time.UnixMilli(rec.PreviousUntilMs))
	}
	k.cache.put(owner, keys, until)
	return keys, nil
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func (k *Keys) forget(owner string) { k.cache.forget(owner) }

func (k *Keys) view(ctx context.Context, owner string, rec SecretRecord) (Secret, error) {
	cur, err := k.cfg.Sealer.Open(ctx, rec.Current, aad(owner))
	if err != nil {
		return Secret{}, fmt.Errorf("opening the webhook secret of %s: %w", owner, err)
	}
	s := Secret{Secret: FormatSecret(cur)}
	clear(cur)
	if rec.Previous != nil && k.cfg.Now().UnixMilli() < rec.PreviousUntilMs {
		t := time.UnixMilli(rec.PreviousUntilMs).UTC()
		s.PreviousExpiresAt = &t
	}
	return s, nil
}

// load reads owner's secret record, creating one if there is none.
func (k *Keys) load(ctx context.Context, owner string) (SecretRecord, error) {
	for range 3 {
		rec, err := k.cfg.Store.GetWebhookSecret(ctx, owner)
		if !errors.Is(err, fault.ErrNotFound) {
			return rec, err
		}
		env, err := k.cfg.Sealer.Seal(ctx, NewSecretKey(), aad(owner))
		if err != nil {
			return SecretRecord{}, fmt.Errorf("sealing a webhook secret: %w", err)
		}
		rec = SecretRecord{Owner: owner, Current: env, Version: 1, CreatedAt: k.cfg.Now().UTC()}
		err = k.cfg.Store.PutWebhookSecret(ctx, rec, 0)
		if errors.Is(err, fault.ErrConflict) {
			continue // created concurrently: read that one
		}
		return rec, err
	}
	return SecretRecord{}, errors.New("webhook keys: could not create the secret")
}
