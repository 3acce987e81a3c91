package ids

import "testing"

func TestNewIsValidAndUnique(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for range 1000 {
		id := New(Job)
		if !Valid(Job, id) {
			t.Fatalf("New(%q) = %q is not Valid", Job, id)
		}
		if seen[id] {
			t.Fatalf("duplicate id %q", id)
		}
		seen[id] = true
	}
	for _, bad := range []string{"", "job_", "upl_" + New(Job)[4:], "job_ABCDEFGHIJKLMNOPQRSTUVWXYZ", "job_../../etc/passwd", New(Job) + "x"} {
		if Valid(Job, bad) {
			t.Errorf("Valid(%q) = true", bad)
		}
	}
}
