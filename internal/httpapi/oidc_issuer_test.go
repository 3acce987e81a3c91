// A local OpenID Connect issuer for the HTTP functions' tests: a discovery
// document and a JSON Web Key Set served by httptest, and tokens signed
// with its RS256 and ES256 keys, so that the functions' token checks are
// tested against a real key set fetched over HTTP.

package httpapi_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"math/big"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/conveyor/conveyor/internal/config"
)

// Key ids of the issuer's two keys.
const (
	kidRSA = "rsa-1"
	kidEC  = "ec-1"
)

// oidcIssuer is a running issuer; it stops when the test ends.
type oidcIssuer struct {
	// URL is the issuer (its tokens' iss).
	URL string
	rsa *rsa.PrivateKey
	ec  *ecdsa.PrivateKey
	// KeySetFetches counts the requests for the key set.
	KeySetFetches atomic.Int32
}

// newIssuer starts an issuer with a fresh RSA (2048) and P-256 key.
func newIssuer(t testing.TB) *oidcIssuer {
	t.Helper()
	rk, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	ek, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	i := &oidcIssuer{rsa: rk, ec: ek}
	enc := base64.RawURLEncoding.EncodeToString
	point, err := ek.PublicKey.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	keys := []map[string]string{
		{"kty": "RSA", "kid": kidRSA, "use": "sig", "alg": "RS256", "n": enc(rk.N.Bytes()), "e": enc(big.NewInt(int64(rk.E)).Bytes())},
		{"kty": "EC", "kid": kidEC, "use": "sig", "alg": "ES256", "crv": "P-256", "x": enc(point[1:33]), "y": enc(point[33:])},
	}
	mux := http.NewServeMux()
	var srv *httptest.Server
	mux.HandleFunc("GET /.well-known/openid-configuration", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]string{"issuer": srv.URL, "jwks_uri": srv.URL + "/jwks.json"})
	})
	mux.HandleFunc("GET /jwks.json", func(w http.ResponseWriter, _ *http.Request) {
		i.KeySetFetches.Add(1)
		_ = json.NewEncoder(w).Encode(map[string]any{"keys": keys})
	})
	srv = httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	i.URL = srv.URL
	return i
}

// Vars are the configuration variables that make a function accept this
// issuer's tokens for audience.
func (i *oidcIssuer) Vars(audience string) map[string]string {
	return map[string]string{config.VarOIDCIssuer: i.URL, config.VarOIDCAudience: audience}
}

// Token signs claims with the issuer's RSA key (alg RS256) or, with es
// true, its EC key (ES256). iss, iat and exp (an hour from now) are added
// unless claims sets them; a nil value removes a claim.
func (i *oidcIssuer) Token(t testing.TB, es bool, claims map[string]any) string {
	t.Helper()
	c := jwt.MapClaims{"iss": i.URL, "iat": time.Now().Unix(), "exp": time.Now().Add(time.Hour).Unix()}
	for k, v := range claims {
		if v == nil {
			delete(c, k)
			continue
		}
		c[k] = v
	}
	m, kid, key := jwt.SigningMethod(jwt.SigningMethodRS256), kidRSA, any(i.rsa)
	if es {
		m, kid, key = jwt.SigningMethodES256, kidEC, i.ec
	}
	tok := jwt.NewWithClaims(m, c)
	tok.Header["kid"] = kid
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
