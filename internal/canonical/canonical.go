// Package canonical renders values as canonical JSON and hashes them, so
// that two requests that mean the same thing get the same idempotency key:
// object keys sorted, null members dropped at every depth, numbers in one
// spelling, no insignificant whitespace.
package canonical

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/big"
	"sort"
	"strings"
)

// JSON returns the canonical JSON of v (v is first marshalled with
// encoding/json). Object keys are sorted by their bytes; members whose
// value is null are removed at every depth, while null array elements are
// kept, because an array's positions carry meaning; numbers that are
// integers are written as integers (1.0 → 1, 1e2 → 100, -0 → 0), others
// in Go's shortest float form; strings are escaped without HTML escaping.
func JSON(v any) ([]byte, error) {
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
	var buf bytes.Buffer
	if err := write(&buf, doc); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Hash is the hex SHA-256 of scope, a newline and JSON(v). The scope (the
// user id) makes equal requests of different users differ.
func Hash(scope string, v any) (string, error) {
	b, err := JSON(v)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	h.Write([]byte(scope))
	h.Write([]byte{'\n'})
	h.Write(b)
	return hex.EncodeToString(h.Sum(nil)), nil
}

func write(buf *bytes.Buffer, v any) error {
	switch t := v.(type) {
	case nil:
		buf.WriteString("null")
	case bool:
		if t {
			buf.WriteString("true")
		} else {
			buf.WriteString("false")
		}
	case json.Number:
		buf.WriteString(number(t))
	case string:
		writeString(buf, t)
	case []any:
		buf.WriteByte('[')
		for i, e := range t {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := write(buf, e); err != nil {
				return err
			}
		}
		buf.WriteByte(']')
	case map[string]any:
		keys := make([]string, 0, len(t))
		for k, e := range t {
			if e != nil {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		buf.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				buf.WriteByte(',')
			}
			writeString(buf, k)
			buf.WriteByte(':')
			if err := write(buf, t[k]); err != nil {
				return err
			}
		}
		buf.WriteByte('}')
	default:
		return fmt.Errorf("canonical: unexpected %T", v)
	}
	return nil
}

func writeString(buf *bytes.Buffer, s string) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	buf.Write(bytes.TrimSuffix(b.Bytes(), []byte{'\n'}))
}

// number normalises a JSON number literal: exact integers without fraction
// or exponent, everything else in the shortest float64 form.
func number(n json.Number) string {
	s := string(n)
	if !strings.ContainsAny(s, ".eE") {
		if s == "-0" {
			return "0"
		}
		return strings.TrimPrefix(s, "+")
	}
	r, ok := new(big.Rat).SetString(s)
	if ok && r.IsInt() && r.Num().BitLen() <= 256 {
		return r.Num().String()
	}
	f, err := n.Float64()
	if err != nil {
		return s
	}
	if f == 0 {
		return "0"
	}
	b, _ := json.Marshal(f)
	return string(b)
}
