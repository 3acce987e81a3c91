package webhook

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/conveyor/conveyor/internal/resources"
	"github.com/conveyor/conveyor/internal/secrets"
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
	Seal(ctx context.Context, plaintext []byte, aad map[string]string) (secrets.Envelope, error)
	Open(ctx context.Context, e secrets.Envelope, aad map[string]string) ([]byte, error)
}

// KeysConfig configures Keys.
type KeysConfig struct {
	// DB and Table hold the sealed secrets (required).
	DB    *dynamodb.Client
	Table string
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
	case cfg.DB == nil || cfg.Table == "" || cfg.Sealer == nil:
		return nil, errors.New("webhook keys: DB, Table and Sealer are required")
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

// secretRecord is a user's secret as stored.
type secretRecord struct {
	Owner           string            `dynamodbav:"hooksOwner"`
	Current         secrets.Envelope  `dynamodbav:"current"`
	Previous        *secrets.Envelope `dynamodbav:"previous,omitempty"`
	PreviousUntilMs int64             `dynamodbav:"previousUntilMs,omitempty"`
	Version         int64             `dynamodbav:"version"`
	CreatedAt       time.Time         `dynamodbav:"createdAt"`
	RotatedAt       *time.Time        `dynamodbav:"rotatedAt,omitempty"`
}

func hooksPK(owner string) string { return "HOOKS#" + owner }

const secretSK = "SECRET"

func aad(owner string) map[string]string {
	return map[string]string{"user": owner, secrets.ContextPurpose: secrets.PurposeWebhookSigning}
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
		next := secretRecord{Owner: owner, Current: env, Previous: &prev, PreviousUntilMs: now.Add(k.cfg.Overlap).UnixMilli(),
			Version: rec.Version + 1, CreatedAt: rec.CreatedAt, RotatedAt: &now}
		err = k.put(ctx, next, expression.Name("version").Equal(expression.Value(rec.Version)))
		if errors.Is(err, errConflict) {
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

func (k *Keys) view(ctx context.Context, owner string, rec secretRecord) (Secret, error) {
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

var errConflict = errors.New("webhook keys: changed concurrently")

// load reads owner's secret record, creating one if there is none.
func (k *Keys) load(ctx context.Context, owner string) (secretRecord, error) {
	for range 3 {
		out, err := k.cfg.DB.GetItem(ctx, &dynamodb.GetItemInput{
			TableName: aws.String(k.cfg.Table), Key: key(hooksPK(owner), secretSK), ConsistentRead: aws.Bool(true),
		})
		if err != nil {
			return secretRecord{}, fmt.Errorf("reading the webhook secret of %s: %w", owner, err)
		}
		if len(out.Item) > 0 {
			var rec secretRecord
			if err := attributevalue.UnmarshalMap(out.Item, &rec); err != nil {
				return secretRecord{}, fmt.Errorf("decoding the webhook secret of %s: %w", owner, err)
			}
			return rec, nil
		}
		env, err := k.cfg.Sealer.Seal(ctx, NewSecretKey(), aad(owner))
		if err != nil {
			return secretRecord{}, fmt.Errorf("sealing a webhook secret: %w", err)
		}
		rec := secretRecord{Owner: owner, Current: env, Version: 1, CreatedAt: k.cfg.Now().UTC()}
		err = k.put(ctx, rec, expression.AttributeNotExists(expression.Name(resources.AttrPK)))
		if errors.Is(err, errConflict) {
			continue // created concurrently: read that one
		}
		return rec, err
	}
	return secretRecord{}, errors.New("webhook keys: could not create the secret")
}

func (k *Keys) put(ctx context.Context, rec secretRecord, cond expression.ConditionBuilder) error {
	item, err := attributevalue.MarshalMap(rec)
	if err != nil {
		return err
	}
	for n, v := range key(hooksPK(rec.Owner), secretSK) {
		item[n] = v
	}
	e, err := expression.NewBuilder().WithCondition(cond).Build()
	if err != nil {
		return err
	}
	_, err = k.cfg.DB.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(k.cfg.Table), Item: item, ConditionExpression: e.Condition(),
		ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(),
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return errConflict
	}
	if err != nil {
		return fmt.Errorf("storing the webhook secret of %s: %w", rec.Owner, err)
	}
	return nil
}

func key(pk, sk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		resources.AttrPK: &types.AttributeValueMemberS{Value: pk},
		resources.AttrSK: &types.AttributeValueMemberS{Value: sk},
	}
}
