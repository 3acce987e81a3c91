package job

import "testing"

// TestParseNames: a tier or an environment parses from its own spelling
// only, and a wrong one is refused with every valid spelling named.
func TestParseNames(t *testing.T) {
	t.Parallel()
	for _, tr := range Tiers {
		if got, err := ParseTier(string(tr)); err != nil || got != tr {
			t.Errorf("ParseTier(%q) = %q, %v", tr, got, err)
		}
	}
	for _, e := range Envs {
		if got, err := ParseEnv(string(e)); err != nil || got != e {
			t.Errorf("ParseEnv(%q) = %q, %v", e, got, err)
		}
	}
	if _, err := ParseTier("High"); err == nil || err.Error() != `unknown tier "High" (want one of high, medium, low, system)` {
		t.Errorf("ParseTier(High): %v", err)
	}
	if _, err := ParseEnv("prod"); err == nil || err.Error() != `unknown environment "prod" (want one of local, staging, prod-ru, prod-en)` {
		t.Errorf("ParseEnv(prod): %v", err)
	}
}
