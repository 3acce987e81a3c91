package httpapi

import (
	"bytes"
	"math/big"
	"strconv"
)

// maxIntegralExponent bounds the exponent integralNumbers will expand: a
// larger one is out of every Go integer's range anyway (uint64 < 2e19), and
// expanding it would cost memory a client chooses.
const maxIntegralExponent = 20

// integralNumbers rewrites every JSON number in body that has a fraction or
// an exponent but an integral value (356.0, 3.56e2, 1E3) as that integer
// (356, 356, 1000), and leaves everything else byte for byte. JSON Schema —
// and so our OpenAPI file — counts 356.0 as an integer, while encoding/json
// refuses it for an int field; this makes the decoder accept what the
// schema accepts. A number with a true fraction (1.5) is left alone, and
// still refused for an int. It returns body itself when nothing changed.
// Malformed input is left for the decoder to report.
func integralNumbers(body []byte) []byte {
	var out []byte // nil until something changes
	last := 0      // body[:last] is already in out
	for i := 0; i < len(body); i++ {
		c := body[i]
		switch {
		case c == '"':
			i = skipString(body, i)
		case c == '-' || (c >= '0' && c <= '9'):
			j := i + 1
			for j < len(body) && bytes.IndexByte([]byte("0123456789.eE+-"), body[j]) >= 0 {
				j++
			}
			if n, ok := integral(body[i:j]); ok {
				out = append(append(out, body[last:i]...), n...)
				last = j
			}
			i = j - 1
		}
	}
	if out == nil {
		return body
	}
	return append(out, body[last:]...)
}

// skipString returns the index of the quote that closes the string opened at
// body[i], or the last index when it is not closed.
func skipString(body []byte, i int) int {
	for j := i + 1; j < len(body); j++ {
		switch body[j] {
		case '\\':
			j++
		case '"':
			return j
		}
	}
	return len(body) - 1
}

// integral returns lit as an integer literal when lit is a number with a
// fraction or an exponent whose value is an integer.
func integral(lit []byte) ([]byte, bool) {
	if bytes.IndexAny(lit, ".eE") < 0 {
		return nil, false
	}
	if e := bytes.IndexAny(lit, "eE"); e >= 0 {
		exp, err := strconv.Atoi(string(bytes.TrimPrefix(lit[e+1:], []byte("+"))))
		if err != nil || exp > maxIntegralExponent || exp < -maxIntegralExponent {
			return nil, false
		}
	}
	r, ok := new(big.Rat).SetString(string(lit))
	if !ok || !r.IsInt() {
		return nil, false
	}
	return []byte(r.Num().String()), true
}
