package sealer_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/go-cmp/cmp"

	"github.com/conveyor/conveyor/internal/aws/sealer"
	"github.com/conveyor/conveyor/internal/envelope"
	"github.com/conveyor/conveyor/localstack/awstest"
)

func TestMain(m *testing.M) { awstest.Main(m) }

var aad = map[string]string{"user": "u1", "purpose": "deviantart", "token": "refresh"}

type testBundle struct {
	env   awstest.Env
	alias *sealer.Sealer
	keyID *sealer.Sealer
}

// setup provisions one isolated copy of the resources per test.
func setup(t *testing.T) *testBundle {
	t.Helper()
	env := awstest.Provision(t)
	return &testBundle{
		env:   env,
		alias: sealer.New(env.Clients.KMS, env.Res.Definition.KMSAlias),
		keyID: sealer.New(env.Clients.KMS, env.Res.KMSKeyID),
	}
}

func (b *testBundle) sealers() map[string]*sealer.Sealer {
	return map[string]*sealer.Sealer{"via alias": b.alias, "via key id": b.keyID}
}

func seal(t *testing.T, s *sealer.Sealer, plaintext []byte, aad map[string]string) envelope.Envelope {
	t.Helper()
	e, err := s.Seal(context.Background(), plaintext, aad)
	if err != nil {
		t.Fatalf("Seal: %v", err)
	}
	return e
}

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tests := []struct {
		name      string
		plaintext []byte
	}{
		{"token", []byte("refresh-token-7f3a")},
		{"empty", []byte{}},
		{"binary", bytes.Repeat([]byte{0, 0xff, 0x10}, 1500)},
	}
	for sealerName, s := range b.sealers() {
		for _, tt := range tests {
			t.Run(sealerName+"/"+tt.name, func(t *testing.T) {
				t.Parallel()
				e := seal(t, s, tt.plaintext, aad)
				if !strings.HasPrefix(e.KeyID, "arn:aws:kms:") || !strings.HasSuffix(e.KeyID, b.env.Res.KMSKeyID) {
					t.Errorf("KeyID %q is not the ARN of key %s", e.KeyID, b.env.Res.KMSKeyID)
				}
				if len(tt.plaintext) > 4 && bytes.Contains(e.Ciphertext, tt.plaintext) {
					t.Errorf("plaintext visible in the ciphertext")
				}
				// Either sealer opens what the other sealed: the envelope names its key.
				for openerName, o := range b.sealers() {
					got, err := o.Open(context.Background(), e, aad)
					if err != nil {
						t.Fatalf("Open %s: %v", openerName, err)
					}
					if diff := cmp.Diff(tt.plaintext, got); diff != "" {
						t.Errorf("Open %s (-want +got):\n%s", openerName, diff)
					}
				}
			})
		}
	}
}

func TestFreshDataKeyPerRecord(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for name, s := range b.sealers() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			plaintext := []byte("the same token twice")
			one, two := seal(t, s, plaintext, aad), seal(t, s, plaintext, aad)
			same := map[string]bool{
				"EncryptedKey": bytes.Equal(one.EncryptedKey, two.EncryptedKey),
				"Nonce":        bytes.Equal(one.Nonce, two.Nonce),
				"Ciphertext":   bytes.Equal(one.Ciphertext, two.Ciphertext),
			}
			if diff := cmp.Diff(map[string]bool{"EncryptedKey": false, "Nonce": false, "Ciphertext": false}, same); diff != "" {
				t.Errorf("fields shared by two seals of one plaintext (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(12, len(one.Nonce)); diff != "" {
				t.Errorf("nonce length (-want +got):\n%s", diff)
			}
		})
	}
}

func TestOpenRefuses(t *testing.T) {
	t.Parallel()
	b := setup(t)
	plaintext := []byte("refresh-token-do-not-leak")
	sealed := seal(t, b.alias, plaintext, aad)
	other := seal(t, b.alias, []byte("another secret"), aad)
	flip := func(p []byte, i int) []byte {
		q := bytes.Clone(p)
		q[i] ^= 0x01
		return q
	}
	with := func(change func(*envelope.Envelope)) envelope.Envelope {
		e := sealed
		change(&e)
		return e
	}
	tests := []struct {
		name string
		e    envelope.Envelope
		aad  map[string]string
		want error // nil: any error that is not a success
	}{
		{"ciphertext bit flipped", with(func(e *envelope.Envelope) { e.Ciphertext = flip(e.Ciphertext, 0) }), aad, envelope.ErrOpen},
		{"tag bit flipped", with(func(e *envelope.Envelope) { e.Ciphertext = flip(e.Ciphertext, len(e.Ciphertext)-1) }), aad, envelope.ErrOpen},
		{"ciphertext truncated", with(func(e *envelope.Envelope) { e.Ciphertext = e.Ciphertext[:len(e.Ciphertext)-1] }), aad, envelope.ErrOpen},
		{"ciphertext missing", with(func(e *envelope.Envelope) { e.Ciphertext = nil }), aad, envelope.ErrOpen},
		{"nonce changed", with(func(e *envelope.Envelope) { e.Nonce = flip(e.Nonce, 3) }), aad, envelope.ErrOpen},
		{"nonce too short", with(func(e *envelope.Envelope) { e.Nonce = e.Nonce[:11] }), aad, envelope.ErrOpen},
		{"nonce missing", with(func(e *envelope.Envelope) { e.Nonce = nil }), aad, envelope.ErrOpen},
		{"encrypted key flipped", with(func(e *envelope.Envelope) { e.EncryptedKey = flip(e.EncryptedKey, len(e.EncryptedKey)/2) }), aad, nil},
		{"encrypted key missing", with(func(e *envelope.Envelope) { e.EncryptedKey = nil }), aad, envelope.ErrOpen},
		{"another record's data key", with(func(e *envelope.Envelope) { e.EncryptedKey = other.EncryptedKey }), aad, envelope.ErrOpen},
		{"another record's ciphertext", with(func(e *envelope.Envelope) { e.Ciphertext, e.Nonce = other.Ciphertext, other.Nonce }), aad, envelope.ErrOpen},
		{"empty envelope", envelope.Envelope{}, aad, envelope.ErrOpen},
		{"another user", sealed, map[string]string{"user": "u2", "purpose": "deviantart", "token": "refresh"}, envelope.ErrOpen},
		{"another purpose", sealed, map[string]string{"user": "u1", "purpose": "deviantart", "token": "access"}, envelope.ErrOpen},
		{"a pair missing", sealed, map[string]string{"user": "u1", "purpose": "deviantart"}, envelope.ErrOpen},
		{"a pair added", sealed, map[string]string{"user": "u1", "purpose": "deviantart", "token": "refresh", "x": "y"}, envelope.ErrOpen},
		{"key and value swapped", sealed, map[string]string{"u1": "user", "purpose": "deviantart", "token": "refresh"}, envelope.ErrOpen},
		{"no context", sealed, nil, envelope.ErrNoContext},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := b.keyID.Open(context.Background(), tt.e, tt.aad)
			if err == nil {
				t.Fatalf("Open = %q, nil; want an error", got)
			}
			if tt.want != nil && !errors.Is(err, tt.want) {
				t.Errorf("Open error %v, want %v", err, tt.want)
			}
			if got != nil {
				t.Errorf("Open returned bytes with an error: %q", got)
			}
			if strings.Contains(err.Error(), string(plaintext)) {
				t.Errorf("the error carries the plaintext: %v", err)
			}
		})
	}
	// The untouched envelope still opens: the table did not mutate it.
	if got, err := b.keyID.Open(context.Background(), sealed, aad); err != nil || !bytes.Equal(got, plaintext) {
		t.Errorf("Open(sealed) = %q, %v", got, err)
	}
}

func TestSealRefuses(t *testing.T) {
	t.Parallel()
	b := setup(t)
	plaintext := []byte("refresh-token-do-not-leak")
	tests := []struct {
		name string
		s    *sealer.Sealer
		aad  map[string]string
		want error // nil: any error
	}{
		{"no context", b.alias, nil, envelope.ErrNoContext},
		{"empty context", b.alias, map[string]string{}, envelope.ErrNoContext},
		{"unknown alias", sealer.New(b.env.Clients.KMS, "alias/"+awstest.Name(t, "missing")), aad, nil},
		{"unknown key id", sealer.New(b.env.Clients.KMS, "00000000-0000-0000-0000-000000000000"), aad, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e, err := tt.s.Seal(context.Background(), plaintext, tt.aad)
			if err == nil {
				t.Fatalf("Seal = %+v, nil; want an error", e)
			}
			if tt.want != nil && !errors.Is(err, tt.want) {
				t.Errorf("Seal error %v, want %v", err, tt.want)
			}
			if strings.Contains(err.Error(), string(plaintext)) {
				t.Errorf("the error carries the plaintext: %v", err)
			}
		})
	}
}

func TestEnvelopeAttributes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	e := seal(t, b.alias, []byte("stored"), aad)
	item, err := attributevalue.MarshalMap(e)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]string{}
	for k, v := range item {
		switch v.(type) {
		case *types.AttributeValueMemberS:
			kinds[k] = "S"
		case *types.AttributeValueMemberB:
			kinds[k] = "B"
		default:
			kinds[k] = "?"
		}
	}
	if diff := cmp.Diff(map[string]string{"keyId": "S", "encKey": "B", "nonce": "B", "ct": "B"}, kinds); diff != "" {
		t.Errorf("stored attributes (-want +got):\n%s", diff)
	}
	var back envelope.Envelope
	if err := attributevalue.UnmarshalMap(item, &back); err != nil {
		t.Fatal(err)
	}
	got, err := b.keyID.Open(context.Background(), back, aad)
	if err != nil || string(got) != "stored" {
		t.Errorf("Open after a round trip through attributes = %q, %v", got, err)
	}
}
