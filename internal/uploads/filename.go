package uploads

import (
	"path"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// MaxFilenameBytes bounds a sanitised filename (UTF-8 bytes), so that a key
// stays far below S3's 1,024 bytes whatever the owner's id.
const MaxFilenameBytes = 100

// safeASCII is the ASCII punctuation a filename keeps: what S3 lists as
// safe in a key, with the space and a few that need no more than URL
// encoding. The rest (" # $ % * / : ; < > ? [ \ ] ^ ` { | } ~ +) becomes
// "_": characters S3 advises against, that a shell or a file system reads
// as syntax, or that an S3 event (whose keys are form-encoded) would make
// ambiguous.
const safeASCII = " !&'(),-.=@_"

// SanitizeFilename keeps what a user would call the file's name and drops
// only what is unsafe in a key: the name is normalised to NFC (so "ñ" is
// one letter however it was typed) and reduced to its base name (no
// directories, no ".."); letters, marks and digits of every script,
// symbols (emoji included) and safe punctuation are kept; whitespace
// becomes single spaces; control, format (bidirectional controls among
// them), private-use and invalid characters are dropped; slash
// look-alikes and unsafe ASCII punctuation become "_". The result is at
// most MaxFilenameBytes (the end of the name, with its extension, kept
// whole) and never empty: "кот 🐱 ñ.png" stays "кот 🐱 ñ.png".
func SanitizeFilename(name string) string {
	name = norm.NFC.String(strings.ToValidUTF8(name, ""))
	name = strings.ReplaceAll(name, "\\", "/")
	name = path.Base("/" + name)
	var b strings.Builder
	space := false
	for _, r := range name {
		switch {
		case unicode.IsSpace(r) && r != '\u0085': // NEL is a C1 control
			space = b.Len() > 0
			continue
		case r == '/' || r == utf8.RuneError || unicode.In(r, unicode.Cc, unicode.Co, unicode.Cs):
			continue
		case unicode.Is(unicode.Cf, r) && r != '\u200c' && r != '\u200d':
			// Format characters: bidirectional controls, invisible
			// separators. Zero-width (non-)joiners stay: emoji
			// sequences and some scripts need them.
			continue
		}
		if space {
			b.WriteByte(' ')
			space = false
		}
		switch {
		case r < utf8.RuneSelf:
			if isASCIIAlnum(r) || strings.ContainsRune(safeASCII, r) {
				b.WriteRune(r)
			} else {
				b.WriteByte('_')
			}
		case slashLike(r):
			b.WriteByte('_')
		case unicode.In(r, unicode.L, unicode.M, unicode.N, unicode.S, unicode.P, unicode.Cf):
			b.WriteRune(r)
		default:
			// Unassigned code points and the like.
		}
	}
	out := strings.Trim(b.String(), ". ")
	for strings.Contains(out, "..") {
		out = strings.ReplaceAll(out, "..", ".")
	}
	out = truncate(out, MaxFilenameBytes)
	if out == "" || out == "_" {
		out = "file"
	}
	return out
}

// slashLike reports whether r looks like a slash or a backslash (in a
// listing "a∕b" reads as a directory).
func slashLike(r rune) bool {
	switch r {
	case '\u2044', '\u2215', '\u2216', '\u29f8', '\u29f9', '\uff0f', '\uff3c', '\u3033', '\u2cc1':
		return true
	}
	return false
}

func isASCIIAlnum(r rune) bool {
	return ('a' <= r && r <= 'z') || ('A' <= r && r <= 'Z') || ('0' <= r && r <= '9')
}

// truncate shortens name to at most max bytes on a character boundary,
// keeping its extension (when it has a short one) and cutting the stem's
// end.
func truncate(name string, max int) string {
	if len(name) <= max {
		return name
	}
	ext := path.Ext(name)
	if len(ext) > 16 || len(ext) >= max {
		ext = ""
	}
	stem := name[:len(name)-len(ext)]
	cut := max - len(ext)
	for cut > 0 && !utf8.RuneStart(stem[cut]) {
		cut--
	}
	stem = strings.TrimRightFunc(stem[:cut], func(r rune) bool {
		return r == ' ' || r == '.' || r == '\u200c' || r == '\u200d'
	})
	return stem + ext
}

// ContentDisposition is the Content-Disposition an upload is stored with
// (RFC 6266): the name in UTF-8 as the filename* parameter (RFC 8187, which
// replaces RFC 5987: the charset UTF-8, an empty language between two
// apostrophes, then the percent-encoded bytes), and an ASCII filename for
// clients that do not read filename* (accents dropped, other characters
// "_"). The value is ASCII with single spaces, so it is signed and sent
// as it is.
func ContentDisposition(filename string) string {
	return `attachment; filename="` + asciiFallback(filename) + `"; filename*=UTF-8''` + pctEncode(filename)
}

// asciiFallback spells filename in ASCII for the quoted filename
// parameter: letters lose their accents (NFD, marks dropped), what has no
// ASCII spelling is left out, spaces are single; a name with nothing left
// of its stem is "file" with its extension.
func asciiFallback(filename string) string {
	var b strings.Builder
	for _, r := range norm.NFD.String(filename) {
		if r < utf8.RuneSelf && (isASCIIAlnum(r) || strings.ContainsRune(safeASCII, r)) {
			b.WriteRune(r)
		}
	}
	out := strings.Join(strings.Fields(b.String()), " ")
	ext := path.Ext(out)
	stem := strings.Trim(strings.TrimSuffix(out, ext), " .")
	if stem == "" {
		stem = "file"
	}
	return stem + ext
}

// pctEncode encodes s for an RFC 8187 ext-value: every byte outside
// attr-char as %XX.
func pctEncode(s string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < utf8.RuneSelf && (isASCIIAlnum(rune(c)) || strings.IndexByte("!#$&+-.^_`|~", c) >= 0) {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&15])
	}
	return b.String()
}
