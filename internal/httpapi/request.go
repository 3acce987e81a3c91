package httpapi

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"
)

// Request is one request as a handler sees it.
type Request struct {
	// Ctx is the invocation's context (the Lambda deadline).
	Ctx context.Context
	// Raw is the event as API Gateway delivered it.
	Raw events.APIGatewayV2HTTPRequest
	// Params are the route's path parameters, unescaped ({id} → Params["id"]).
	Params map[string]string
	// Claims are the verified token's claims; zero on Public routes.
	Claims Claims
	// RequestID identifies the request in logs and in the X-Request-Id header.
	RequestID string

	maxBody int64 // the router's limit; 0 outside a router
}

// Query returns the first value of the query parameter name, or "".
func (r *Request) Query(name string) string {
	v, _ := r.LookupQuery(name)
	return v
}

// LookupQuery returns the first value of the query parameter name and
// whether the parameter was given at all ("?name=" is given, and empty).
func (r *Request) LookupQuery(name string) (string, bool) {
	if r.Raw.RawQueryString != "" {
		q, _ := url.ParseQuery(r.Raw.RawQueryString) // keeps the well-formed pairs
		if vs := q[name]; len(vs) > 0 {
			return vs[0], true
		}
		return "", false
	}
	v, ok := r.Raw.QueryStringParameters[name]
	return v, ok
}

// NonEmptyQuery returns the first value of the query parameter name, ""
// when it is absent, and a 400 naming it when it is given empty ("?name="):
// an empty value is not a filter, a time or a number, and treating it as
// absent would hide a client's bug.
func (r *Request) NonEmptyQuery(name string) (string, error) {
	v, ok := r.LookupQuery(name)
	if ok && v == "" {
		return "", BadRequest(name, "%s is empty: give it a value, or leave it out", name)
	}
	return v, nil
}

// Queries returns the named query parameters ("" when absent); one given
// empty ("?status=") is a 400 naming it.
func (r *Request) Queries(names ...string) (map[string]string, error) {
	out := make(map[string]string, len(names))
	for _, name := range names {
		v, err := r.NonEmptyQuery(name)
		if err != nil {
			return nil, err
		}
		out[name] = v
	}
	return out, nil
}

// OptionalInt reads an integer query parameter, nil when absent; given
// empty or not an integer, it is a 400 naming it.
func (r *Request) OptionalInt(name string) (*int, error) {
	v, err := r.NonEmptyQuery(name)
	if err != nil || v == "" {
		return nil, err
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return nil, BadRequest(name, "%s must be an integer", name)
	}
	return &n, nil
}

// IntQuery reads an integer query parameter, def when absent.
func (r *Request) IntQuery(name string, def int) (int, error) {
	n, err := r.OptionalInt(name)
	if err != nil || n == nil {
		return def, err
	}
	return *n, nil
}

// Header returns the request header name, matched case-insensitively.
func (r *Request) Header(name string) string { return header(r.Raw.Headers, name) }

func header(h map[string]string, name string) string {
	if v, ok := h[strings.ToLower(name)]; ok {
		return v
	}
	for k, v := range h {
		if strings.EqualFold(k, name) {
			return v
		}
	}
	return ""
}

func (r *Request) limit() int64 {
	if r.maxBody > 0 {
		return r.maxBody
	}
	return MaxBodyDefault
}

// Body returns the request body, base64-decoded when API Gateway encoded it.
// It fails with a 413 *Error over the router's limit (MaxBodyDefault for a
// Request built elsewhere) and a 400 when the encoding is broken.
func (r *Request) Body() ([]byte, error) { return decodeBody(r.Raw, r.limit()) }

func decodeBody(ev events.APIGatewayV2HTTPRequest, limit int64) ([]byte, error) {
	if limit <= 0 {
		limit = MaxBodyDefault
	}
	if bodySize(ev) > limit {
		return nil, tooLarge(limit)
	}
	if !ev.IsBase64Encoded {
		return []byte(ev.Body), nil
	}
	b, err := base64.RawStdEncoding.DecodeString(strings.TrimRight(ev.Body, "="))
	if err != nil {
		return nil, Errorf(http.StatusBadRequest, CodeInvalidJSON, "the body's base64 encoding is broken")
	}
	return b, nil
}

// bodySize is the body's length in bytes without decoding it.
func bodySize(ev events.APIGatewayV2HTTPRequest) int64 {
	if !ev.IsBase64Encoded {
		return int64(len(ev.Body))
	}
	s := strings.TrimRight(ev.Body, "=")
	return int64(len(s)) * 3 / 4
}

// Decode reads the request's JSON body into v, which must be a pointer. It
// answers (as an *Error):
//   - 415 unsupported_media_type unless Content-Type is application/json
//     (a charset parameter, if any, must be utf-8);
//   - 413 payload_too_large over the router's limit;
//   - 400 invalid_json for an empty body, broken JSON or trailing data after
//     the one JSON value;
//   - 400 invalid_encoding for a body that is not UTF-8, or a string with an
//     escaped lone surrogate ("\ud800"): text encoding/json would silently
//     turn into U+FFFD;
//   - 400 unknown_field for a member v does not have, naming its path;
//   - 400 invalid_type for a value of the wrong type, naming its path.
//
// A number with an integral value is an integer, whatever its spelling
// (356.0, 3.56e2), as in JSON Schema.
//
// An *Error returned by a custom UnmarshalJSON passes through unchanged.
// Other failures (v not a pointer) are returned as they are: server bugs.
// The limit is the router's (MaxBodyDefault for a Request built elsewhere).
func Decode(r *Request, v any) error { return DecodeWithLimit(r, v, r.limit()) }

// DecodeWithLimit is Decode with an explicit body limit in bytes
// (MaxBodyDefault when limit <= 0).
func DecodeWithLimit(r *Request, v any, limit int64) error {
	if err := checkContentType(r.Header("Content-Type")); err != nil {
		return err
	}
	body, err := decodeBody(r.Raw, limit)
	if err != nil {
		return err
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return Errorf(http.StatusBadRequest, CodeInvalidJSON, "the body is empty; it must be a JSON value")
	}
	if err := checkUnicode(body); err != nil {
		return err
	}
	body = integralNumbers(body)
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return decodeError(err, body, v)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return Errorf(http.StatusBadRequest, CodeInvalidJSON, "the body must hold exactly one JSON value")
	}
	if bytes.Equal(bytes.TrimSpace(body), []byte("null")) {
		if t := reflect.TypeOf(v); t != nil && t.Kind() == reflect.Pointer {
			return Errorf(http.StatusBadRequest, CodeInvalidType, "the body must be %s, not null", describe(t.Elem()))
		}
	}
	return nil
}

// DecodeNoNulls is Decode for a body whose members the contract never
// allows as null: encoding/json reads a member given null as absent, and
// the schema refuses it, so each such member is a 400 naming it (members
// of nested objects are the type's own to check).
func DecodeNoNulls(r *Request, v any) error {
	if err := Decode(r, v); err != nil {
		return err
	}
	body, err := decodeBody(r.Raw, r.limit())
	if err != nil {
		return err
	}
	var members map[string]json.RawMessage
	if json.Unmarshal(body, &members) != nil {
		return nil // not an object: Decode judged the body as v's type
	}
	names := make([]string, 0, len(members))
	for name, raw := range members {
		if bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return nil
	}
	slices.Sort(names)
	return &Error{Status: http.StatusBadRequest, Code: CodeInvalidType, Field: names[0], Message: fmt.Sprintf("%s must not be null: leave it out instead", names[0])}
}

func checkContentType(ct string) *Error {
	mt, params, err := mime.ParseMediaType(ct)
	if ct == "" || err != nil || mt != ContentTypeJSON {
		return Errorf(http.StatusUnsupportedMediaType, CodeUnsupportedMediaType, "Content-Type must be application/json")
	}
	if cs, ok := params["charset"]; ok && !strings.EqualFold(cs, "utf-8") {
		return Errorf(http.StatusUnsupportedMediaType, CodeUnsupportedMediaType, "a JSON body must be utf-8")
	}
	return nil
}

// decodeError turns a json error into the contract's 400s.
func decodeError(err error, body []byte, v any) error {
	var (
		syn     *json.SyntaxError
		typ     *json.UnmarshalTypeError
		invalid *json.InvalidUnmarshalError
		own     *Error
		parse   *time.ParseError
	)
	switch {
	case errors.As(err, &invalid):
		return fmt.Errorf("decoding the body: %w", err)
	case errors.As(err, &own):
		return own
	case errors.As(err, &syn):
		return Errorf(http.StatusBadRequest, CodeInvalidJSON, "the body is not valid JSON: %s (at byte %d)", syn.Error(), syn.Offset)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return Errorf(http.StatusBadRequest, CodeInvalidJSON, "the body is not valid JSON: it ends inside a value")
	case errors.As(err, &typ):
		field := typ.Field
		if p, ok := findPath(body, nil, typ.Offset, ""); ok && p != "" {
			field = p
		}
		want := describe(typ.Type)
		e := &Error{Status: http.StatusBadRequest, Code: CodeInvalidType, Field: field}
		switch {
		case field == "":
			e.Message = fmt.Sprintf("the body must be %s, not %s", want, article(typ.Value))
		case strings.HasPrefix(typ.Value, "number "):
			e.Message = fmt.Sprintf("%s: %s is out of range", field, strings.TrimPrefix(typ.Value, "number "))
		default:
			e.Message = fmt.Sprintf("%s must be %s, not %s", field, want, article(typ.Value))
		}
		return e
	case errors.As(err, &parse), strings.HasPrefix(err.Error(), "Time.UnmarshalJSON"):
		return Errorf(http.StatusBadRequest, CodeInvalidType, "times must be RFC 3339 strings, like 2026-01-02T15:04:05Z")
	}
	if name, ok := unknownField(err); ok {
		field := name
		if p, found := findPath(body, reflect.TypeOf(v), -1, name); found && p != "" {
			field = p
		}
		return &Error{Status: http.StatusBadRequest, Code: CodeUnknownField, Field: field, Message: fmt.Sprintf("unknown field %q", field)}
	}
	return Errorf(http.StatusBadRequest, CodeInvalidJSON, "the body does not have the expected shape")
}

// unknownField recognises encoding/json's DisallowUnknownFields error, which
// has no type of its own.
func unknownField(err error) (string, bool) {
	msg := err.Error()
	for _, prefix := range []string{"json: unknown field ", "json: unknown object member name "} {
		if rest, ok := strings.CutPrefix(msg, prefix); ok {
			return strings.Trim(rest, `"`), true
		}
	}
	return "", false
}

// article puts "a"/"an" before the JSON kind encoding/json reports.
func article(kind string) string {
	switch kind {
	case "array", "object":
		return "an " + kind
	case "null":
		return "null"
	case "bool":
		return "a boolean"
	}
	return "a " + kind
}

// describe names what a Go type accepts, in JSON terms.
func describe(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == reflect.TypeFor[time.Time]() {
		return "an RFC 3339 time string"
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return "a base64 string"
		}
		return "an array"
	case reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return "a value of another type"
}

// checkUnicode refuses a body that is not UTF-8, and a JSON string escape
// of half a surrogate pair ("\ud83d" alone), which is well-formed JSON but
// no Unicode text (RFC 8259, 8.2; I-JSON, RFC 7493, 2.1): encoding/json
// would replace either with U+FFFD, storing (and publishing) text the
// client never sent.
func checkUnicode(body []byte) *Error {
	if !utf8.Valid(body) {
		at := 0
		for at < len(body) {
			r, size := utf8.DecodeRune(body[at:])
			if r == utf8.RuneError && size <= 1 {
				break
			}
			at += size
		}
		return Errorf(http.StatusBadRequest, CodeInvalidEncoding, "the body is not valid UTF-8 (at byte %d)", at)
	}
	inString := false
	for i := 0; i < len(body); i++ {
		switch c := body[i]; {
		case c == '"':
			inString = !inString
		case !inString || c != '\\':
		case i+1 < len(body) && body[i+1] == 'u':
			r, ok := hex4(body, i+2)
			if !ok {
				i++ // broken escape: the decoder names it
				continue
			}
			switch {
			case utf16.IsSurrogate(r) && r < 0xdc00:
				if r2, ok := hex4(body, i+8); ok && body[i+6] == '\\' && body[i+7] == 'u' && r2 >= 0xdc00 && r2 <= 0xdfff {
					i += 11
					continue
				}
				return Errorf(http.StatusBadRequest, CodeInvalidEncoding, "the body has an unpaired surrogate escape \\u%04x (at byte %d)", r, i)
			case utf16.IsSurrogate(r):
				return Errorf(http.StatusBadRequest, CodeInvalidEncoding, "the body has an unpaired surrogate escape \\u%04x (at byte %d)", r, i)
			}
			i += 5
		default:
			i++ // \" \\ and the other one-character escapes
		}
	}
	return nil
}

// hex4 reads the four hex digits at b[at:].
func hex4(b []byte, at int) (rune, bool) {
	if at < 0 || at+4 > len(b) {
		return 0, false
	}
	n, err := strconv.ParseUint(string(b[at:at+4]), 16, 16)
	return rune(n), err == nil
}
