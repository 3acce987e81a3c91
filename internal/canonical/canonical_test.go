package canonical

import (
	"encoding/json"
	"testing"
)

func TestJSON(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{`{"b":1,"a":2}`, `{"a":2,"b":1}`},
		{`{"a":null,"b":{"c":null,"d":[null,1]}}`, `{"b":{"d":[null,1]}}`},
		{`{"x":1.0,"y":1e2,"z":-0,"w":0.5}`, `{"w":0.5,"x":1,"y":100,"z":0}`},
		{`{"s":"<tag>&","u":"ü\u00e9"}`, `{"s":"<tag>&","u":"üé"}`},
		{`[3,2,1]`, `[3,2,1]`},
		{`{"a":{}}`, `{"a":{}}`},
		{`{"a":{"b":null}}`, `{"a":{}}`},
	}
	for _, tt := range tests {
		got, err := JSON(json.RawMessage(tt.in))
		if err != nil {
			t.Fatalf("JSON(%s): %v", tt.in, err)
		}
		if string(got) != tt.want {
			t.Errorf("JSON(%s) = %s, want %s", tt.in, got, tt.want)
		}
	}
}

func TestHashScopesAndKeyOrder(t *testing.T) {
	t.Parallel()
	a, _ := Hash("u1", json.RawMessage(`{"title":"x","tags":["a"]}`))
	b, _ := Hash("u1", json.RawMessage(`{"tags":["a"],"title":"x","extra":null}`))
	c, _ := Hash("u2", json.RawMessage(`{"title":"x","tags":["a"]}`))
	if a != b {
		t.Errorf("key order or nulls changed the hash: %s vs %s", a, b)
	}
	if a == c {
		t.Error("different users got the same hash")
	}
	if len(a) != 64 {
		t.Errorf("hash %q is not hex SHA-256", a)
	}
}

func FuzzCanonical(f *testing.F) {
	for _, seed := range []string{`{}`, `[]`, `null`, `{"a":1,"b":[1,2,{"c":null}]}`, `{"t":"x\u0000y","n":-1.5e-7}`, `[null,true,false,"s",1e300]`, `{"z":{"y":{"x":[]}}}`} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		if !json.Valid(in) {
			return
		}
		once, err := JSON(json.RawMessage(in))
		if err != nil {
			return // e.g. numbers json cannot re-encode
		}
		if !json.Valid(once) {
			t.Fatalf("invalid output %s for %s", once, in)
		}
		twice, err := JSON(json.RawMessage(once))
		if err != nil || string(once) != string(twice) {
			t.Fatalf("not idempotent: %s → %s (%v)", once, twice, err)
		}
	})
}

func BenchmarkHash(b *testing.B) {
	v := map[string]any{"type": "publish", "items": []any{map[string]any{"uploadId": "upl_abc"}}, "params": map[string]any{"title": "A cat", "tags": []string{"a", "b"}}}
	for b.Loop() {
		_, _ = Hash("u1", v)
	}
}
