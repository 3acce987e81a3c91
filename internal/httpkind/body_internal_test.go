package httpkind

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/conveyor/conveyor/internal/job"
)

// escapedLen counts what job.Marshal writes for every character class.
func TestEscapedLenIsWhatMarshalWrites(t *testing.T) {
	t.Parallel()
	runes := []rune{'\u2028', '\u2029', 'é', '€', '😀', utf8.RuneError}
	for r := rune(0); r < 0x80; r++ {
		runes = append(runes, r)
	}
	for _, r := range runes {
		b, _ := job.Marshal(string(r))
		if got, want := escapedLen(r, utf8.RuneLen(r)), len(b)-2; got != want {
			t.Errorf("escapedLen(%U) = %d, job.Marshal writes %d (%s)", r, got, want, b)
		}
	}
}

// Whatever the target answers, the result encodes within the document
// bound, and its body is a prefix of the answer (or of its base64).
func TestTheResultBodyIsBoundedAsEncoded(t *testing.T) {
	t.Parallel()
	binary := bytes.Repeat([]byte{0xff, 0x00}, MaxResultBody)
	for _, c := range []struct {
		name      string
		answer    []byte
		truncated bool
	}{
		{"plain, whole", []byte(strings.Repeat("a", MaxResultBody)), false},
		{"html, whole", []byte(strings.Repeat("<>&", MaxResultBody/3)), false},
		{"control characters", []byte(strings.Repeat("\x01", MaxResultBody)), true},
		{"quotes", []byte(strings.Repeat(`"`, MaxResultBody)), true},
		{"a character cut by the read", append([]byte(strings.Repeat("a", MaxResultBody-1)), "€"...), true},
		{"binary", binary[:MaxResultBody+1], true},
	} {
		res := &Result{Status: 200, Headers: map[string]string{}}
		for _, h := range ResultHeaders {
			res.Headers[strings.ToLower(h)] = strings.Repeat("\x01", 4<<10)
			res.Headers[strings.ToLower(h)], _ = cutEncoded(res.Headers[strings.ToLower(h)], MaxResultHeader)
		}
		read := c.answer[:min(len(c.answer), MaxResultBody+1)]
		keepBody(res, read)
		body, _ := job.Marshal(res.Body)
		if len(body)-2 > MaxResultBody {
			t.Errorf("%s: the body encodes to %d bytes, want at most %d", c.name, len(body)-2, MaxResultBody)
		}
		if res.Truncated != c.truncated {
			t.Errorf("%s: truncated %v, want %v", c.name, res.Truncated, c.truncated)
		}
		if res.BodyEncoding == "" && !strings.HasPrefix(string(c.answer), res.Body) {
			t.Errorf("%s: the body is not a prefix of the answer", c.name)
		}
		if c.name == "a character cut by the read" && res.BodyEncoding != "" {
			t.Errorf("%s: kept as %s, want text", c.name, res.BodyEncoding)
		}
		if _, err := job.DocOf(res); err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}
