package sealer

import (
	"bytes"
	"testing"
)

func TestAdditionalDataIsInjective(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		a, b map[string]string
	}{
		{"boundary moved", map[string]string{"a": "bc"}, map[string]string{"ab": "c"}},
		{"separator smuggled", map[string]string{"a": "b\x00c\x00"}, map[string]string{"a": "b", "c": ""}},
		{"key and value swapped", map[string]string{"user": "u1"}, map[string]string{"u1": "user"}},
		{"pair added", map[string]string{"user": "u1"}, map[string]string{"user": "u1", "purpose": ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if bytes.Equal(additionalData(tt.a), additionalData(tt.b)) {
				t.Errorf("%q and %q encode alike", tt.a, tt.b)
			}
		})
	}
	x := map[string]string{"user": "u1", "purpose": "deviantart", "token": "refresh"}
	y := map[string]string{"token": "refresh", "user": "u1", "purpose": "deviantart"}
	for range 20 { // map iteration order varies; the encoding must not
		if !bytes.Equal(additionalData(x), additionalData(y)) {
			t.Fatal("equal contexts encode differently")
		}
	}
}
