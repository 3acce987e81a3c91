package secrets_test

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/conveyor/conveyor/internal/secrets"
	"github.com/conveyor/conveyor/localstack/awstest"
)

func TestMain(m *testing.M) { awstest.Main(m) }

func TestSealOpen(t *testing.T) {
	t.Parallel()
	env := awstest.Provision(t)
	ctx := context.Background()
	aad := map[string]string{"user": "u1", "provider": "deviantart", "token": "refresh"}
	for name, key := range map[string]string{"alias": env.Res.Definition.KMSAlias, "key id": env.Res.KMSKeyID} {
		s := secrets.NewSealer(env.Clients.KMS, key)
		secret := []byte("refresh-token-" + name)
		a, err := s.Seal(ctx, secret, aad)
		if err != nil {
			t.Fatalf("%s: seal: %v", name, err)
		}
		b, err := s.Seal(ctx, secret, aad)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Equal(a.EncryptedKey, b.EncryptedKey) || bytes.Equal(a.Ciphertext, b.Ciphertext) {
			t.Errorf("%s: two seals share a data key or ciphertext", name)
		}
		if bytes.Contains(a.Ciphertext, secret) {
			t.Errorf("%s: plaintext visible in the ciphertext", name)
		}
		got, err := s.Open(ctx, a, aad)
		if err != nil || !bytes.Equal(got, secret) {
			t.Fatalf("%s: open = %q, %v", name, got, err)
		}
		other := map[string]string{"user": "u2", "provider": "deviantart", "token": "refresh"}
		if _, err := s.Open(ctx, a, other); err == nil {
			t.Errorf("%s: opened under another user's context", name)
		}
		tampered := a
		tampered.Ciphertext = append([]byte{}, a.Ciphertext...)
		tampered.Ciphertext[0] ^= 1
		if _, err := s.Open(ctx, tampered, aad); !errors.Is(err, secrets.ErrOpen) {
			t.Errorf("%s: tampered ciphertext: %v", name, err)
		}
		badNonce := a
		badNonce.Nonce = []byte{1, 2, 3}
		if _, err := s.Open(ctx, badNonce, aad); err == nil {
			t.Errorf("%s: bad nonce opened", name)
		}
	}
}
