package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func write(t *testing.T, root, name, body string) {
	t.Helper()
	p := filepath.Join(root, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestMeasure(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	long := "package a\n\nfunc Long() {\n" + strings.Repeat("\t_ = 1\n", 80) + "}\n\nfunc Short() {}\n\ntype T struct{}\n\nfunc (t *T) Method() {\n" + strings.Repeat("\t_ = 1\n", 79) + "}\n"
	write(t, root, "a/a.go", long)
	write(t, root, "a/a_test.go", "package a\n")
	write(t, root, "b/b.go", "package b\n\nfunc F() {\n\tg := func() {\n"+strings.Repeat("\t\t_ = 1\n", 81)+"\t}\n\tg()\n}\n")
	write(t, root, "web/dist/x.go", "package dist\n")
	write(t, root, ".hidden/h.go", "package h\n")

	fns, untested, err := measure(root, 80)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range fns {
		rel, _ := filepath.Rel(root, strings.Split(f.pos, ":")[0])
		got = append(got, rel+" "+f.name)
	}
	// Long: 82 lines; Method: 81; b.F: 86 and its literal: 83.
	want := []string{"b/b.go F", "b/b.go func literal", "a/a.go Long", "a/a.go T.Method"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("long functions (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{filepath.Join(root, "b")}, untested); diff != "" {
		t.Errorf("untested packages (-want +got):\n%s", diff)
	}
}
