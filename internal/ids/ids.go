// Package ids makes the opaque, unguessable identifiers of the contract: a
// kind prefix and 128 random bits from crypto/rand.
package ids

import (
	"crypto/rand"
	"encoding/base32"
	"encoding/hex"
	"strings"
)

// Kinds of identifiers.
const (
	Job       = "job"
	Upload    = "upl"
	Item      = "itm"
	Delivery  = "dlv"
	Event     = "evt"
	Operation = "op"
)

var enc = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// New returns "<kind>_" followed by 26 base32 characters (128 random bits).
func New(kind string) string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	return kind + "_" + enc.EncodeToString(b[:])
}

// Hex returns n random bytes from crypto/rand, hex-encoded: a token that
// is not one of the contract's identifiers (a write's id, an idempotency
// token, a schedule's seed).
func Hex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails on supported platforms
	return hex.EncodeToString(b)
}

// Valid reports whether s looks like an id of kind: the prefix and 26
// characters of the alphabet. It lets handlers refuse junk before any I/O.
func Valid(kind, s string) bool {
	rest, ok := strings.CutPrefix(s, kind+"_")
	if !ok || len(rest) != 26 {
		return false
	}
	for _, c := range rest {
		if !(c >= 'a' && c <= 'z' || c >= '2' && c <= '7') {
			return false
		}
	}
	return true
}
