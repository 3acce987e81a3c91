// Package auth verifies and mints the API's bearer tokens: HS256 JWTs with
// the environment's secret, carrying sub, role, plan and exp. Every other
// algorithm (none included), a bad signature or a past exp is refused.
package auth

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Role is what a caller may do.
type Role string

// Roles.
const (
	RoleUser    Role = "user"
	RoleAdmin   Role = "admin"
	RoleService Role = "service"
)

// Plans a user may be on.
var Plans = map[string]bool{"free": true, "standard": true, "pro": true, "corporate": true, "enterprise": true}

// Leeway tolerates clock skew on exp.
const Leeway = 30 * time.Second

// Claims are the verified facts of a token.
type Claims struct {
	Subject   string
	Role      Role
	Plan      string
	ExpiresAt time.Time
}

// ErrUnauthorized is wrapped by every verification failure.
var ErrUnauthorized = errors.New("unauthorized")

type tokenClaims struct {
	Role Role   `json:"role"`
	Plan string `json:"plan,omitempty"`
	jwt.RegisteredClaims
}

// Verifier checks bearer tokens.
type Verifier struct {
	secret []byte
	now    func() time.Time
}

// NewVerifier returns a Verifier for secret; now defaults to time.Now.
func NewVerifier(secret []byte, now func() time.Time) *Verifier {
	if now == nil {
		now = time.Now
	}
	return &Verifier{secret: secret, now: now}
}

// Verify checks an Authorization header value ("Bearer <jwt>").
func (v *Verifier) Verify(header string) (Claims, error) {
	raw, ok := strings.CutPrefix(header, "Bearer ")
	if !ok {
		if raw, ok = strings.CutPrefix(header, "bearer "); !ok {
			return Claims{}, fmt.Errorf("%w: missing bearer token", ErrUnauthorized)
		}
	}
	if len(v.secret) == 0 {
		return Claims{}, fmt.Errorf("%w: no signing secret configured", ErrUnauthorized)
	}
	var tc tokenClaims
	_, err := jwt.ParseWithClaims(strings.TrimSpace(raw), &tc, func(*jwt.Token) (any, error) { return v.secret, nil },
		jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}),
		jwt.WithExpirationRequired(), jwt.WithLeeway(Leeway), jwt.WithTimeFunc(v.now))
	if err != nil {
		return Claims{}, fmt.Errorf("%w: %s", ErrUnauthorized, reason(err))
	}
	c := Claims{Subject: tc.Subject, Role: tc.Role, Plan: tc.Plan, ExpiresAt: tc.ExpiresAt.Time}
	switch {
	case c.Subject == "" || len(c.Subject) > 128 || strings.ContainsAny(c.Subject, "#/\x00"):
		return Claims{}, fmt.Errorf("%w: invalid subject", ErrUnauthorized)
	case c.Role != RoleUser && c.Role != RoleAdmin && c.Role != RoleService:
		return Claims{}, fmt.Errorf("%w: unknown role", ErrUnauthorized)
	case c.Plan == "" && c.Role == RoleUser:
		c.Plan = "free"
	case c.Plan != "" && !Plans[c.Plan]:
		return Claims{}, fmt.Errorf("%w: unknown plan", ErrUnauthorized)
	}
	return c, nil
}

func reason(err error) string {
	switch {
	case errors.Is(err, jwt.ErrTokenExpired):
		return "token expired"
	case errors.Is(err, jwt.ErrTokenSignatureInvalid):
		return "bad signature"
	case errors.Is(err, jwt.ErrTokenUnverifiable), errors.Is(err, jwt.ErrSignatureInvalid):
		return "unacceptable signing method"
	case errors.Is(err, jwt.ErrTokenRequiredClaimMissing):
		return "exp is required"
	case errors.Is(err, jwt.ErrTokenMalformed):
		return "malformed token"
	}
	return "invalid token"
}

// Mint signs claims with secret (HS256): for the CLI and tests.
func Mint(secret []byte, c Claims) (string, error) {
	tc := tokenClaims{Role: c.Role, Plan: c.Plan, RegisteredClaims: jwt.RegisteredClaims{
		Subject: c.Subject, ExpiresAt: jwt.NewNumericDate(c.ExpiresAt), IssuedAt: jwt.NewNumericDate(time.Now()),
	}}
	return jwt.NewWithClaims(jwt.SigningMethodHS256, tc).SignedString(secret)
}
