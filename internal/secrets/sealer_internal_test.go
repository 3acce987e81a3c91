package secrets

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"strconv"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	kmstypes "github.com/aws/aws-sdk-go-v2/service/kms/types"
	"github.com/google/go-cmp/cmp"
)

// fakeKMS hands out data keys, remembers every plaintext key slice it gave
// away (to check they are zeroed) and every request, and — unlike KMS —
// ignores the encryption context, to show that AES-GCM binds it by itself.
type fakeKMS struct {
	mu         sync.Mutex
	keys       map[string][]byte
	handedOut  [][]byte
	generates  []kms.GenerateDataKeyInput
	decrypts   []kms.DecryptInput
	decryptErr error
}

const fakeARN = "arn:aws:kms:eu-west-1:123456789012:key/fake"

func (f *fakeKMS) GenerateDataKey(_ context.Context, in *kms.GenerateDataKeyInput, _ ...func(*kms.Options)) (*kms.GenerateDataKeyOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	blob := []byte("blob-" + strconv.Itoa(len(f.keys)))
	if f.keys == nil {
		f.keys = map[string][]byte{}
	}
	f.keys[string(blob)] = bytes.Clone(key)
	f.handedOut = append(f.handedOut, key)
	f.generates = append(f.generates, *in)
	return &kms.GenerateDataKeyOutput{Plaintext: key, CiphertextBlob: blob, KeyId: aws.String(fakeARN)}, nil
}

func (f *fakeKMS) Decrypt(_ context.Context, in *kms.DecryptInput, _ ...func(*kms.Options)) (*kms.DecryptOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.decrypts = append(f.decrypts, *in)
	if f.decryptErr != nil {
		return nil, f.decryptErr
	}
	key, ok := f.keys[string(in.CiphertextBlob)]
	if !ok {
		return nil, &kmstypes.InvalidCiphertextException{Message: aws.String("unknown blob")}
	}
	out := bytes.Clone(key)
	f.handedOut = append(f.handedOut, out)
	return &kms.DecryptOutput{Plaintext: out, KeyId: aws.String(fakeARN)}, nil
}

func TestDataKeysAreZeroed(t *testing.T) {
	t.Parallel()
	f := &fakeKMS{}
	s := newSealer(f, "alias/conveyor")
	ctx := context.Background()
	aad := map[string]string{"user": "u1", "purpose": "deviantart"}
	e, err := s.Seal(ctx, []byte("token"), aad)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Open(ctx, e, aad); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Open(ctx, e, map[string]string{"user": "u2", "purpose": "deviantart"}); !errors.Is(err, ErrOpen) {
		t.Errorf("Open under another context with a context-blind KMS: %v, want ErrOpen", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if diff := cmp.Diff(3, len(f.handedOut)); diff != "" {
		t.Fatalf("plaintext keys handed out (-want +got):\n%s", diff)
	}
	for i, k := range f.handedOut {
		if !bytes.Equal(k, make([]byte, len(k))) {
			t.Errorf("plaintext data key %d was not zeroed", i)
		}
	}
}

func TestKMSRequests(t *testing.T) {
	t.Parallel()
	f := &fakeKMS{}
	s := newSealer(f, "alias/conveyor")
	ctx := context.Background()
	aad := map[string]string{"user": "u1", "purpose": "deviantart"}
	e, err := s.Seal(ctx, []byte("token"), aad)
	if err != nil {
		t.Fatal(err)
	}
	legacy := e
	legacy.KeyID = "" // an envelope without a key id falls back to the sealer's key
	for _, env := range []Envelope{e, legacy} {
		if _, err := s.Open(ctx, env, aad); err != nil {
			t.Fatal(err)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	opts := cmp.Options{cmp.AllowUnexported(kms.GenerateDataKeyInput{}, kms.DecryptInput{})}
	if diff := cmp.Diff([]kms.GenerateDataKeyInput{{KeyId: aws.String("alias/conveyor"), KeySpec: kmstypes.DataKeySpecAes256, EncryptionContext: aad}}, f.generates, opts); diff != "" {
		t.Errorf("GenerateDataKey (-want +got):\n%s", diff)
	}
	want := []kms.DecryptInput{
		{CiphertextBlob: e.EncryptedKey, EncryptionContext: aad, KeyId: aws.String(fakeARN)},
		{CiphertextBlob: e.EncryptedKey, EncryptionContext: aad, KeyId: aws.String("alias/conveyor")},
	}
	if diff := cmp.Diff(want, f.decrypts, opts); diff != "" {
		t.Errorf("Decrypt (-want +got):\n%s", diff)
	}
}

func TestKMSFailureIsNotErrOpen(t *testing.T) {
	t.Parallel()
	boom := errors.New("connection refused")
	tests := []struct {
		name  string
		err   error
		want  error
		notIs error
	}{
		{"transport", boom, boom, ErrOpen},
		{"disabled key", &kmstypes.DisabledException{Message: aws.String("disabled")}, nil, ErrOpen},
		{"invalid ciphertext", &kmstypes.InvalidCiphertextException{}, ErrOpen, nil},
		{"incorrect key", &kmstypes.IncorrectKeyException{}, ErrOpen, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := &fakeKMS{}
			s := newSealer(f, "alias/conveyor")
			aad := map[string]string{"user": "u1"}
			e, err := s.Seal(context.Background(), []byte("token"), aad)
			if err != nil {
				t.Fatal(err)
			}
			f.mu.Lock()
			f.decryptErr = tt.err
			f.mu.Unlock()
			_, err = s.Open(context.Background(), e, aad)
			if err == nil {
				t.Fatal("Open succeeded")
			}
			if tt.want != nil && !errors.Is(err, tt.want) {
				t.Errorf("Open error %v, want %v", err, tt.want)
			}
			if tt.notIs != nil && errors.Is(err, tt.notIs) {
				t.Errorf("Open error %v must not be %v", err, tt.notIs)
			}
		})
	}
}

func TestAdditionalDataIsInjective(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		a, b map[string]string
	}{
		{"boundary moved", map[string]string{"a": "bc"}, map[string]string{"ab": "c"}},
		{"separator smuggled", map[string]string{"a": "b\x00c\x00"}, map[string]string{"a": "b", "c": ""}},
		{"key and value swapped", map[string]string{"user": "u1"}, map[string]string{"u1": "user"}},
		{"pair added", map[string]string{"user": "u1"}, map[string]string{"user": "u1", "purpose": ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if bytes.Equal(additionalData(tt.a), additionalData(tt.b)) {
				t.Errorf("%q and %q encode alike", tt.a, tt.b)
			}
		})
	}
	x := map[string]string{"user": "u1", "purpose": "deviantart", "token": "refresh"}
	y := map[string]string{"token": "refresh", "user": "u1", "purpose": "deviantart"}
	for range 20 { // map iteration order varies; the encoding must not
		if !bytes.Equal(additionalData(x), additionalData(y)) {
			t.Fatal("equal contexts encode differently")
		}
	}
}
