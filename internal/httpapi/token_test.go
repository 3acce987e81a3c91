package httpapi

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/go-cmp/cmp"
)

var (
	tokenSecret = []byte("test-secret-0123456789abcdef")
	now         = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
)

func b64(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }

// signed signs claims with method and key through the jwt library.
func signed(t *testing.T, m jwt.SigningMethod, key any, claims jwt.MapClaims) string {
	t.Helper()
	s, err := jwt.NewWithClaims(m, claims).SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// forged builds a token by hand: any header, HMAC-SHA256 signature with key.
func forged(header, payload string, key []byte) string {
	in := b64(header) + "." + b64(payload)
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(in))
	return in + "." + base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// claims returns a valid user payload with the changes applied (nil deletes).
func claims(changes map[string]any) jwt.MapClaims {
	return changed(jwt.MapClaims{"sub": "u1", "role": "user", "plan": "pro", "exp": now.Add(time.Hour).Unix()}, changes)
}

// changed is c with changes applied: each key set to its value, or
// deleted when the value is nil.
func changed(c jwt.MapClaims, changes map[string]any) jwt.MapClaims {
	for k, v := range changes {
		if v == nil {
			delete(c, k)
			continue
		}
		c[k] = v
	}
	return c
}

func TestVerifyRefuses(t *testing.T) {
	t.Parallel()
	valid := signed(t, jwt.SigningMethodHS256, tokenSecret, claims(nil))
	parts := strings.Split(valid, ".")
	payload := `{"sub":"u1","role":"user","plan":"pro","exp":` + strconv.FormatInt(now.Add(time.Hour).Unix(), 10) + `}`

	tests := []struct {
		name   string
		header string
		reason string
	}{
		{"empty header", "", "missing bearer token"},
		{"missing Bearer", valid, "missing bearer token"},
		{"Basic scheme", "Basic " + valid, "missing bearer token"},
		{"Bearer alone", "Bearer", "missing bearer token"},
		{"Bearer and spaces", "Bearer   ", "missing bearer token"},
		{"garbage", "Bearer not.a.jwt", "malformed token"},
		{"one segment", "Bearer abc", "malformed token"},
		{"oversized", "Bearer " + strings.Repeat("a", MaxTokenLength+1), "malformed token"},
		{"alg none unsigned", "Bearer " + b64(`{"alg":"none","typ":"JWT"}`) + "." + parts[1] + ".", "unacceptable signing method"},
		{"alg none with signature", "Bearer " + b64(`{"alg":"none","typ":"JWT"}`) + "." + parts[1] + "." + parts[2], "unacceptable signing method"},
		{"RS256 header with HMAC signature", "Bearer " + forged(`{"alg":"RS256","typ":"JWT"}`, payload, tokenSecret), "unacceptable signing method"},
		{"HS512 with the secret", "Bearer " + signed(t, jwt.SigningMethodHS512, tokenSecret, claims(nil)), "unacceptable signing method"},
		{"HS384 with the secret", "Bearer " + signed(t, jwt.SigningMethodHS384, tokenSecret, claims(nil)), "unacceptable signing method"},
		{"tampered payload", "Bearer " + parts[0] + "." + b64(`{"sub":"u1","role":"admin","exp":9999999999}`) + "." + parts[2], "bad signature"},
		{"tampered signature", "Bearer " + parts[0] + "." + parts[1] + "." + b64("not the signature at all, 32 b!"), "bad signature"},
		{"wrong secret", "Bearer " + signed(t, jwt.SigningMethodHS256, []byte("another-secret"), claims(nil)), "bad signature"},
		{"expired beyond the leeway", "Bearer " + signed(t, jwt.SigningMethodHS256, tokenSecret, claims(map[string]any{"exp": now.Add(-Leeway - time.Second).Unix()})), "token expired"},
		{"not valid yet", "Bearer " + signed(t, jwt.SigningMethodHS256, tokenSecret, claims(map[string]any{"nbf": now.Add(time.Hour).Unix()})), "token not valid yet"},
		{"issued in the future", "Bearer " + signed(t, jwt.SigningMethodHS256, tokenSecret, claims(map[string]any{"iat": now.Add(Leeway + time.Minute).Unix()})), "token issued in the future"},
		{"missing exp", "Bearer " + signed(t, jwt.SigningMethodHS256, tokenSecret, claims(map[string]any{"exp": nil})), "exp is required"},
		{"exp not a number", "Bearer " + forged(`{"alg":"HS256","typ":"JWT"}`, `{"sub":"u1","role":"user","exp":"tomorrow"}`, tokenSecret), "malformed token"},
		{"missing sub", "Bearer " + signed(t, jwt.SigningMethodHS256, tokenSecret, claims(map[string]any{"sub": nil})), "sub is required"},
		{"sub with a key separator", "Bearer " + signed(t, jwt.SigningMethodHS256, tokenSecret, claims(map[string]any{"sub": "u1#admin"})), "invalid sub"},
		{"sub too long", "Bearer " + signed(t, jwt.SigningMethodHS256, tokenSecret, claims(map[string]any{"sub": strings.Repeat("u", 129)})), "invalid sub"},
		{"missing role", "Bearer " + signed(t, jwt.SigningMethodHS256, tokenSecret, claims(map[string]any{"role": nil})), "unknown role"},
		{"unknown role", "Bearer " + signed(t, jwt.SigningMethodHS256, tokenSecret, claims(map[string]any{"role": "root"})), "unknown role"},
		{"role in another case", "Bearer " + signed(t, jwt.SigningMethodHS256, tokenSecret, claims(map[string]any{"role": "Admin"})), "unknown role"},
		{"unknown plan", "Bearer " + signed(t, jwt.SigningMethodHS256, tokenSecret, claims(map[string]any{"plan": "platinum"})), "unknown plan"},
		{"admin with an unknown plan", "Bearer " + signed(t, jwt.SigningMethodHS256, tokenSecret, claims(map[string]any{"role": "admin", "plan": "gold"})), "unknown plan"},
	}
	v := NewVerifier(tokenSecret, func() time.Time { return now })
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := v.Verify(tt.header)
			if !errors.Is(err, ErrUnauthorized) {
				t.Fatalf("Verify = %+v, %v; want an error matching ErrUnauthorized", c, err)
			}
			var ae *TokenError
			if !errors.As(err, &ae) {
				t.Fatalf("Verify error %T is not a *TokenError", err)
			}
			if diff := cmp.Diff(tt.reason, ae.Reason); diff != "" {
				t.Errorf("reason (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(Claims{}, c); diff != "" {
				t.Errorf("claims returned with an error (-want +got):\n%s", diff)
			}
			if tok := strings.TrimPrefix(tt.header, "Bearer "); len(tok) > 8 && strings.Contains(err.Error(), tok) {
				t.Errorf("the error repeats the token: %v", err)
			}
		})
	}
}

func TestVerifyAccepts(t *testing.T) {
	t.Parallel()
	exp := now.Add(time.Hour)
	tests := []struct {
		name   string
		header func(t *testing.T) string
		want   Claims
	}{
		{
			name: "user with a plan",
			header: func(t *testing.T) string {
				return "Bearer " + signed(t, jwt.SigningMethodHS256, tokenSecret, claims(nil))
			},
			want: Claims{Subject: "u1", Role: RoleUser, Plan: "pro", ExpiresAt: exp},
		},
		{
			name: "user without a plan is on free",
			header: func(t *testing.T) string {
				return "Bearer " + signed(t, jwt.SigningMethodHS256, tokenSecret, claims(map[string]any{"plan": nil}))
			},
			want: Claims{Subject: "u1", Role: RoleUser, Plan: "free", ExpiresAt: exp},
		},
		{
			name: "admin without a plan",
			header: func(t *testing.T) string {
				return "Bearer " + signed(t, jwt.SigningMethodHS256, tokenSecret, claims(map[string]any{"role": "admin", "plan": nil}))
			},
			want: Claims{Subject: "u1", Role: RoleAdmin, ExpiresAt: exp},
		},
		{
			name: "service with a plan",
			header: func(t *testing.T) string {
				return "Bearer " + signed(t, jwt.SigningMethodHS256, tokenSecret, claims(map[string]any{"role": "service", "plan": "enterprise"}))
			},
			want: Claims{Subject: "u1", Role: RoleService, Plan: "enterprise", ExpiresAt: exp},
		},
		{
			name: "expired inside the leeway",
			header: func(t *testing.T) string {
				return "Bearer " + signed(t, jwt.SigningMethodHS256, tokenSecret, claims(map[string]any{"exp": now.Add(-10 * time.Second).Unix()}))
			},
			want: Claims{Subject: "u1", Role: RoleUser, Plan: "pro", ExpiresAt: now.Add(-10 * time.Second)},
		},
		{
			name: "lower-case scheme and extra spaces",
			header: func(t *testing.T) string {
				return " bearer   " + signed(t, jwt.SigningMethodHS256, tokenSecret, claims(nil)) + " "
			},
			want: Claims{Subject: "u1", Role: RoleUser, Plan: "pro", ExpiresAt: exp},
		},
		{
			name: "minted user token",
			header: func(t *testing.T) string {
				return "Bearer " + mint(t, Claims{Subject: "u2", Role: RoleUser, Plan: "corporate", ExpiresAt: exp})
			},
			want: Claims{Subject: "u2", Role: RoleUser, Plan: "corporate", ExpiresAt: exp},
		},
		{
			name: "minted user token without a plan",
			header: func(t *testing.T) string {
				return "Bearer " + mint(t, Claims{Subject: "u3", Role: RoleUser, ExpiresAt: exp})
			},
			want: Claims{Subject: "u3", Role: RoleUser, Plan: "free", ExpiresAt: exp},
		},
		{
			name: "minted admin token",
			header: func(t *testing.T) string {
				return "Bearer " + mint(t, Claims{Subject: "ops", Role: RoleAdmin, ExpiresAt: exp})
			},
			want: Claims{Subject: "ops", Role: RoleAdmin, ExpiresAt: exp},
		},
	}
	v := NewVerifier(tokenSecret, func() time.Time { return now })
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := v.Verify(tt.header(t))
			if err != nil {
				t.Fatalf("Verify: %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("claims (-want +got):\n%s", diff)
			}
		})
	}
}

func mint(t *testing.T, c Claims) string {
	t.Helper()
	s, err := Mint(tokenSecret, c)
	if err != nil {
		t.Fatalf("Mint: %v", err)
	}
	return s
}

func TestVerifierWithoutSecretRefusesAll(t *testing.T) {
	t.Parallel()
	for _, key := range [][]byte{nil, {}} {
		v := NewVerifier(key, func() time.Time { return now })
		forgedEmpty := forged(`{"alg":"HS256","typ":"JWT"}`, `{"sub":"u1","role":"admin","exp":9999999999}`, key)
		for _, tok := range []string{forgedEmpty, signed(t, jwt.SigningMethodHS256, tokenSecret, claims(nil))} {
			if c, err := v.Verify("Bearer " + tok); !errors.Is(err, ErrUnauthorized) {
				t.Errorf("Verify with secret %q = %+v, %v; want ErrUnauthorized", key, c, err)
			}
		}
	}
}

func TestVerifierCopiesSecret(t *testing.T) {
	t.Parallel()
	key := []byte("mutable-secret")
	v := NewVerifier(key, func() time.Time { return now })
	tok := signed(t, jwt.SigningMethodHS256, []byte("mutable-secret"), claims(nil))
	copy(key, "XXXXXXXXXXXXXX")
	if _, err := v.Verify("Bearer " + tok); err != nil {
		t.Errorf("changing the caller's slice changed the Verifier: %v", err)
	}
}

func TestMintRefuses(t *testing.T) {
	t.Parallel()
	exp := now.Add(time.Hour)
	tests := []struct {
		name   string
		secret []byte
		c      Claims
	}{
		{"no secret", nil, Claims{Subject: "u1", Role: RoleUser, ExpiresAt: exp}},
		{"no subject", tokenSecret, Claims{Role: RoleUser, ExpiresAt: exp}},
		{"subject with a slash", tokenSecret, Claims{Subject: "u/1", Role: RoleUser, ExpiresAt: exp}},
		{"no role", tokenSecret, Claims{Subject: "u1", ExpiresAt: exp}},
		{"unknown role", tokenSecret, Claims{Subject: "u1", Role: "root", ExpiresAt: exp}},
		{"unknown plan", tokenSecret, Claims{Subject: "u1", Role: RoleUser, Plan: "gold", ExpiresAt: exp}},
		{"no expiry", tokenSecret, Claims{Subject: "u1", Role: RoleUser}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if tok, err := Mint(tt.secret, tt.c); err == nil {
				t.Errorf("Mint = %q, nil; want an error", tok)
			}
		})
	}
}

func TestMintedTokenIsHS256(t *testing.T) {
	t.Parallel()
	tok := mint(t, Claims{Subject: "u1", Role: RoleUser, ExpiresAt: now.Add(time.Hour)})
	header, err := base64.RawURLEncoding.DecodeString(strings.Split(tok, ".")[0])
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(`{"alg":"HS256","typ":"JWT"}`, string(header)); diff != "" {
		t.Errorf("header (-want +got):\n%s", diff)
	}
	// A past expiry mints (tests need expired tokens) and is then refused.
	old := mint(t, Claims{Subject: "u1", Role: RoleUser, ExpiresAt: now.Add(-time.Hour)})
	if _, err := NewVerifier(tokenSecret, func() time.Time { return now }).Verify("Bearer " + old); !errors.Is(err, ErrUnauthorized) {
		t.Errorf("expired minted token: %v", err)
	}
}

// TestVerifierFuncAsksForTheKeyOnlyWhenNeeded: a header that cannot hold
// a token is refused without the key (a request that needs no key never
// waits for its read); a key that cannot be had is not a refusal of the
// token; the key it returns verifies.
func TestVerifierFuncAsksForTheKeyOnlyWhenNeeded(t *testing.T) {
	t.Parallel()
	var asked int
	keyErr := errors.New("reading secret arn:jwt: timeout")
	var answer func() ([]byte, error)
	v := NewVerifierFunc(func(context.Context) ([]byte, error) { asked++; return answer() }, func() time.Time { return now })
	tok := signed(t, jwt.SigningMethodHS256, tokenSecret, claims(nil))

	for _, h := range []string{"", "Bearer ", "Basic abc", "Bearer " + strings.Repeat("a", MaxTokenLength+1)} {
		if _, err := v.VerifyContext(context.Background(), h); !errors.Is(err, ErrUnauthorized) {
			t.Errorf("header %.20q: %v, want ErrUnauthorized", h, err)
		}
	}
	if asked != 0 {
		t.Errorf("the key was asked for %d times for headers without a token", asked)
	}

	answer = func() ([]byte, error) { return nil, keyErr }
	_, err := v.VerifyContext(context.Background(), "Bearer "+tok)
	if !errors.Is(err, ErrKeyUnavailable) || !errors.Is(err, keyErr) || errors.Is(err, ErrUnauthorized) {
		t.Errorf("key unavailable: %v, want ErrKeyUnavailable wrapping the read's error, not ErrUnauthorized", err)
	}

	answer = func() ([]byte, error) { return tokenSecret, nil }
	c, err := v.VerifyContext(context.Background(), "Bearer "+tok)
	if err != nil || c.Subject != "u1" {
		t.Errorf("with the key: %+v, %v", c, err)
	}
	if asked != 2 {
		t.Errorf("the key was asked for %d times, want 2", asked)
	}
}
