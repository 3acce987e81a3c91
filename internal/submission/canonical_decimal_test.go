package submission

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestDecimal: a JSON number reads as its sign and digits × 10^exp, the
// digits stripped of leading and trailing zeros, whatever its spelling.
func TestDecimal(t *testing.T) {
	t.Parallel()
	type dec struct {
		Neg    bool
		Digits string
		Exp    int64
	}
	for _, tc := range []struct {
		in   string
		want dec
	}{
		{"0", dec{}},
		{"-0", dec{Neg: true}},
		{"0.000e-9", dec{}},
		{"7", dec{Digits: "7"}},
		{"-12", dec{Neg: true, Digits: "12"}},
		{"1200", dec{Digits: "12", Exp: 2}},
		{"001.2500", dec{Digits: "125", Exp: -2}},
		{"0.0034", dec{Digits: "34", Exp: -4}},
		{"1.5E+3", dec{Digits: "15", Exp: 2}},
		{"25e-0003", dec{Digits: "25", Exp: -3}},
		{"-9.10e10", dec{Neg: true, Digits: "91", Exp: 9}},
	} {
		neg, digits, exp, err := decimal(tc.in)
		if err != nil {
			t.Errorf("%s: %v", tc.in, err)
			continue
		}
		if diff := cmp.Diff(tc.want, dec{neg, digits, exp}); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.in, diff)
		}
	}
	if _, _, _, err := decimal("1e" + "12345678901234567"); !errors.Is(err, errNumberRange) {
		t.Errorf("a huge exponent: %v, want errNumberRange", err)
	}
}
