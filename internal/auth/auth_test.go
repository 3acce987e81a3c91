package auth

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

var secret = []byte("test-secret-0123456789abcdef")

func signed(t *testing.T, m jwt.SigningMethod, key any, claims jwt.MapClaims) string {
	t.Helper()
	s, err := jwt.NewWithClaims(m, claims).SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestVerify(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	v := NewVerifier(secret, func() time.Time { return now })
	good := jwt.MapClaims{"sub": "u1", "role": "user", "plan": "pro", "exp": now.Add(time.Hour).Unix()}
	with := func(k string, val any) jwt.MapClaims {
		c := jwt.MapClaims{}
		for kk, vv := range good {
			c[kk] = vv
		}
		if val == nil {
			delete(c, k)
		} else {
			c[k] = val
		}
		return c
	}
	valid := signed(t, jwt.SigningMethodHS256, secret, good)
	parts := strings.Split(valid, ".")
	none := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","typ":"JWT"}`)) + "." + parts[1] + "."
	rs256Header := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"RS256","typ":"JWT"}`)) + "." + parts[1] + "." + parts[2]
	tampered := parts[0] + "." + base64.RawURLEncoding.EncodeToString([]byte(`{"sub":"admin","role":"admin","exp":9999999999}`)) + "." + parts[2]

	bad := map[string]string{
		"alg none":         "Bearer " + none,
		"RS256 header":     "Bearer " + rs256Header,
		"HS512":            "Bearer " + signed(t, jwt.SigningMethodHS512, secret, good),
		"wrong secret":     "Bearer " + signed(t, jwt.SigningMethodHS256, []byte("other"), good),
		"tampered payload": "Bearer " + tampered,
		"expired":          "Bearer " + signed(t, jwt.SigningMethodHS256, secret, with("exp", now.Add(-time.Hour).Unix())),
		"no exp":           "Bearer " + signed(t, jwt.SigningMethodHS256, secret, with("exp", nil)),
		"no sub":           "Bearer " + signed(t, jwt.SigningMethodHS256, secret, with("sub", nil)),
		"unknown role":     "Bearer " + signed(t, jwt.SigningMethodHS256, secret, with("role", "root")),
		"unknown plan":     "Bearer " + signed(t, jwt.SigningMethodHS256, secret, with("plan", "platinum")),
		"garbage":          "Bearer not.a.jwt",
		"no bearer":        valid,
		"empty":            "",
	}
	for name, h := range bad {
		if c, err := v.Verify(h); !errors.Is(err, ErrUnauthorized) {
			t.Errorf("%s: Verify = %+v, %v; want ErrUnauthorized", name, c, err)
		}
	}
	c, err := v.Verify("Bearer " + valid)
	if err != nil || c.Subject != "u1" || c.Role != RoleUser || c.Plan != "pro" {
		t.Errorf("valid token: %+v, %v", c, err)
	}
	// Inside the leeway an just-expired token still passes.
	skew := signed(t, jwt.SigningMethodHS256, secret, with("exp", now.Add(-10*time.Second).Unix()))
	if _, err := v.Verify("Bearer " + skew); err != nil {
		t.Errorf("token inside leeway refused: %v", err)
	}
	admin, _ := Mint(secret, Claims{Subject: "ops", Role: RoleAdmin, ExpiresAt: now.Add(time.Hour)})
	if c, err := v.Verify("Bearer " + admin); err != nil || c.Role != RoleAdmin {
		t.Errorf("minted admin token: %+v, %v", c, err)
	}
	user, _ := Mint(secret, Claims{Subject: "u2", Role: RoleUser, ExpiresAt: now.Add(time.Hour)})
	if c, _ := v.Verify("Bearer " + user); c.Plan != "free" {
		t.Errorf("user without plan: plan = %q, want free", c.Plan)
	}
}
