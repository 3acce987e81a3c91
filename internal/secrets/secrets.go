// Package secrets seals small secrets (account tokens) with KMS envelope
// encryption: a fresh AES-256 data key per record from GenerateDataKey, the
// secret sealed with AES-GCM under it, and only the KMS-encrypted data key
// stored beside the ciphertext. The same context binds KMS (encryption
// context) and AES-GCM (additional data), so a sealed value moved to another
// user's record does not open.
package secrets

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"errors"
	"fmt"
	"sort"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	kmstypes "github.com/aws/aws-sdk-go-v2/service/kms/types"
)

// Envelope is a sealed secret as stored.
type Envelope struct {
	KeyID        string `dynamodbav:"keyId"`
	EncryptedKey []byte `dynamodbav:"encKey"`
	Nonce        []byte `dynamodbav:"nonce"`
	Ciphertext   []byte `dynamodbav:"ct"`
}

// Sealer seals and opens envelopes with one KMS key.
type Sealer struct {
	kms   *kms.Client
	keyID string
}

// NewSealer returns a Sealer using keyID (a key id, ARN or alias).
func NewSealer(client *kms.Client, keyID string) *Sealer { return &Sealer{kms: client, keyID: keyID} }

// additionalData renders the context deterministically for AES-GCM.
func additionalData(ctx map[string]string) []byte {
	keys := make([]string, 0, len(ctx))
	for k := range ctx {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b []byte
	for _, k := range keys {
		b = append(b, k...)
		b = append(b, 0)
		b = append(b, ctx[k]...)
		b = append(b, 0)
	}
	return b
}

// Seal encrypts plaintext under a fresh data key bound to context.
func (s *Sealer) Seal(ctx context.Context, plaintext []byte, context map[string]string) (Envelope, error) {
	dk, err := s.kms.GenerateDataKey(ctx, &kms.GenerateDataKeyInput{
		KeyId: aws.String(s.keyID), KeySpec: kmstypes.DataKeySpecAes256, EncryptionContext: context,
	})
	if err != nil {
		return Envelope{}, fmt.Errorf("generating a data key: %w", err)
	}
	defer clear(dk.Plaintext)
	gcm, err := newGCM(dk.Plaintext)
	if err != nil {
		return Envelope{}, err
	}
	nonce := make([]byte, gcm.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return Envelope{}, err
	}
	return Envelope{
		KeyID:        aws.ToString(dk.KeyId),
		EncryptedKey: dk.CiphertextBlob,
		Nonce:        nonce,
		Ciphertext:   gcm.Seal(nil, nonce, plaintext, additionalData(context)),
	}, nil
}

// ErrOpen is returned when an envelope does not open (tampered, or another
// context); it carries no detail of the secret.
var ErrOpen = errors.New("the sealed secret does not open")

// Open decrypts e, which must have been sealed with the same context.
func (s *Sealer) Open(ctx context.Context, e Envelope, context map[string]string) ([]byte, error) {
	dk, err := s.kms.Decrypt(ctx, &kms.DecryptInput{
		CiphertextBlob: e.EncryptedKey, EncryptionContext: context, KeyId: aws.String(e.KeyID),
	})
	if err != nil {
		var invalid *kmstypes.InvalidCiphertextException
		if errors.As(err, &invalid) {
			return nil, ErrOpen
		}
		return nil, fmt.Errorf("decrypting the data key: %w", err)
	}
	defer clear(dk.Plaintext)
	gcm, err := newGCM(dk.Plaintext)
	if err != nil {
		return nil, err
	}
	if len(e.Nonce) != gcm.NonceSize() {
		return nil, ErrOpen
	}
	pt, err := gcm.Open(nil, e.Nonce, e.Ciphertext, additionalData(context))
	if err != nil {
		return nil, ErrOpen
	}
	return pt, nil
}

func newGCM(key []byte) (cipher.AEAD, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("data key: %w", err)
	}
	return cipher.NewGCM(block)
}
