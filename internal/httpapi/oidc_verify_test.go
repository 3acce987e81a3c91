package httpapi

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/go-cmp/cmp"
)

// idp is a local OpenID Connect issuer: a discovery document and a key
// set that a test can change (rotation), counting the fetches.
type idp struct {
	srv      *httptest.Server
	mu       sync.Mutex
	keys     []map[string]string // the JWKS "keys"
	jwksHits atomic.Int32
	discHits atomic.Int32
	down     atomic.Bool
	issuer   string // what discovery says (default the server's URL)
}

func newIDP(t *testing.T) *idp {
	t.Helper()
	p := &idp{}
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+DiscoveryPath, func(w http.ResponseWriter, _ *http.Request) {
		p.discHits.Add(1)
		iss := p.issuer
		if iss == "" {
			iss = p.srv.URL
		}
		_ = json.NewEncoder(w).Encode(map[string]string{"issuer": iss, "jwks_uri": p.srv.URL + "/keys"})
	})
	mux.HandleFunc("GET /keys", func(w http.ResponseWriter, _ *http.Request) {
		p.jwksHits.Add(1)
		if p.down.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		_ = json.NewEncoder(w).Encode(map[string]any{"keys": p.keys})
	})
	p.srv = httptest.NewServer(mux)
	t.Cleanup(p.srv.Close)
	return p
}

// publish sets the key set to keys.
func (p *idp) publish(keys ...map[string]string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.keys = keys
}

func enc(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

func rsaKey(t *testing.T) *rsa.PrivateKey {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func ecKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func rsaJWK(kid string, k *rsa.PrivateKey) map[string]string {
	return map[string]string{"kty": "RSA", "kid": kid, "use": "sig", "alg": "RS256",
		"n": enc(k.N.Bytes()), "e": enc(big.NewInt(int64(k.E)).Bytes())}
}

func ecJWK(kid string, k *ecdsa.PrivateKey) map[string]string {
	b, err := k.PublicKey.Bytes() // 0x04 || X || Y
	if err != nil {
		panic(err)
	}
	return map[string]string{"kty": "EC", "kid": kid, "crv": "P-256", "x": enc(b[1:33]), "y": enc(b[33:])}
}

// clock is a settable clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// oidcBundle is one test's issuer, verifier and clock.
type oidcBundle struct {
	idp   *idp
	clock *clock
	v     *Verifier
	iss   string
}

const audience = "conveyor-api"

func setupOIDC(t *testing.T, mutate func(*OIDCConfig)) *oidcBundle {
	t.Helper()
	p := newIDP(t)
	c := &clock{t: now}
	cfg := OIDCConfig{Issuer: p.srv.URL, Audiences: []string{"other-api", audience},
		CacheTTL: time.Hour, MinRefresh: time.Minute, HTTPClient: p.srv.Client()}
	if mutate != nil {
		mutate(&cfg)
	}
	v, err := NewVerifierWith(VerifierOptions{Key: func(context.Context) ([]byte, error) { return tokenSecret, nil }, OIDC: &cfg, Now: c.now})
	if err != nil {
		t.Fatal(err)
	}
	return &oidcBundle{idp: p, clock: c, v: v, iss: p.srv.URL}
}

// userClaims are an issuer's valid claims, changed by changes (nil deletes).
func (b *oidcBundle) userClaims(changes map[string]any) jwt.MapClaims {
	return changed(jwt.MapClaims{"iss": b.iss, "aud": []string{audience}, "sub": "auth0|u42",
		"exp": b.clock.now().Add(time.Hour).Unix(), "iat": b.clock.now().Unix()}, changes)
}

func sign(t *testing.T, m jwt.SigningMethod, kid string, key any, claims jwt.MapClaims) string {
	t.Helper()
	tok := jwt.NewWithClaims(m, claims)
	if kid != "" {
		tok.Header["kid"] = kid
	}
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func (b *oidcBundle) verify(tok string) (Claims, error) {
	return b.v.VerifyContext(context.Background(), "Bearer "+tok)
}

func wantRefused(t *testing.T, err error, reason string) {
	t.Helper()
	var ae *TokenError
	if !errors.As(err, &ae) || !errors.Is(err, ErrUnauthorized) || errors.Is(err, ErrKeyUnavailable) {
		t.Fatalf("error %v, want a refusal (%q)", err, reason)
	}
	if ae.Reason != reason {
		t.Fatalf("refused for %q, want %q", ae.Reason, reason)
	}
}

// TestOIDCAcceptsRS256AndES256 checks both algorithms, the key set found
// by discovery and by a configured URL, and the claims read from the
// defaults: a user without a plan is free; HS256 tokens still work beside.
func TestOIDCAcceptsRS256AndES256(t *testing.T) {
	t.Parallel()
	for _, discovered := range []bool{true, false} {
		t.Run(fmt.Sprintf("discovery=%v", discovered), func(t *testing.T) {
			t.Parallel()
			var jwksURL string
			b := setupOIDC(t, func(c *OIDCConfig) {
				if !discovered {
					jwksURL = strings.TrimSuffix(c.Issuer, "/") + "/keys"
					c.JWKSURL = jwksURL
				}
			})
			rk, ek := rsaKey(t), ecKey(t)
			b.idp.publish(rsaJWK("r1", rk), ecJWK("e1", ek))

			got, err := b.verify(sign(t, jwt.SigningMethodRS256, "r1", rk, b.userClaims(map[string]any{"role": "admin"})))
			if err != nil {
				t.Fatal(err)
			}
			want := Claims{Subject: "auth0|u42", Role: RoleAdmin, ExpiresAt: now.Add(time.Hour)}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("RS256 claims (-want +got):\n%s", diff)
			}
			got, err = b.verify(sign(t, jwt.SigningMethodES256, "e1", ek, b.userClaims(map[string]any{"aud": "other-api"})))
			if err != nil {
				t.Fatal(err)
			}
			want = Claims{Subject: "auth0|u42", Role: RoleUser, Plan: PlanDefault, ExpiresAt: now.Add(time.Hour)}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("ES256 claims (-want +got):\n%s", diff)
			}
			if _, err := b.verify(signed(t, jwt.SigningMethodHS256, tokenSecret, claims(nil))); err != nil {
				t.Errorf("an HS256 token beside the issuer: %v", err)
			}
			wantDisc := int32(1)
			if !discovered {
				wantDisc = 0
			}
			if d, k := b.idp.discHits.Load(), b.idp.jwksHits.Load(); d != wantDisc || k != 1 {
				t.Errorf("discovery fetched %d times, key set %d times; want %d and 1 (cached)", d, k, wantDisc)
			}
		})
	}
}

// TestOIDCKeyRotation: a key that appears after the set was fetched is
// accepted once a refetch is allowed (MinRefresh after the last), and
// refused until then; a key dropped from the set is refused after the
// TTL's refetch; an old key still published keeps working.
func TestOIDCKeyRotation(t *testing.T) {
	t.Parallel()
	b := setupOIDC(t, nil)
	k1, k2 := rsaKey(t), ecKey(t)
	b.idp.publish(rsaJWK("k1", k1))
	if _, err := b.verify(sign(t, jwt.SigningMethodRS256, "k1", k1, b.userClaims(nil))); err != nil {
		t.Fatal(err)
	}
	b.idp.publish(rsaJWK("k1", k1), ecJWK("k2", k2)) // the issuer rotates in k2

	b.clock.add(30 * time.Second) // within MinRefresh of the first fetch
	tok2 := func() string { return sign(t, jwt.SigningMethodES256, "k2", k2, b.userClaims(nil)) }
	_, err := b.verify(tok2())
	wantRefused(t, err, "unknown signing key")
	if n := b.idp.jwksHits.Load(); n != 1 {
		t.Fatalf("%d key set fetches, want 1: a refetch within MinRefresh", n)
	}

	b.clock.add(31 * time.Second) // MinRefresh has passed
	if _, err := b.verify(tok2()); err != nil {
		t.Fatalf("the rotated-in key after a refetch: %v", err)
	}
	if n := b.idp.jwksHits.Load(); n != 2 {
		t.Fatalf("%d key set fetches, want 2", n)
	}

	b.idp.publish(ecJWK("k2", k2)) // k1 retired
	b.clock.add(59 * time.Minute)  // within the TTL of the second fetch
	if _, err := b.verify(sign(t, jwt.SigningMethodRS256, "k1", k1, b.userClaims(nil))); err != nil {
		t.Fatalf("a retired key within the TTL of the set that held it: %v", err)
	}
	b.clock.add(2 * time.Minute) // past the TTL: the next token refetches
	_, err = b.verify(sign(t, jwt.SigningMethodRS256, "k1", k1, b.userClaims(nil)))
	wantRefused(t, err, "unknown signing key")
	if _, err := b.verify(tok2()); err != nil {
		t.Fatalf("the current key after the TTL refetch: %v", err)
	}
	if n := b.idp.jwksHits.Load(); n != 3 {
		t.Errorf("%d key set fetches, want 3", n)
	}
}

// TestOIDCUnknownKidsCannotHammerTheIssuer: a flood of tokens naming
// unknown keys, concurrent and sequential, makes at most one fetch per
// MinRefresh, and each is refused.
func TestOIDCUnknownKidsCannotHammerTheIssuer(t *testing.T) {
	t.Parallel()
	b := setupOIDC(t, nil)
	k := rsaKey(t)
	b.idp.publish(rsaJWK("k1", k))
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Go(func() {
			_, err := b.verify(sign(t, jwt.SigningMethodRS256, fmt.Sprintf("nope-%d", i), k, b.userClaims(nil)))
			if !errors.Is(err, ErrUnauthorized) {
				t.Errorf("unknown kid %d: %v, want a refusal", i, err)
			}
		})
	}
	wg.Wait()
	for i := range 50 {
		b.clock.add(time.Second)
		_, err := b.verify(sign(t, jwt.SigningMethodRS256, fmt.Sprintf("later-%d", i), k, b.userClaims(nil)))
		wantRefused(t, err, "unknown signing key")
	}
	// 50 s of unknown kids after the first fetch, then one at 61 s.
	if n := b.idp.jwksHits.Load(); n != 1 {
		t.Errorf("%d key set fetches for 100 unknown kids within a minute, want 1", n)
	}
	b.clock.add(11 * time.Second)
	_, err := b.verify(sign(t, jwt.SigningMethodRS256, "after", k, b.userClaims(nil)))
	wantRefused(t, err, "unknown signing key")
	if n := b.idp.jwksHits.Load(); n != 2 {
		t.Errorf("%d key set fetches after MinRefresh, want 2", n)
	}
}

// TestOIDCRefuses: alg confusion in every direction, and every claim the
// issuer's tokens must get right.
func TestOIDCRefuses(t *testing.T) {
	t.Parallel()
	b := setupOIDC(t, nil)
	rk, ek := rsaKey(t), ecKey(t)
	b.idp.publish(rsaJWK("r1", rk), ecJWK("e1", ek))
	pubDER, err := x509.MarshalPKIXPublicKey(&rk.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	other := rsaKey(t)
	at := func(d time.Duration) int64 { return now.Add(d).Unix() }
	hsPayload := func(c jwt.MapClaims) string { raw, _ := json.Marshal(c); return string(raw) }

	tests := []struct {
		name, token, reason string
	}{
		{"HS256 signed with the issuer's RSA public key, its kid and iss",
			forged(`{"alg":"HS256","typ":"JWT","kid":"r1"}`, hsPayload(b.userClaims(map[string]any{"role": "admin"})), pubDER),
			"unacceptable signing method"},
		{"HS256 signed with the RSA public key, no iss",
			forged(`{"alg":"HS256","typ":"JWT","kid":"r1"}`, hsPayload(b.userClaims(map[string]any{"iss": nil, "role": "admin"})), pubDER),
			"bad signature"},
		{"HS256 with the environment's secret but the issuer's iss",
			sign(t, jwt.SigningMethodHS256, "", tokenSecret, b.userClaims(nil)), "unacceptable signing method"},
		{"RS256 header, HMAC signature made with the HS256 secret",
			forged(`{"alg":"RS256","typ":"JWT","kid":"r1"}`, hsPayload(b.userClaims(nil)), tokenSecret), "bad signature"},
		{"ES256 token whose kid names the RSA key",
			sign(t, jwt.SigningMethodES256, "r1", ek, b.userClaims(nil)), "the signing key does not match the token's algorithm"},
		{"RS256 token whose kid names the EC key",
			sign(t, jwt.SigningMethodRS256, "e1", rk, b.userClaims(nil)), "the signing key does not match the token's algorithm"},
		{"alg none", b64(`{"alg":"none","kid":"r1"}`) + "." + b64(hsPayload(b.userClaims(nil))) + ".", "unacceptable signing method"},
		{"RS384 with the right key", sign(t, jwt.SigningMethodRS384, "r1", rk, b.userClaims(nil)), "unacceptable signing method"},
		{"PS256 with the right key", sign(t, jwt.SigningMethodPS256, "r1", rk, b.userClaims(nil)), "unacceptable signing method"},
		{"signed by another key under a known kid", sign(t, jwt.SigningMethodRS256, "r1", other, b.userClaims(nil)), "bad signature"},
		{"no kid", sign(t, jwt.SigningMethodRS256, "", rk, b.userClaims(nil)), "kid is required"},
		{"wrong audience", sign(t, jwt.SigningMethodRS256, "r1", rk, b.userClaims(map[string]any{"aud": "someone-else"})), "wrong audience"},
		{"no audience", sign(t, jwt.SigningMethodRS256, "r1", rk, b.userClaims(map[string]any{"aud": nil})), "wrong audience"},
		{"wrong issuer", sign(t, jwt.SigningMethodRS256, "r1", rk, b.userClaims(map[string]any{"iss": "https://evil.example"})), "wrong issuer"},
		{"no issuer", sign(t, jwt.SigningMethodRS256, "r1", rk, b.userClaims(map[string]any{"iss": nil})), "wrong issuer"},
		{"expired beyond the leeway", sign(t, jwt.SigningMethodRS256, "r1", rk, b.userClaims(map[string]any{"exp": at(-Leeway - time.Second)})), "token expired"},
		{"no exp", sign(t, jwt.SigningMethodRS256, "r1", rk, b.userClaims(map[string]any{"exp": nil})), "exp is required"},
		{"nbf beyond the leeway", sign(t, jwt.SigningMethodRS256, "r1", rk, b.userClaims(map[string]any{"nbf": at(Leeway + time.Minute)})), "token not valid yet"},
		{"iat in the future beyond the leeway", sign(t, jwt.SigningMethodRS256, "r1", rk, b.userClaims(map[string]any{"iat": at(Leeway + time.Minute)})), "token issued in the future"},
		{"no sub", sign(t, jwt.SigningMethodRS256, "r1", rk, b.userClaims(map[string]any{"sub": nil})), "sub is required"},
		{"unknown role", sign(t, jwt.SigningMethodRS256, "r1", rk, b.userClaims(map[string]any{"role": "root"})), "unknown role"},
		{"role of another type", sign(t, jwt.SigningMethodRS256, "r1", rk, b.userClaims(map[string]any{"role": 7})), "the role claim is neither a string nor an array"},
		{"unknown plan", sign(t, jwt.SigningMethodRS256, "r1", rk, b.userClaims(map[string]any{"plan": "platinum"})), "unknown plan"},
		{"plan of another type", sign(t, jwt.SigningMethodRS256, "r1", rk, b.userClaims(map[string]any{"plan": []string{"pro"}})), "the plan claim is not a string"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := b.verify(tt.token)
			wantRefused(t, err, tt.reason)
		})
	}
	// Within the leeway, the time claims pass.
	if _, err := b.verify(sign(t, jwt.SigningMethodRS256, "r1", rk, b.userClaims(map[string]any{
		"exp": at(-Leeway / 2), "nbf": at(Leeway / 2), "iat": at(Leeway / 2)}))); err != nil {
		t.Errorf("time claims within the leeway: %v", err)
	}
}

// TestOIDCClaimNames: role and plan from namespaced and nested claims,
// role from a group list, defaults when absent.
func TestOIDCClaimNames(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name             string
		roleClaim, plan  string
		extra            map[string]any
		wantRole         Role
		wantPlan         string
		wantRefuseReason string
	}{
		{name: "namespaced (Auth0)", roleClaim: "https://conveyor.example/role", plan: "https://conveyor.example/plan",
			extra:    map[string]any{"https://conveyor.example/role": "service", "https://conveyor.example/plan": "enterprise", "role": "admin"},
			wantRole: RoleService, wantPlan: "enterprise"},
		{name: "nested path (Keycloak)", roleClaim: "realm_access.roles", plan: "app_metadata.plan",
			extra:    map[string]any{"realm_access": map[string]any{"roles": []string{"offline_access", "service"}}, "app_metadata": map[string]any{"plan": "pro"}},
			wantRole: RoleService, wantPlan: "pro"},
		{name: "group list (Cognito), admin wins", roleClaim: "cognito:groups", plan: "custom:plan",
			extra:    map[string]any{"cognito:groups": []string{"user", "admin", "editors"}, "custom:plan": "standard"},
			wantRole: RoleAdmin, wantPlan: "standard"},
		{name: "group list without a known role is a user", roleClaim: "cognito:groups",
			extra:    map[string]any{"cognito:groups": []string{"editors"}},
			wantRole: RoleUser, wantPlan: PlanDefault},
		{name: "missing role and plan", wantRole: RoleUser, wantPlan: PlanDefault},
		{name: "a missing nested claim is missing", roleClaim: "app_metadata.role", extra: map[string]any{"app_metadata": "x"},
			wantRole: RoleUser, wantPlan: PlanDefault},
		{name: "a service without a plan has none", extra: map[string]any{"role": "service"}, wantRole: RoleService},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setupOIDC(t, func(c *OIDCConfig) { c.RoleClaim, c.PlanClaim = tt.roleClaim, tt.plan })
			k := ecKey(t)
			b.idp.publish(ecJWK("k", k))
			got, err := b.verify(sign(t, jwt.SigningMethodES256, "k", k, b.userClaims(tt.extra)))
			if err != nil {
				t.Fatal(err)
			}
			if got.Role != tt.wantRole || got.Plan != tt.wantPlan {
				t.Errorf("role %q plan %q, want %q %q", got.Role, got.Plan, tt.wantRole, tt.wantPlan)
			}
		})
	}
}

// TestOIDCIssuerUnreachable: a key set that cannot be fetched leaves the
// token unjudged (ErrKeyUnavailable, a 503 — not a 401), rate-limited
// too; once it can be, tokens pass. A known key outlives an outage past
// its TTL. A discovery document naming another issuer is not trusted.
func TestOIDCIssuerUnreachable(t *testing.T) {
	t.Parallel()
	b := setupOIDC(t, nil)
	k := rsaKey(t)
	b.idp.publish(rsaJWK("k", k))
	b.idp.down.Store(true)
	tok := func() string { return sign(t, jwt.SigningMethodRS256, "k", k, b.userClaims(nil)) }
	for range 3 {
		_, err := b.verify(tok())
		if !errors.Is(err, ErrKeyUnavailable) || errors.Is(err, ErrUnauthorized) {
			t.Fatalf("issuer down: %v, want ErrKeyUnavailable only", err)
		}
	}
	if n := b.idp.jwksHits.Load(); n != 1 {
		t.Errorf("%d fetches while down within MinRefresh, want 1", n)
	}
	b.idp.down.Store(false)
	b.clock.add(time.Minute)
	if _, err := b.verify(tok()); err != nil {
		t.Fatalf("issuer back: %v", err)
	}
	b.idp.down.Store(true)
	b.clock.add(2 * time.Hour) // the set is stale and cannot be refreshed
	if _, err := b.verify(tok()); err != nil {
		t.Errorf("a known key while the issuer is down past the TTL: %v", err)
	}

	bad := setupOIDC(t, nil)
	bad.idp.issuer = "https://impostor.example"
	bad.idp.publish(rsaJWK("k", k))
	_, err := bad.verify(sign(t, jwt.SigningMethodRS256, "k", k, bad.userClaims(nil)))
	if !errors.Is(err, ErrKeyUnavailable) || !strings.Contains(err.Error(), "impostor") {
		t.Errorf("discovery naming another issuer: %v", err)
	}
	if n := bad.idp.jwksHits.Load(); n != 0 {
		t.Errorf("the key set of an untrusted discovery document was fetched %d times", n)
	}
}

// TestOIDCConfigRefused: what NewVerifierWith refuses, and keys a set holds that are
// never used.
func TestOIDCConfigRefused(t *testing.T) {
	t.Parallel()
	for name, c := range map[string]OIDCConfig{
		"no audience":       {Issuer: "https://idp.example"},
		"http issuer":       {Issuer: "http://idp.example", Audiences: []string{"a"}},
		"relative issuer":   {Issuer: "idp.example", Audiences: []string{"a"}},
		"http JWKS URL":     {Issuer: "https://idp.example", Audiences: []string{"a"}, JWKSURL: "http://idp.example/keys"},
		"negative TTL":      {Issuer: "https://idp.example", Audiences: []string{"a"}, CacheTTL: -time.Second},
		"an empty audience": {Issuer: "https://idp.example", Audiences: []string{" "}},
	} {
		if _, err := NewVerifierWith(VerifierOptions{OIDC: &c}); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := NewVerifierWith(VerifierOptions{OIDC: &OIDCConfig{Issuer: "http://127.0.0.1:9", Audiences: []string{"a"}}}); err != nil {
		t.Errorf("http on loopback: %v", err)
	}

	small, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	p384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	b384, _ := p384.PublicKey.Bytes()
	big := rsaKey(t)
	for name, k := range map[string]map[string]string{
		"symmetric":     {"kty": "oct", "kid": "x", "k": enc(tokenSecret)},
		"RSA 1024":      rsaJWK("x", small),
		"encryption":    func() map[string]string { m := rsaJWK("x", big); m["use"] = "enc"; return m }(),
		"P-384":         {"kty": "EC", "kid": "x", "crv": "P-384", "x": enc(b384[1:49]), "y": enc(b384[49:])},
		"off the curve": {"kty": "EC", "kid": "x", "crv": "P-256", "x": enc(make([]byte, 32)), "y": enc(append(make([]byte, 31), 1))},
		"no kid":        func() map[string]string { m := rsaJWK("", big); return m }(),
		"RS512 alg":     func() map[string]string { m := rsaJWK("x", big); m["alg"] = "RS512"; return m }(),
	} {
		raw, _ := json.Marshal(k)
		if _, _, ok := parseJWK(raw); ok {
			t.Errorf("%s key kept", name)
		}
	}
}
