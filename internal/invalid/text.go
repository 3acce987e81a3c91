package invalid

import (
	"unicode"
)

// Text checks s, the value of field, for characters that would change how
// it reads or is processed once it is stored and published, and returns a
// *FieldError naming the first one (nil when there is none):
//   - control characters (C0 including NUL, DEL, C1); in multiline text
//     (a description) line feed, carriage return and tab are allowed;
//   - bidirectional controls — the embeddings and overrides U+202A–U+202E,
//     the isolates U+2066–U+2069, the marks U+200E, U+200F and U+061C —
//     which reorder what follows them on screen (CVE-2021-42574, "Trojan
//     Source"): "cat\u202Egnp.exe" shows as "catexe.png".
func Text(field, s string, multiline bool) error {
	n := 0
	for _, r := range s {
		n++
		switch {
		case multiline && (r == '\n' || r == '\r' || r == '\t'):
		case unicode.IsControl(r):
			return Fieldf(field, "must not contain control characters (U+%04X at character %d)", r, n)
		case Bidi(r):
			return Fieldf(field, "must not contain bidirectional control characters (U+%04X at character %d)", r, n)
		}
	}
	return nil
}

// Bidi reports whether r is a bidirectional formatting control: one that
// embeds, overrides, isolates or marks a direction.
func Bidi(r rune) bool {
	return (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069) || r == 0x200e || r == 0x200f || r == 0x061c
}
