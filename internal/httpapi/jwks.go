package httpapi

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Defaults of an OIDCConfig's zero fields (internal/config documents the
// variables that set them).
const (
	// JWKSCacheTTLDefault is how long a fetched key set is trusted before
	// the next token that needs it fetches it again.
	JWKSCacheTTLDefault = time.Hour
	// JWKSMinRefreshDefault is the least time between two fetches of the
	// key set (discovery included): a token naming a key the set lacks
	// makes a fetch only when the last one is at least this old, so
	// unknown key ids cannot hammer the identity provider.
	JWKSMinRefreshDefault = time.Minute
	// JWKSFetchTimeoutDefault bounds one fetch (discovery and key set).
	JWKSFetchTimeoutDefault = 5 * time.Second
	// maxJWKSBody bounds a discovery document or key set read.
	maxJWKSBody = 1 << 20
	// minRSABits is the smallest RSA modulus accepted from a key set.
	minRSABits = 2048
)

// DiscoveryPath is where an OIDC issuer publishes its configuration,
// under the issuer URL.
const DiscoveryPath = "/.well-known/openid-configuration"

// keySet is an issuer's JSON Web Key Set, fetched on first need and kept:
// refetched when older than ttl, or when a token names a key id the set
// lacks — never more often than once per minRefresh. Concurrent callers
// share one fetch. It starts no goroutine: the caller that needs a fetch
// makes it (bounded by timeout, not by its own request's deadline, so its
// result serves the callers waiting with it).
type keySet struct {
	issuer     string
	jwksURL    string // "" until discovered (when not configured)
	client     *http.Client
	ttl        time.Duration
	minRefresh time.Duration
	timeout    time.Duration
	now        func() time.Time

	mu        sync.Mutex
	keys      map[string][]jwk // by kid; nil until a fetch succeeded
	fetchedAt time.Time        // of the keys held
	triedAt   time.Time        // of the last fetch, failed or not
	lastErr   error            // of the last fetch
	inflight  chan struct{}    // closed when the fetch in flight ends
	fetches   int              // fetches made (tests)
}

// jwk is one usable verification key of the set.
type jwk struct {
	alg string // the key's "alg", or "" when it names none
	key any    // *rsa.PublicKey or *ecdsa.PublicKey (P-256)
}

// errUnknownKid refuses a token whose kid the (fresh) set lacks.
var errUnknownKid = refuse("unknown signing key")

// key returns the public key named kid, usable with alg (RS256 or ES256).
// Its errors are refusals (*TokenError) or match ErrKeyUnavailable (the set
// could not be had: the token was not judged).
func (s *keySet) key(ctx context.Context, kid, alg string) (any, error) {
	for {
		s.mu.Lock()
		now := s.now()
		ks, known := s.keys[kid]
		fresh := s.keys != nil && now.Sub(s.fetchedAt) < s.ttl
		if known && fresh {
			s.mu.Unlock()
			return pick(ks, alg)
		}
		if wait := s.inflight; wait != nil {
			s.mu.Unlock()
			select {
			case <-wait:
				continue // judge again with what that fetch brought
			case <-ctx.Done():
				return nil, fmt.Errorf("%w: %w", ErrKeyUnavailable, ctx.Err())
			}
		}
		if !s.triedAt.IsZero() && now.Sub(s.triedAt) < s.minRefresh {
			// Too soon to fetch again: judge with what is held.
			defer s.mu.Unlock()
			switch {
			case known:
				return pick(ks, alg) // stale, but the latest the issuer gave
			case s.keys == nil:
				return nil, fmt.Errorf("%w: the issuer's key set could not be fetched: %w", ErrKeyUnavailable, s.lastErr)
			}
			return nil, errUnknownKid
		}
		done := make(chan struct{})
		s.inflight, s.triedAt = done, now
		s.fetches++
		s.mu.Unlock()

		keys, err := s.fetch(ctx)

		s.mu.Lock()
		s.lastErr = err
		if err == nil {
			s.keys, s.fetchedAt = keys, s.now()
		}
		s.inflight = nil
		close(done)
		ks, known = s.keys[kid]
		haveKeys := s.keys != nil
		s.mu.Unlock()
		switch {
		case known:
			// Fetched, or the fetch failed and the last set still names it.
			return pick(ks, alg)
		case err != nil:
			return nil, fmt.Errorf("%w: the issuer's key set could not be fetched: %w", ErrKeyUnavailable, err)
		case haveKeys:
			return nil, errUnknownKid
		}
		return nil, errUnknownKid
	}
}

// pick returns the key of ks that verifies alg: an RSA key for RS256, a
// P-256 key for ES256, whose own alg (when it names one) is alg. A kid
// whose key is of another type refuses the token (alg confusion).
func pick(ks []jwk, alg string) (any, error) {
	for _, k := range ks {
		if k.alg != "" && k.alg != alg {
			continue
		}
		switch k.key.(type) {
		case *rsa.PublicKey:
			if alg == jwt.SigningMethodRS256.Alg() {
				return k.key, nil
			}
		case *ecdsa.PublicKey:
			if alg == jwt.SigningMethodES256.Alg() {
				return k.key, nil
			}
		}
	}
	return nil, refuse("the signing key does not match the token's algorithm")
}

// fetch reads the key set (discovering its URL first when needed), within
// the fetch timeout.
func (s *keySet) fetch(ctx context.Context) (map[string][]jwk, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.timeout)
	defer cancel()
	s.mu.Lock()
	u := s.jwksURL
	s.mu.Unlock()
	if u == "" {
		var doc struct {
			Issuer  string `json:"issuer"`
			JWKSURI string `json:"jwks_uri"`
		}
		if err := s.getJSON(ctx, strings.TrimSuffix(s.issuer, "/")+DiscoveryPath, &doc); err != nil {
			return nil, fmt.Errorf("discovery: %w", err)
		}
		switch {
		case doc.Issuer != s.issuer:
			return nil, fmt.Errorf("discovery: the document names the issuer %q, not %q", doc.Issuer, s.issuer)
		case doc.JWKSURI == "":
			return nil, errors.New("discovery: the document names no jwks_uri")
		}
		if err := checkURL(doc.JWKSURI); err != nil {
			return nil, fmt.Errorf("discovery: jwks_uri: %w", err)
		}
		u = doc.JWKSURI
		s.mu.Lock()
		s.jwksURL = u
		s.mu.Unlock()
	}
	var set struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := s.getJSON(ctx, u, &set); err != nil {
		return nil, fmt.Errorf("key set: %w", err)
	}
	keys := map[string][]jwk{}
	for _, raw := range set.Keys {
		kid, k, ok := parseJWK(raw)
		if ok {
			keys[kid] = append(keys[kid], k)
		}
	}
	return keys, nil
}

// getJSON GETs u into v: a 200 with a JSON body of at most maxJWKSBody.
func (s *keySet) getJSON(ctx context.Context, u string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := s.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxJWKSBody))
		return fmt.Errorf("GET %s: status %d", u, resp.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxJWKSBody+1))
	if err != nil {
		return fmt.Errorf("GET %s: %w", u, err)
	}
	if len(body) > maxJWKSBody {
		return fmt.Errorf("GET %s: the body exceeds %d bytes", u, maxJWKSBody)
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("GET %s: not the expected JSON: %w", u, err)
	}
	return nil
}

// parseJWK reads one key of a set (RFC 7517/7518). Only signature keys
// with a kid are kept: RSA of at least minRSABits, and EC on P-256. Any
// other (symmetric "oct" keys above all, encryption keys, other curves,
// certificate-only entries) is skipped.
func parseJWK(raw json.RawMessage) (string, jwk, bool) {
	var k struct {
		Kty string `json:"kty"`
		Kid string `json:"kid"`
		Use string `json:"use"`
		Alg string `json:"alg"`
		N   string `json:"n"`
		E   string `json:"e"`
		Crv string `json:"crv"`
		X   string `json:"x"`
		Y   string `json:"y"`
	}
	if json.Unmarshal(raw, &k) != nil || k.Kid == "" || (k.Use != "" && k.Use != "sig") {
		return "", jwk{}, false
	}
	switch k.Kty {
	case "RSA":
		if k.Alg != "" && k.Alg != jwt.SigningMethodRS256.Alg() {
			return "", jwk{}, false
		}
		n, err1 := b64url(k.N)
		e, err2 := b64url(k.E)
		if err1 != nil || err2 != nil || len(e) == 0 || len(e) > 4 {
			return "", jwk{}, false
		}
		pub := &rsa.PublicKey{N: new(big.Int).SetBytes(n), E: int(new(big.Int).SetBytes(e).Int64())}
		if pub.N.BitLen() < minRSABits || pub.E < 3 || pub.E%2 == 0 {
			return "", jwk{}, false
		}
		return k.Kid, jwk{alg: k.Alg, key: pub}, true
	case "EC":
		if k.Crv != "P-256" || (k.Alg != "" && k.Alg != jwt.SigningMethodES256.Alg()) {
			return "", jwk{}, false
		}
		x, err1 := b64url(k.X)
		y, err2 := b64url(k.Y)
		if err1 != nil || err2 != nil || len(x) != 32 || len(y) != 32 {
			return "", jwk{}, false
		}
		pub, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), append(append([]byte{4}, x...), y...))
		if err != nil { // not on the curve
			return "", jwk{}, false
		}
		return k.Kid, jwk{alg: k.Alg, key: pub}, true
	}
	return "", jwk{}, false
}

// b64url decodes base64url, padded or not.
func b64url(s string) ([]byte, error) {
	return base64.RawURLEncoding.DecodeString(strings.TrimRight(s, "="))
}
