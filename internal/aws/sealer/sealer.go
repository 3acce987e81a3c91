// Package sealer seals small secrets (account tokens, webhook signing
// keys) into envelope.Envelope with KMS envelope encryption: a fresh
// AES-256 data key per record from GenerateDataKey, the secret sealed with
// AES-256-GCM under it, and only the KMS-encrypted data key stored beside
// the ciphertext. One context binds both layers — it is the KMS encryption
// context and the AES-GCM additional data — so a sealed value copied into
// another user's record, or used for another purpose, does not open. Only
// the functions that seal or open secrets import it, so only they link the
// KMS client.
package sealer

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	kmstypes "github.com/aws/aws-sdk-go-v2/service/kms/types"

	"github.com/conveyor/conveyor/internal/envelope"
)

// kmsAPI is the part of the KMS client a Sealer uses.
type kmsAPI interface {
	GenerateDataKey(ctx context.Context, in *kms.GenerateDataKeyInput, optFns ...func(*kms.Options)) (*kms.GenerateDataKeyOutput, error)
	Decrypt(ctx context.Context, in *kms.DecryptInput, optFns ...func(*kms.Options)) (*kms.DecryptOutput, error)
}

// Sealer seals and opens envelopes with one KMS key. It is safe for
// concurrent use.
type Sealer struct {
	kms   kmsAPI
	keyID string
}

// New returns a Sealer that seals under keyID (a key id, key ARN,
// alias name or alias ARN).
func New(client *kms.Client, keyID string) *Sealer { return newSealer(client, keyID) }

// For returns a Sealer over a KMS client made from cfg: what a function
// that seals or opens secrets creates at cold start.
func For(cfg aws.Config, keyID string) *Sealer { return New(kms.NewFromConfig(cfg), keyID) }

func newSealer(api kmsAPI, keyID string) *Sealer { return &Sealer{kms: api, keyID: keyID} }

const (
	dataKeyBytes = 32 // AES-256
	nonceBytes   = 12
)

// Seal encrypts plaintext under a fresh data key bound to aad, which is both
// the KMS encryption context and the AES-GCM additional data, e.g.
// {"user":"u1","purpose":"deviantart"}. The plaintext data key is zeroed
// before Seal returns. Errors never contain the plaintext.
func (s *Sealer) Seal(ctx context.Context, plaintext []byte, aad map[string]string) (envelope.Envelope, error) {
	if len(aad) == 0 {
		return envelope.Envelope{}, envelope.ErrNoContext
	}
	dk, err := s.kms.GenerateDataKey(ctx, &kms.GenerateDataKeyInput{
		KeyId: aws.String(s.keyID), KeySpec: kmstypes.DataKeySpecAes256, EncryptionContext: aad,
	})
	if err != nil {
		return envelope.Envelope{}, fmt.Errorf("secrets: generating a data key under %s: %w", s.keyID, err)
	}
	defer clear(dk.Plaintext)
	if len(dk.CiphertextBlob) == 0 {
		return envelope.Envelope{}, errors.New("secrets: KMS returned no encrypted data key")
	}
	gcm, err := newGCM(dk.Plaintext)
	if err != nil {
		return envelope.Envelope{}, err
	}
	nonce := make([]byte, nonceBytes)
	if _, err := rand.Read(nonce); err != nil {
		return envelope.Envelope{}, fmt.Errorf("secrets: drawing a nonce: %w", err)
	}
	return envelope.Envelope{
		KeyID:        aws.ToString(dk.KeyId),
		EncryptedKey: dk.CiphertextBlob,
		Nonce:        nonce,
		Ciphertext:   gcm.Seal(nil, nonce, plaintext, additionalData(aad)),
	}, nil
}

// Open decrypts e, which must have been sealed with the same aad. A tampered
// envelope or another context yields envelope.ErrOpen; a KMS failure (unreachable,
// key disabled) is returned wrapped. The plaintext data key is zeroed before
// Open returns.
func (s *Sealer) Open(ctx context.Context, e envelope.Envelope, aad map[string]string) ([]byte, error) {
	if len(aad) == 0 {
		return nil, envelope.ErrNoContext
	}
	if len(e.EncryptedKey) == 0 || len(e.Nonce) != nonceBytes || len(e.Ciphertext) < 16 {
		return nil, envelope.ErrOpen
	}
	keyID := e.KeyID
	if keyID == "" {
		keyID = s.keyID
	}
	dk, err := s.kms.Decrypt(ctx, &kms.DecryptInput{
		CiphertextBlob: e.EncryptedKey, EncryptionContext: aad, KeyId: aws.String(keyID),
	})
	if err != nil {
		var invalid *kmstypes.InvalidCiphertextException
		var incorrect *kmstypes.IncorrectKeyException
		if errors.As(err, &invalid) || errors.As(err, &incorrect) {
			return nil, envelope.ErrOpen
		}
		return nil, fmt.Errorf("secrets: decrypting the data key with %s: %w", keyID, err)
	}
	defer clear(dk.Plaintext)
	gcm, err := newGCM(dk.Plaintext)
	if err != nil {
		return nil, envelope.ErrOpen
	}
	pt, err := gcm.Open(nil, e.Nonce, e.Ciphertext, additionalData(aad))
	if err != nil {
		return nil, envelope.ErrOpen
	}
	if pt == nil {
		pt = []byte{} // an empty secret opens to empty, never to nil
	}
	return pt, nil
}

func newGCM(key []byte) (cipher.AEAD, error) {
	if len(key) != dataKeyBytes {
		return nil, fmt.Errorf("secrets: the data key has %d bytes, want %d", len(key), dataKeyBytes)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("secrets: data key: %w", err)
	}
	return cipher.NewGCM(block)
}

// additionalData encodes the context canonically for AES-GCM: a version
// label, then each pair in key order, every string length-prefixed so that
// no two contexts encode alike.
func additionalData(aad map[string]string) []byte {
	keys := make([]string, 0, len(aad))
	for k := range aad {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b := []byte("conveyor/secrets/v1")
	for _, k := range keys {
		b = binary.AppendUvarint(b, uint64(len(k)))
		b = append(b, k...)
		b = binary.AppendUvarint(b, uint64(len(aad[k])))
		b = append(b, aad[k]...)
	}
	return b
}
