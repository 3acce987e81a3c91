package webhook

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
	"time"
)

// Standard Webhooks headers (standardwebhooks.com), plus the event type.
const (
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
	HeaderEvent     = "X-Conveyor-Event"
)

// SecretPrefix starts every signing secret's text form.
const SecretPrefix = "whsec_"

// SecretBytes is the size of a signing key (the spec asks for 24 to 64).
const SecretBytes = 32

// ErrBadSecret is returned for a secret that is not "whsec_<base64>".
var ErrBadSecret = errors.New("webhook: a secret is whsec_ followed by base64")

// NewSecretKey draws a fresh signing key from crypto/rand.
func NewSecretKey() []byte {
	k := make([]byte, SecretBytes)
	_, _ = rand.Read(k) // crypto/rand.Read never fails on supported platforms
	return k
}

// FormatSecret renders a key the way its owner sees it: "whsec_<base64>".
func FormatSecret(key []byte) string { return SecretPrefix + base64.StdEncoding.EncodeToString(key) }

// ParseSecret returns the key of a "whsec_<base64>" secret.
func ParseSecret(s string) ([]byte, error) {
	raw, ok := strings.CutPrefix(s, SecretPrefix)
	if !ok {
		return nil, ErrBadSecret
	}
	k, err := base64.StdEncoding.DecodeString(raw)
	if err != nil || len(k) == 0 {
		return nil, ErrBadSecret
	}
	return k, nil
}

// Signature returns the webhook-signature header of one delivery attempt:
// "v1,<base64 HMAC-SHA256 of id.timestamp.body>" under each key, space
// separated (several keys during a rotation, the newest first).
func Signature(id string, at time.Time, body []byte, keys ...[]byte) string {
	sigs := make([]string, 0, len(keys))
	msg := id + "." + strconv.FormatInt(at.Unix(), 10) + "."
	for _, k := range keys {
		m := hmac.New(sha256.New, k)
		m.Write([]byte(msg))
		m.Write(body)
		sigs = append(sigs, "v1,"+base64.StdEncoding.EncodeToString(m.Sum(nil)))
	}
	return strings.Join(sigs, " ")
}
