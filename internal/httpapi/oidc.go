package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Claim names an OIDCConfig uses when it names none.
const (
	// RoleClaimDefault is the claim the role is read from.
	RoleClaimDefault = "role"
	// PlanClaimDefault is the claim the plan is read from.
	PlanClaimDefault = "plan"
)

// OIDCConfig accepts the tokens of one OpenID Connect issuer beside the
// HS256 ones: signed with RS256 or ES256 by a key of the issuer's JSON Web
// Key Set, with iss the issuer, aud naming one of Audiences, and exp (nbf
// and iat when present) within Leeway of the clock.
type OIDCConfig struct {
	// Issuer is the issuer's identifier, exactly as its tokens' iss and its
	// discovery document say it (https; http only on a loopback host).
	Issuer string
	// Audiences are the accepted aud values: a token must name at least
	// one. Required.
	Audiences []string
	// RoleClaim and PlanClaim name the claims the role and the plan are
	// read from (default RoleClaimDefault and PlanClaimDefault). A name is
	// first looked up whole among the top-level claims (so a namespaced
	// name such as "https://conveyor.example/role" works), then as a
	// dot-separated path into nested objects ("app_metadata.plan").
	//
	// The role claim may be a string (user, admin or service; another
	// value refuses the token) or an array of strings such as a group
	// list (cognito:groups): the highest of admin, service and user it
	// holds, other values ignored. Missing, or an array holding none of
	// them, means user. The plan claim must be a string naming a plan;
	// missing means PlanDefault for a user.
	RoleClaim, PlanClaim string
	// JWKSURL is the key set's URL; empty, it is discovered from
	// Issuer + DiscoveryPath (jwks_uri) on first need.
	JWKSURL string
	// CacheTTL is how long a fetched key set is trusted (default
	// JWKSCacheTTLDefault); MinRefresh the least time between two fetches
	// (default JWKSMinRefreshDefault); FetchTimeout bounds one fetch
	// (default JWKSFetchTimeoutDefault).
	CacheTTL, MinRefresh, FetchTimeout time.Duration
	// HTTPClient fetches the discovery document and the key set (default
	// a client without a timeout of its own: FetchTimeout bounds it).
	HTTPClient *http.Client
}

// Validate reports what makes c unusable, naming the field.
func (c OIDCConfig) Validate() error {
	var errs []error
	if err := checkURL(c.Issuer); err != nil {
		errs = append(errs, fmt.Errorf("issuer: %w", err))
	}
	if c.JWKSURL != "" {
		if err := checkURL(c.JWKSURL); err != nil {
			errs = append(errs, fmt.Errorf("JWKS URL: %w", err))
		}
	}
	if len(c.Audiences) == 0 {
		errs = append(errs, errors.New("an audience is required: tokens of the issuer must name this API in aud"))
	}
	for _, a := range c.Audiences {
		if strings.TrimSpace(a) == "" {
			errs = append(errs, errors.New("an audience is empty"))
		}
	}
	if c.CacheTTL < 0 || c.MinRefresh < 0 || c.FetchTimeout < 0 {
		errs = append(errs, errors.New("the key set's cache TTL, refresh interval and fetch timeout must not be negative"))
	}
	return errors.Join(errs...)
}

// checkURL accepts an absolute https URL, or http on a loopback host
// (tests, a local identity provider).
func checkURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return fmt.Errorf("%q is not an absolute URL", raw)
	}
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		host := u.Hostname()
		if ip := net.ParseIP(host); host == "localhost" || (ip != nil && ip.IsLoopback()) {
			return nil
		}
	}
	return fmt.Errorf("%q must be https (http only on a loopback host)", raw)
}

// oidcVerifier checks the tokens of one issuer.
type oidcVerifier struct {
	cfg    OIDCConfig
	keys   *keySet
	parser *jwt.Parser
}

// asymmetric are the algorithms an issuer's tokens may use.
var asymmetric = []string{jwt.SigningMethodRS256.Alg(), jwt.SigningMethodES256.Alg()}

func newOIDC(c OIDCConfig, now func() time.Time) (*oidcVerifier, error) {
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("auth: OIDC: %w", err)
	}
	if c.RoleClaim == "" {
		c.RoleClaim = RoleClaimDefault
	}
	if c.PlanClaim == "" {
		c.PlanClaim = PlanClaimDefault
	}
	if c.CacheTTL == 0 {
		c.CacheTTL = JWKSCacheTTLDefault
	}
	if c.MinRefresh == 0 {
		c.MinRefresh = JWKSMinRefreshDefault
	}
	if c.FetchTimeout == 0 {
		c.FetchTimeout = JWKSFetchTimeoutDefault
	}
	if c.HTTPClient == nil {
		c.HTTPClient = &http.Client{}
	}
	c.Audiences = append([]string(nil), c.Audiences...)
	return &oidcVerifier{
		cfg: c,
		keys: &keySet{issuer: c.Issuer, jwksURL: c.JWKSURL, client: c.HTTPClient, ttl: c.CacheTTL,
			minRefresh: c.MinRefresh, timeout: c.FetchTimeout, now: now},
		parser: jwt.NewParser(
			jwt.WithValidMethods(asymmetric),
			jwt.WithExpirationRequired(),
			jwt.WithIssuedAt(),
			jwt.WithIssuer(c.Issuer),
			jwt.WithAudience(c.Audiences...),
			jwt.WithLeeway(Leeway),
			jwt.WithTimeFunc(now),
		),
	}, nil
}

// verify checks raw, a token whose header names RS256 or ES256.
func (o *oidcVerifier) verify(ctx context.Context, raw string) (Claims, error) {
	mc := jwt.MapClaims{}
	var keyErr error // the key's own error, as it was
	_, err := o.parser.ParseWithClaims(raw, mc, func(t *jwt.Token) (any, error) {
		kid, _ := t.Header["kid"].(string)
		if kid == "" {
			keyErr = refuse("kid is required")
			return nil, keyErr
		}
		k, err := o.keys.key(ctx, kid, t.Method.Alg())
		keyErr = err
		return k, err
	})
	if err != nil {
		var ae *TokenError
		switch {
		case keyErr != nil:
			return Claims{}, keyErr
		case errors.As(err, &ae):
			return Claims{}, ae
		case errors.Is(err, jwt.ErrTokenInvalidIssuer):
			return Claims{}, refuse("wrong issuer")
		case errors.Is(err, jwt.ErrTokenInvalidAudience):
			return Claims{}, refuse("wrong audience")
		case errors.Is(err, jwt.ErrTokenUsedBeforeIssued):
			return Claims{}, refuse("token issued in the future")
		case errors.Is(err, jwt.ErrTokenRequiredClaimMissing):
			// The validator names the claim only in words: look.
			if mc["exp"] != nil {
				if mc["iss"] == nil {
					return Claims{}, refuse("wrong issuer")
				}
				return Claims{}, refuse("wrong audience")
			}
		}
		return Claims{}, refuse(reason(err))
	}
	c := Claims{}
	c.Subject, _ = mc["sub"].(string)
	if exp, err := mc.GetExpirationTime(); err == nil && exp != nil {
		c.ExpiresAt = exp.UTC()
	}
	if c.Role, err = roleOf(lookupClaim(mc, o.cfg.RoleClaim)); err != nil {
		return Claims{}, err
	}
	switch p, ok := lookupClaim(mc, o.cfg.PlanClaim); {
	case !ok || p == nil:
	case isString(p):
		c.Plan = p.(string)
	default:
		return Claims{}, refuse("the plan claim is not a string")
	}
	return c, nil
}

func isString(v any) bool { _, ok := v.(string); return ok }

// lookupClaim finds name among the top-level claims, else as a
// dot-separated path into nested objects.
func lookupClaim(m map[string]any, name string) (any, bool) {
	if v, ok := m[name]; ok {
		return v, true
	}
	if !strings.Contains(name, ".") {
		return nil, false
	}
	var cur any = m
	for _, part := range strings.Split(name, ".") {
		obj, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = obj[part]; !ok {
			return nil, false
		}
	}
	return cur, true
}

// roleOf reads the role claim's value (see OIDCConfig.RoleClaim).
func roleOf(v any, present bool) (Role, error) {
	if !present || v == nil {
		return RoleUser, nil
	}
	switch r := v.(type) {
	case string:
		if !Role(r).Valid() {
			return "", refuse("unknown role")
		}
		return Role(r), nil
	case []any:
		best := RoleUser
		for _, e := range r {
			switch s, _ := e.(string); Role(s) {
			case RoleAdmin:
				return RoleAdmin, nil
			case RoleService:
				best = RoleService
			}
		}
		return best, nil
	}
	return "", refuse("the role claim is neither a string nor an array")
}
