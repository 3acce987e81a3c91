// Canonical JSON and its hash: two requests that mean the same thing get
// the same hash and two that differ get different ones. Submission hashes
// and the API's Idempotency-Key body hashes are both this hash.
//
// The canonical form: object keys sorted, object members whose value is
// null dropped at every depth, numbers in one spelling of their exact
// value, strings escaped as encoding/json does minus HTML escaping, no
// insignificant whitespace. This file is pure: no I/O.

package submission

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// maxExponentDigits bounds the decimal exponent a number may carry
// (|exponent| < 10^15): beyond it the value means nothing to a request,
// and refusing it keeps the arithmetic in int64.
const maxExponentDigits = 15

// plainDigits is how far a number's decimal point may sit from its
// digits before it is written with an exponent: integers up to 21 digits
// are written in full, fractions down to 1e-6 without exponent (the same
// thresholds as JavaScript's Number#toString and RFC 8785).
const (
	plainMaxPoint = 21
	plainMinPoint = -6
)

// errNumberRange is returned for a number whose exponent is out of range.
var errNumberRange = errors.New("number exponent out of range")

// CanonicalJSON returns the canonical JSON of v. v is first marshalled with
// encoding/json (so struct tags, omitempty and Marshalers apply), then
// decoded with UseNumber and re-encoded canonically:
//
//   - Object keys are sorted by the bytes of their UTF-8 encoding (Go's
//     string order), not by UTF-16 code units as RFC 8785 does; the two
//     orders differ only for keys with characters above U+FFFF versus
//     U+E000–U+FFFF. If an object repeats a key, the last value wins.
//   - Object members whose value is null are removed, at every depth; an
//     object left empty stays {}. Null array elements are kept, because an
//     array's positions carry meaning ([null,1] is not [1]). A top-level
//     null stays null.
//   - Numbers keep their exact decimal value, in one spelling: no leading
//     or trailing zeros, -0 → 0, 1.0 → 1, 1e2 → 100, 0.50 → 0.5. Integers up
//     to 21 digits and fractions down to 1e-6 are written without exponent,
//     others as d.ddde±n. No digit is lost to float64 rounding. A number
//     whose exponent has more than 15 digits is an error.
//   - Strings are escaped as encoding/json escapes them, except that <, >
//     and & are not HTML-escaped.
//   - No insignificant whitespace.
//
// CanonicalJSON is idempotent: CanonicalJSON of a canonical document
// returns it unchanged.
func CanonicalJSON(v any) ([]byte, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("canonical: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("canonical: %w", err)
	}
	out, err := appendValue(make([]byte, 0, len(raw)), doc)
	if err != nil {
		return nil, fmt.Errorf("canonical: %w", err)
	}
	return out, nil
}

// CanonicalHash returns the hex SHA-256 of scope, a newline and
// CanonicalJSON(v). The scope (the user id) makes equal requests of
// different users hash differently.
// Canonical JSON never contains a raw newline, so the last newline of the
// hashed bytes always separates scope from document: no two (scope, v)
// pairs with different canonical forms share their hashed bytes.
func CanonicalHash(scope string, v any) (string, error) {
	b, err := CanonicalJSON(v)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	h.Write([]byte(scope))
	h.Write([]byte{'\n'})
	h.Write(b)
	return hex.EncodeToString(h.Sum(nil)), nil
}

func appendValue(buf []byte, v any) ([]byte, error) {
	switch t := v.(type) {
	case nil:
		return append(buf, "null"...), nil
	case bool:
		return strconv.AppendBool(buf, t), nil
	case json.Number:
		return appendNumber(buf, string(t))
	case string:
		return appendString(buf, t), nil
	case []any:
		buf = append(buf, '[')
		for i, e := range t {
			if i > 0 {
				buf = append(buf, ',')
			}
			var err error
			if buf, err = appendValue(buf, e); err != nil {
				return nil, err
			}
		}
		return append(buf, ']'), nil
	case map[string]any:
		keys := make([]string, 0, len(t))
		for k, e := range t {
			if e != nil {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		buf = append(buf, '{')
		for i, k := range keys {
			if i > 0 {
				buf = append(buf, ',')
			}
			buf = appendString(buf, k)
			buf = append(buf, ':')
			var err error
			if buf, err = appendValue(buf, t[k]); err != nil {
				return nil, err
			}
		}
		return append(buf, '}'), nil
	}
	return nil, fmt.Errorf("unexpected %T", v)
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string, escaped exactly as
// encoding/json does with SetEscapeHTML(false): ", \ and control
// characters escaped (\b \f \n \r \t in short form), invalid UTF-8 replaced
// by U+FFFD, U+2028 and U+2029 escaped.
func appendString(buf []byte, s string) []byte {
	buf = append(buf, '"')
	start := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' {
				i++
				continue
			}
			buf = append(buf, s[start:i]...)
			switch b {
			case '"', '\\':
				buf = append(buf, '\\', b)
			case '\b':
				buf = append(buf, '\\', 'b')
			case '\f':
				buf = append(buf, '\\', 'f')
			case '\n':
				buf = append(buf, '\\', 'n')
			case '\r':
				buf = append(buf, '\\', 'r')
			case '\t':
				buf = append(buf, '\\', 't')
			default:
				buf = append(buf, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			buf = append(buf, s[start:i]...)
			buf = append(buf, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			buf = append(buf, s[start:i]...)
			buf = append(buf, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	buf = append(buf, s[start:]...)
	return append(buf, '"')
}

// appendNumber appends the canonical spelling of the JSON number literal
// s (valid JSON number syntax, as encoding/json guarantees for a
// json.Number it decoded or marshalled).
func appendNumber(buf []byte, s string) ([]byte, error) {
	neg, digits, exp, err := decimal(s)
	if err != nil {
		return nil, err
	}
	if digits == "" {
		return append(buf, '0'), nil // 0, -0, 0.000, 0e7
	}
	if neg {
		buf = append(buf, '-')
	}
	k := int64(len(digits))
	point := k + exp // the value is 0.digits × 10^point
	switch {
	case k <= point && point <= plainMaxPoint: // an integer: digits, then zeros
		buf = append(buf, digits...)
		for range point - k {
			buf = append(buf, '0')
		}
	case 0 < point && point <= plainMaxPoint: // ddd.ddd
		buf = append(buf, digits[:point]...)
		buf = append(buf, '.')
		buf = append(buf, digits[point:]...)
	case plainMinPoint < point && point <= 0: // 0.000ddd
		buf = append(buf, '0', '.')
		for range -point {
			buf = append(buf, '0')
		}
		buf = append(buf, digits...)
	default: // d.ddde±n
		buf = append(buf, digits[0])
		if k > 1 {
			buf = append(buf, '.')
			buf = append(buf, digits[1:]...)
		}
		buf = append(buf, 'e')
		if point-1 > 0 {
			buf = append(buf, '+')
		}
		buf = strconv.AppendInt(buf, point-1, 10)
	}
	return buf, nil
}

// decimal reads the JSON number s as its sign and the value digits ×
// 10^exp, digits without leading or trailing zeros ("" for zero, whatever
// its sign or form). An exponent too long to be a sensible value is
// errNumberRange.
func decimal(s string) (neg bool, digits string, exp int64, err error) {
	neg = strings.HasPrefix(s, "-")
	if neg {
		s = s[1:]
	}
	i := 0
	for i < len(s) && isDigit(s[i]) {
		i++
	}
	intPart, rest := s[:i], s[i:]
	var frac string
	if strings.HasPrefix(rest, ".") {
		j := 1
		for j < len(rest) && isDigit(rest[j]) {
			j++
		}
		frac, rest = rest[1:j], rest[j:]
	}
	if rest != "" { // e or E, an optional sign, digits
		rest = rest[1:]
		expNeg := strings.HasPrefix(rest, "-")
		rest = strings.TrimLeft(strings.TrimLeft(rest, "+-"), "0")
		if len(rest) > maxExponentDigits {
			return false, "", 0, fmt.Errorf("%w: %.40s", errNumberRange, s)
		}
		if rest != "" {
			e, err := strconv.ParseInt(rest, 10, 64)
			if err != nil {
				return false, "", 0, fmt.Errorf("number %.40q: %w", s, err)
			}
			exp = e
		}
		if expNeg {
			exp = -exp
		}
	}
	digits = strings.TrimLeft(intPart+frac, "0")
	exp -= int64(len(frac))
	if digits == "" {
		return neg, "", 0, nil
	}
	trimmed := strings.TrimRight(digits, "0")
	exp += int64(len(digits) - len(trimmed))
	return neg, trimmed, exp, nil
}

func isDigit(b byte) bool { return '0' <= b && b <= '9' }
