package lambdaruntime

import (
	"encoding/json"
	"testing"
)

// TestFilterPattern: the mapping's filter as Lambda applies it, to the
// record as the function receives it.
func TestFilterPattern(t *testing.T) {
	t.Parallel()
	const events = `{"eventName":["INSERT"],"dynamodb":{"Keys":{"sk":{"S":[{"prefix":"EVT#"}]}}}}`
	rec := func(name, sk string) string {
		return `{"eventName":"` + name + `","dynamodb":{"Keys":{"pk":{"S":"JOB#a"},"sk":{"S":"` + sk + `"}}}}`
	}
	tests := []struct {
		name, pattern, record string
		want                  bool
	}{
		{"an inserted event item", events, rec("INSERT", "EVT#000000000001"), true},
		{"a job write", events, rec("MODIFY", "JOB"), false},
		{"an event item removed by TTL", events, rec("REMOVE", "EVT#000000000001"), false},
		{"an inserted job", events, rec("INSERT", "JOB"), false},
		{"a prefix only at the start", events, rec("INSERT", "XEVT#1"), false},
		{"no keys at all", events, `{"eventName":"INSERT"}`, false},
		{"exists false", `{"userIdentity":[{"exists":false}]}`, rec("REMOVE", "EVT#1"), true},
		{"exists true", `{"userIdentity":[{"exists":true}]}`, rec("REMOVE", "EVT#1"), false},
		{"one of several values", `{"eventName":["MODIFY","INSERT"]}`, rec("INSERT", "x"), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var p, v any
			if err := json.Unmarshal([]byte(tt.pattern), &p); err != nil {
				t.Fatal(err)
			}
			if err := checkPattern(p); err != nil {
				t.Fatalf("pattern refused: %v", err)
			}
			if err := json.Unmarshal([]byte(tt.record), &v); err != nil {
				t.Fatal(err)
			}
			if got := matchPattern(p, v); got != tt.want {
				t.Errorf("match = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestFilterRefusesWhatItCannotMatch: an operator the poller does not
// implement is refused rather than matched differently from Lambda.
func TestFilterRefusesWhatItCannotMatch(t *testing.T) {
	t.Parallel()
	for _, p := range []string{`{"a":[{"numeric":[">",1]}]}`, `{"a":[{"anything-but":"x"}]}`, `{"a":"not an array"}`} {
		p := (&StreamPoller{Filter: p})
		if err := p.init(); err == nil {
			t.Errorf("filter %s accepted", p.Filter)
		}
	}
}
