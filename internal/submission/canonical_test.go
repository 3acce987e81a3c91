package submission

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestCanonicalJSON(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, in, want string }{
		{"keys sorted", `{"b":1,"a":2,"c":3}`, `{"a":2,"b":1,"c":3}`},
		{"nested keys sorted", `{"z":{"y":1,"x":[{"b":1,"a":2}]}}`, `{"z":{"x":[{"a":2,"b":1}],"y":1}}`},
		{"byte order, not case-folded", `{"b":1,"B":2,"a":3,"_":4}`, `{"B":2,"_":4,"a":3,"b":1}`},
		{"byte order of non-ASCII keys", `{"é":1,"z":2,"😀":3,"":4}`, `{"":4,"z":2,"é":1,"😀":3}`},
		{"whitespace removed", " {\n\t\"a\" : [ 1 , 2 ] } ", `{"a":[1,2]}`},
		{"null members dropped", `{"a":null,"b":1}`, `{"b":1}`},
		{"nested nulls dropped", `{"a":null,"b":{"c":null,"d":[null,1]}}`, `{"b":{"d":[null,1]}}`},
		{"null array elements kept", `[null,{"a":null},null]`, `[null,{},null]`},
		{"object emptied by nulls stays", `{"a":{"b":null}}`, `{"a":{}}`},
		{"empty object", `{"a":{}}`, `{"a":{}}`},
		{"empty array", `{"a":[]}`, `{"a":[]}`},
		{"top-level null", `null`, `null`},
		{"arrays keep their order", `[3,2,1]`, `[3,2,1]`},
		{"duplicate key: last wins", `{"a":1,"a":2}`, `{"a":2}`},
		{"duplicate key: last null drops it", `{"a":1,"a":null}`, `{}`},
		{"booleans", `{"t":true,"f":false}`, `{"f":false,"t":true}`},
		{"no HTML escaping", `{"s":"<tag>&amp;"}`, `{"s":"<tag>&amp;"}`},
		{"unicode unescaped", `{"u":"ü\u00e9\u4e2d\ud83d\ude00"}`, `{"u":"üé中😀"}`},
		{"control characters", `{"c":"\u0000\u0001\b\f\n\r\t\u001f"}`, `{"c":"\u0000\u0001\b\f\n\r\t\u001f"}`},
		{"quotes and backslashes", `{"q":"\"\\\/"}`, `{"q":"\"\\/"}`},
		{"line separators stay escaped", `{"l":"\u2028\u2029"}`, `{"l":"\u2028\u2029"}`},
		{"escaped key", `{"\u0061":1}`, `{"a":1}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := CanonicalJSON(json.RawMessage(tt.in))
			if err != nil {
				t.Fatalf("CanonicalJSON(%s): %v", tt.in, err)
			}
			if diff := cmp.Diff(tt.want, string(got)); diff != "" {
				t.Errorf("CanonicalJSON(%s) (-want +got):\n%s", tt.in, diff)
			}
		})
	}
}

func TestCanonicalJSONNumbers(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"0", "0"},
		{"-0", "0"},
		{"0.0", "0"},
		{"-0.000e5", "0"},
		{"0e-9", "0"},
		{"1", "1"},
		{"-1", "-1"},
		{"1.0", "1"},
		{"1.50", "1.5"},
		{"1e2", "100"},
		{"1E2", "100"},
		{"1e+2", "100"},
		{"100e-2", "1"},
		{"12.5e1", "125"},
		{"0.5", "0.5"},
		{"5e-1", "0.5"},
		{"-1.5e-7", "-1.5e-7"},
		{"0.000001", "0.000001"},
		{"1e-6", "0.000001"},
		{"1e-7", "1e-7"},
		{"123.456", "123.456"},
		{"1234.5e-2", "12.345"},
		{"9007199254740993", "9007199254740993"}, // beyond float64's exact integers: kept exact
		{"0.1000000000000000000001", "0.1000000000000000000001"},
		{"100000000000000000000", "100000000000000000000"}, // 21 digits: in full
		{"1e20", "100000000000000000000"},
		{"1e21", "1e+21"},
		{"1000000000000000000000", "1e+21"},
		{"123456789012345678901234", "1.23456789012345678901234e+23"},
		{"1e300", "1e+300"},
		{"1.25e300", "1.25e+300"},
		{"1e400", "1e+400"}, // beyond float64: kept exact
		{"-2.5E-400", "-2.5e-400"},
		{"1e000000000000000000000002", "100"}, // leading zeros of the exponent do not count
		{"1e999999999999999", "1e+999999999999999"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			got, err := CanonicalJSON(json.RawMessage(tt.in))
			if err != nil {
				t.Fatalf("CanonicalJSON(%s): %v", tt.in, err)
			}
			if diff := cmp.Diff(tt.want, string(got)); diff != "" {
				t.Errorf("CanonicalJSON(%s) (-want +got):\n%s", tt.in, diff)
			}
		})
	}
}

func TestCanonicalJSONErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		v    any
		want string
	}{
		{"exponent too long", json.RawMessage(`[1e1000000000000000]`), "number exponent out of range"},
		{"negative exponent too long", json.Number("1e-1000000000000000"), "number exponent out of range"},
		{"unmarshalable", func() {}, "unsupported type"},
		{"invalid raw JSON", json.RawMessage(`{"a":`), "unexpected end of JSON input"},
		{"invalid json.Number", json.Number("1x"), "invalid number literal"},
		{"NaN", math.NaN(), "unsupported value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := CanonicalJSON(tt.v)
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.HasPrefix(err.Error(), "canonical: ") {
				t.Errorf("JSON = %s, %v; want an error containing %q", got, err, tt.want)
			}
		})
	}
}

// TestJSONOfGoValues: v is marshalled with encoding/json first, so tags,
// omitempty, maps and times behave as they do there.
func TestCanonicalJSONOfGoValues(t *testing.T) {
	t.Parallel()
	type item struct {
		UploadID string  `json:"uploadId"`
		Note     *string `json:"note"`
	}
	type req struct {
		Type       string         `json:"type"`
		Items      []item         `json:"items"`
		Tags       []string       `json:"tags,omitempty"`
		Extra      map[string]any `json:"extra"`
		ScheduleAt *time.Time     `json:"scheduleAt"`
		Ratio      float64        `json:"ratio"`
	}
	at := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		v    any
		want string
	}{
		{"struct with nil pointers and maps", req{Type: "publish", Items: []item{{UploadID: "upl_1"}}},
			`{"items":[{"uploadId":"upl_1"}],"ratio":0,"type":"publish"}`},
		{"struct with values", req{Type: "publish", Tags: []string{"b", "a"}, Extra: map[string]any{"z": 1, "y": nil}, ScheduleAt: &at, Ratio: 2.50},
			`{"extra":{"z":1},"ratio":2.5,"scheduleAt":"2026-11-22T10:00:00Z","tags":["b","a"],"type":"publish"}`},
		{"map", map[string]int{"b": 2, "a": 1}, `{"a":1,"b":2}`},
		{"float", 1e21, `1e+21`},
		{"large int64", int64(math.MaxInt64), `9223372036854775807`},
		{"nil", nil, `null`},
		{"string with HTML", "<a href=\"x\">&</a>", `"<a href=\"x\">&</a>"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := CanonicalJSON(tt.v)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, string(got)); diff != "" {
				t.Errorf("JSON (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCanonicalHash(t *testing.T) {
	t.Parallel()
	hash := func(scope, doc string) string {
		t.Helper()
		h, err := CanonicalHash(scope, json.RawMessage(doc))
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	base := hash("u1", `{"type":"publish","params":{"title":"x","tags":["a","b"]}}`)
	tests := []struct {
		name  string
		scope string
		doc   string
		same  bool
	}{
		{"identical", "u1", `{"type":"publish","params":{"title":"x","tags":["a","b"]}}`, true},
		{"keys reordered", "u1", `{"params":{"tags":["a","b"],"title":"x"},"type":"publish"}`, true},
		{"null members added", "u1", `{"type":"publish","scheduleAt":null,"params":{"title":"x","tags":["a","b"],"description":null}}`, true},
		{"whitespace", "u1", "{ \"type\" : \"publish\",\n \"params\" : {\"title\":\"x\",\"tags\":[\"a\",\"b\"]}}", true},
		{"escaped the same string", "u1", `{"type":"publ\u0069sh","params":{"title":"x","tags":["a","b"]}}`, true},
		{"same request, different user", "u2", `{"type":"publish","params":{"title":"x","tags":["a","b"]}}`, false},
		{"empty scope", "", `{"type":"publish","params":{"title":"x","tags":["a","b"]}}`, false},
		{"array order matters", "u1", `{"type":"publish","params":{"title":"x","tags":["b","a"]}}`, false},
		{"a null element matters", "u1", `{"type":"publish","params":{"title":"x","tags":["a","b",null]}}`, false},
		{"different title", "u1", `{"type":"publish","params":{"title":"y","tags":["a","b"]}}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := hash(tt.scope, tt.doc)
			if (got == base) != tt.same {
				t.Errorf("CanonicalHash(%q, %s) = %s, base %s; want same=%v", tt.scope, tt.doc, got, base, tt.same)
			}
			if len(got) != 64 || strings.Trim(got, "0123456789abcdef") != "" {
				t.Errorf("Hash = %q, not lowercase hex SHA-256", got)
			}
		})
	}
}

func TestCanonicalHashIsStable(t *testing.T) {
	t.Parallel()
	// Pinned: a change here changes every stored idempotency hash.
	got, err := CanonicalHash("user_1", map[string]any{"b": []any{1.5, "x", nil}, "a": nil})
	if err != nil {
		t.Fatal(err)
	}
	// sha256("user_1\n{\"b\":[1.5,\"x\",null]}")
	want := "a3f06efda1cbc46a314276f0c92bf60a9feb986f5c6e34541157728d9c1429d8"
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Hash (-want +got):\n%s", diff)
	}
}

func TestCanonicalHashError(t *testing.T) {
	t.Parallel()
	if h, err := CanonicalHash("u", make(chan int)); err == nil || h != "" {
		t.Errorf("CanonicalHash(chan) = %q, %v; want an error", h, err)
	}
}

// TestStringsEscapeLikeEncodingJSON: appendString is encoding/json's
// escaping without HTML escaping, byte for byte.
func TestStringsEscapeLikeEncodingJSON(t *testing.T) {
	t.Parallel()
	var all strings.Builder
	for r := rune(0); r < 0x300; r++ {
		all.WriteRune(r)
	}
	tests := []string{
		"", "plain", all.String(), "\u2028\u2029\u2027\u202a", "\xff\xfe invalid", "a\xc3", "😀中é",
		"\x7f", "<>&", "\ufffd", "\"\\/",
	}
	for _, s := range tests {
		t.Run(fmt.Sprintf("%.20q", s), func(t *testing.T) {
			t.Parallel()
			if diff := cmp.Diff(goEscape(t, s), string(appendString(nil, s))); diff != "" {
				t.Errorf("appendString(%q) (-encoding/json +got):\n%s", s, diff)
			}
		})
	}
}

func goEscape(t testing.TB, s string) string {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		t.Fatal(err)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// reorder re-encodes a JSON document with every object's keys in reverse
// byte order and spaces between tokens: the same document, spelled
// differently.
func reorder(t testing.TB, in []byte) []byte {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(in))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		t.Fatalf("decoding %s: %v", in, err)
	}
	var b bytes.Buffer
	var write func(v any)
	write = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			keys := make([]string, 0, len(x))
			for k := range x {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			slices.Reverse(keys)
			b.WriteString("{ ")
			for i, k := range keys {
				if i > 0 {
					b.WriteString(" , ")
				}
				write(k)
				b.WriteString(" : ")
				write(x[k])
			}
			b.WriteString(" }")
		case []any:
			b.WriteString("[ ")
			for i, e := range x {
				if i > 0 {
					b.WriteString(" , ")
				}
				write(e)
			}
			b.WriteString(" ]")
		default:
			raw, err := json.Marshal(x) // HTML-escaped: a different spelling too
			if err != nil {
				t.Fatal(err)
			}
			b.Write(raw)
		}
	}
	write(doc)
	return b.Bytes()
}

// dropNullMembers removes null object members at every depth, as the
// canonical form does.
func dropNullMembers(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if e == nil {
				delete(x, k)
			} else {
				x[k] = dropNullMembers(e)
			}
		}
	case []any:
		for i, e := range x {
			x[i] = dropNullMembers(e)
		}
	}
	return v
}

func FuzzCanonical(f *testing.F) {
	for _, seed := range []string{
		`{}`, `[]`, `null`, `0`, `-0.0`, `"s"`, `true`,
		`{"a":1,"b":[1,2,{"c":null}]}`,
		`{"t":"x\u0000y\u2028<&>","n":-1.5e-7,"é":"😀"}`,
		`[null,true,false,"s",1e300,1E-7,12.50e+3]`,
		`{"z":{"y":{"x":[]}},"a":{"b":null}}`,
		`{"a":1,"a":2,"A":3}`,
		`{"type":"publish","items":[{"uploadId":"upl_1"}],"params":{"title":"A cat","tags":["a","b"]},"scheduleAt":null}`,
		`[1000000000000000000000,0.000001,1e21,123456789012345678901234567890.5]`,
		"{\"bad\":\"\xff\xfe\"}",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		if !json.Valid(in) {
			return
		}
		once, err := CanonicalJSON(json.RawMessage(in))
		if errors.Is(err, errNumberRange) {
			return
		}
		if err != nil {
			t.Fatalf("CanonicalJSON(%q): %v", in, err)
		}
		if !json.Valid(once) {
			t.Fatalf("invalid output %q for %q", once, in)
		}
		if bytes.ContainsAny(once, "\n\r\t") {
			t.Fatalf("whitespace in %q", once)
		}
		twice, err := CanonicalJSON(json.RawMessage(once))
		if err != nil || !bytes.Equal(once, twice) {
			t.Fatalf("not idempotent: %q → %q (%v)", once, twice, err)
		}
		reordered, err := CanonicalJSON(json.RawMessage(reorder(t, in)))
		if err != nil || !bytes.Equal(once, reordered) {
			t.Fatalf("key order changed the output: %q → %q, reordered %q (%v)", in, once, reordered, err)
		}
		// Same meaning: decoded as Go values, the canonical form equals the
		// input with its null members removed (numbers compared as float64;
		// skipped when a number does not fit one).
		var want, got any
		if json.Unmarshal(in, &want) == nil {
			if err := json.Unmarshal(once, &got); err != nil {
				t.Fatalf("canonical %q does not decode: %v", once, err)
			}
			if diff := cmp.Diff(dropNullMembers(want), got); diff != "" {
				t.Fatalf("meaning changed for %q (-input +canonical):\n%s", in, diff)
			}
		}
	})
}

var benchRequest = map[string]any{
	"type":  "publish",
	"items": []any{map[string]any{"uploadId": "upl_3f9a0c1b2d4e5f60718293a4b5c6d7e8"}, map[string]any{"uploadId": "upl_00112233445566778899aabbccddeeff"}},
	"params": map[string]any{
		"title": "A cat on a mat", "description": "Photographed at dawn <3 & more",
		"tags": []string{"cat", "mat", "morning"},
	},
	"scheduleAt": nil,
	"webhookUrl": "https://example.com/hooks/conveyor",
}

func BenchmarkCanonicalJSON(b *testing.B) {
	for b.Loop() {
		if _, err := CanonicalJSON(benchRequest); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCanonicalHash(b *testing.B) {
	for b.Loop() {
		if _, err := CanonicalHash("user_123", benchRequest); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCanonicalNumber(b *testing.B) {
	var buf []byte
	for b.Loop() {
		buf, _ = appendNumber(buf[:0], "-12345.67890e-3")
	}
}
