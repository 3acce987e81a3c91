package httpapi

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Role is what a caller may do.
type Role string

// The roles a token may carry.
const (
	// RoleUser is an end user: sees and changes only its own resources.
	RoleUser Role = "user"
	// RoleAdmin is an operator: may read and act on everything.
	RoleAdmin Role = "admin"
	// RoleService is another system: may read what an admin reads.
	RoleService Role = "service"
)

// Valid reports whether r is one of the known roles.
func (r Role) Valid() bool { return r == RoleUser || r == RoleAdmin || r == RoleService }

// PlanDefault is the plan of a user token that names none.
const PlanDefault = "free"

// Plans are the plans a token may name.
var Plans = []string{"free", "standard", "pro", "corporate", "enterprise"}

// ValidPlan reports whether p is one of Plans.
func ValidPlan(p string) bool {
	for _, q := range Plans {
		if p == q {
			return true
		}
	}
	return false
}

// Leeway is the clock skew tolerated on exp, nbf and iat.
const Leeway = 30 * time.Second

// MaxTokenLength bounds the size of a token Verify will parse.
const MaxTokenLength = 8 << 10

// subjectMaxLength bounds sub: it becomes part of storage keys.
const subjectMaxLength = 128

// Claims are the verified facts of a token.
type Claims struct {
	// Subject is the caller's user id (sub).
	Subject string
	// Role is what the caller may do.
	Role Role
	// Plan is the user's plan; PlanDefault for a user token without one,
	// possibly empty for admin and service tokens.
	Plan string
	// ExpiresAt is when the token stops being accepted (exp).
	ExpiresAt time.Time
}

// ErrUnauthorized matches (errors.Is) every error Verify returns.
var ErrUnauthorized = errors.New("unauthorized")

// TokenError is a refused token. Reason says why in words that are safe to show
// the caller; it never contains the token.
type TokenError struct {
	Reason string
}

func (e *TokenError) Error() string { return "unauthorized: " + e.Reason }

// Is makes errors.Is(err, ErrUnauthorized) true.
func (e *TokenError) Is(target error) bool { return target == ErrUnauthorized }

func refuse(reason string) error { return &TokenError{Reason: reason} }

// tokenClaims is the JWT payload.
type tokenClaims struct {
	Role Role   `json:"role"`
	Plan string `json:"plan,omitempty"`
	jwt.RegisteredClaims
}

// Verifier checks bearer tokens: HS256 against one secret, and RS256 or
// ES256 against an OIDC issuer's keys when one is configured. It is safe
// for concurrent use.
type Verifier struct {
	key    KeyFunc
	now    func() time.Time
	parser *jwt.Parser
	// peek reads a token's header (and claims) before any key is chosen.
	peek *jwt.Parser
	// oidc, when set, verifies the issuer's tokens.
	oidc *oidcVerifier
}

// VerifierOptions configure a Verifier.
type VerifierOptions struct {
	// Key is the HS256 key (nil or empty: every HS256 token is refused).
	Key KeyFunc
	// OIDC, when set, accepts the tokens of that issuer too.
	OIDC *OIDCConfig
	// Now is the clock exp, nbf and iat are checked against (default
	// time.Now).
	Now func() time.Time
}

// NewVerifierWith returns a Verifier for o; it fails, saying why, on an OIDC
// configuration that cannot work. Nothing is fetched before the first
// token of the issuer arrives.
func NewVerifierWith(o VerifierOptions) (*Verifier, error) {
	v := NewVerifierFunc(o.Key, o.Now)
	if o.OIDC != nil {
		ov, err := newOIDC(*o.OIDC, v.now)
		if err != nil {
			return nil, err
		}
		v.oidc = ov
	}
	return v, nil
}

// KeyFunc returns the key tokens are verified with. It may wait for the
// key's first read (secretref.Deferred) until ctx is done; its errors are
// about the key's source and never contain the key.
type KeyFunc func(ctx context.Context) ([]byte, error)

// ErrKeyUnavailable matches (errors.Is) a VerifyContext error that says
// nothing about the token: the key could not be had (its read failed, or
// the request's context ended while it was pending). The caller may try
// again; it is not a refusal of the token.
var ErrKeyUnavailable = errors.New("the token key is unavailable")

// NewVerifier returns a Verifier for secret; now is the clock exp is checked
// against (time.Now when nil). A Verifier with an empty secret refuses every
// token.
func NewVerifier(secret []byte, now func() time.Time) *Verifier {
	return NewVerifierFunc(StaticKey(secret), now)
}

// StaticKey is the KeyFunc of a key known now (a copy of secret).
func StaticKey(secret []byte) KeyFunc {
	secret = append([]byte(nil), secret...)
	return func(context.Context) ([]byte, error) { return secret, nil }
}

// NewVerifierFunc returns a Verifier whose key comes from key, asked for
// each token that is well-formed enough to need it (a missing or
// oversized header is refused without it); now is as for NewVerifier. An
// empty key refuses every token.
func NewVerifierFunc(key KeyFunc, now func() time.Time) *Verifier {
	if now == nil {
		now = time.Now
	}
	if key == nil {
		key = func(context.Context) ([]byte, error) { return nil, nil }
	}
	return &Verifier{
		key:  key,
		now:  now,
		peek: jwt.NewParser(),
		parser: jwt.NewParser(
			jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}),
			jwt.WithExpirationRequired(),
			jwt.WithIssuedAt(), // a token issued in the future (beyond the leeway) is refused
			jwt.WithLeeway(Leeway),
			jwt.WithTimeFunc(now),
		),
	}
}

// Verify checks an Authorization header value ("Bearer <jwt>", the scheme
// case-insensitive) and returns the token's claims. HS256 with the
// Verifier's secret is accepted, and RS256/ES256 from the OIDC issuer when
// one is configured; every refusal matches ErrUnauthorized and is an
// *TokenError. It is VerifyContext without a deadline.
func (v *Verifier) Verify(bearerHeader string) (Claims, error) {
	return v.VerifyContext(context.Background(), bearerHeader)
}

// VerifyContext is Verify for a request whose context bounds the wait for
// a key still being read. When the key cannot be had it returns an error
// matching ErrKeyUnavailable (and not ErrUnauthorized): the token was not
// judged.
func (v *Verifier) VerifyContext(ctx context.Context, bearerHeader string) (Claims, error) {
	scheme, raw, ok := strings.Cut(strings.TrimSpace(bearerHeader), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return Claims{}, refuse("missing bearer token")
	}
	raw = strings.TrimSpace(raw)
	switch {
	case raw == "":
		return Claims{}, refuse("missing bearer token")
	case len(raw) > MaxTokenLength:
		return Claims{}, refuse("malformed token")
	}
	peeked, _, err := v.peek.ParseUnverified(raw, jwt.MapClaims{})
	if err != nil || peeked.Method == nil {
		if errors.Is(err, jwt.ErrTokenUnverifiable) { // an alg no method is registered for
			return Claims{}, refuse("unacceptable signing method")
		}
		return Claims{}, refuse("malformed token")
	}
	var c Claims
	switch alg := peeked.Method.Alg(); {
	case alg == jwt.SigningMethodHS256.Alg():
		if c, err = v.verifyHS256(ctx, raw, peeked); err != nil {
			return Claims{}, err
		}
	case v.oidc != nil && slices.Contains(asymmetric, alg):
		if c, err = v.oidc.verify(ctx, raw); err != nil {
			return Claims{}, err
		}
	default:
		return Claims{}, refuse("unacceptable signing method")
	}
	return checked(c)
}

// verifyHS256 checks an HS256 token with the Verifier's secret. One that
// names the OIDC issuer in iss is refused without a look at the secret:
// the issuer signs asymmetrically, so such a token is forged (the issuer's
// public key used as an HMAC secret, say).
func (v *Verifier) verifyHS256(ctx context.Context, raw string, peeked *jwt.Token) (Claims, error) {
	if v.oidc != nil {
		if iss, _ := peeked.Claims.GetIssuer(); iss == v.oidc.cfg.Issuer {
			return Claims{}, refuse("unacceptable signing method")
		}
	}
	secret, err := v.key(ctx)
	if err != nil {
		return Claims{}, fmt.Errorf("%w: %w", ErrKeyUnavailable, err)
	}
	if len(secret) == 0 {
		return Claims{}, refuse("token verification is not configured")
	}
	var tc tokenClaims
	tok, err := v.parser.ParseWithClaims(raw, &tc, func(*jwt.Token) (any, error) { return secret, nil })
	if err != nil {
		if tok != nil && tok.Method != nil && tok.Method.Alg() != jwt.SigningMethodHS256.Alg() {
			return Claims{}, refuse("unacceptable signing method")
		}
		return Claims{}, refuse(reason(err))
	}
	c := Claims{Subject: tc.Subject, Role: tc.Role, Plan: tc.Plan}
	if tc.ExpiresAt != nil {
		c.ExpiresAt = tc.ExpiresAt.UTC()
	}
	return c, nil
}

// checked applies the rules every token's claims follow, whoever signed
// it: a usable subject, a known role, a known plan (PlanDefault for a
// user that names none).
func checked(c Claims) (Claims, error) {
	switch {
	case c.Subject == "":
		return Claims{}, refuse("sub is required")
	case !validSubject(c.Subject):
		return Claims{}, refuse("invalid sub")
	case !c.Role.Valid():
		return Claims{}, refuse("unknown role")
	case c.Plan == "" && c.Role == RoleUser:
		c.Plan = PlanDefault
	case c.Plan != "" && !ValidPlan(c.Plan):
		return Claims{}, refuse("unknown plan")
	}
	return c, nil
}

// validSubject keeps sub usable as a part of storage keys and paths.
func validSubject(s string) bool {
	if len(s) > subjectMaxLength {
		return false
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f || r == '#' || r == '/' {
			return false
		}
	}
	return true
}

// reason turns a jwt error into words safe to show the caller.
func reason(err error) string {
	switch {
	case errors.Is(err, jwt.ErrTokenMalformed):
		return "malformed token"
	case errors.Is(err, jwt.ErrTokenSignatureInvalid):
		return "bad signature"
	case errors.Is(err, jwt.ErrTokenUnverifiable):
		return "unacceptable signing method"
	case errors.Is(err, jwt.ErrTokenRequiredClaimMissing):
		return "exp is required"
	case errors.Is(err, jwt.ErrTokenExpired):
		return "token expired"
	case errors.Is(err, jwt.ErrTokenNotValidYet):
		return "token not valid yet"
	case errors.Is(err, jwt.ErrTokenUsedBeforeIssued):
		return "token issued in the future"
	}
	return "invalid token"
}

// Mint signs c with secret as an HS256 JWT that Verify accepts until
// c.ExpiresAt: for the CLI and tests. It refuses an empty secret or subject,
// an unknown role or plan, and a zero ExpiresAt (a past one is allowed, to
// make expired tokens for tests).
func Mint(secret []byte, c Claims) (string, error) {
	switch {
	case len(secret) == 0:
		return "", errors.New("auth: minting needs a secret")
	case c.Subject == "" || !validSubject(c.Subject):
		return "", errors.New("auth: minting needs a valid subject")
	case !c.Role.Valid():
		return "", errors.New("auth: unknown role " + string(c.Role))
	case c.Plan != "" && !ValidPlan(c.Plan):
		return "", errors.New("auth: unknown plan " + c.Plan)
	case c.ExpiresAt.IsZero():
		return "", errors.New("auth: minting needs an expiry")
	}
	// No iat: a verifier refuses a token issued after its own clock (beyond
	// the leeway), and a minted token is valid from the start anyway.
	tc := tokenClaims{Role: c.Role, Plan: c.Plan, RegisteredClaims: jwt.RegisteredClaims{
		Subject:   c.Subject,
		ExpiresAt: jwt.NewNumericDate(c.ExpiresAt),
	}}
	return jwt.NewWithClaims(jwt.SigningMethodHS256, tc).SignedString(secret)
}
