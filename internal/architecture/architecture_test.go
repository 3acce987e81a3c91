package architecture_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// module is the main module's path.
const module = "github.com/conveyor/conveyor/"

// sdkServices is where the AWS SDK's service clients live.
const sdkServices = "github.com/aws/aws-sdk-go-v2/service/"

// adapterHome is where every AWS adapter lives: the packages under it are
// the adapters, and only they may reach an AWS service SDK (rule "sdk").
const adapterHome = "internal/aws/"

// wiring may reach anything: the functions' wiring and mains, the local
// stack, the emulators and their tools, test records straight in the store.
var wiring = []string{"internal/handler", "functions/", "localstack/", "internal/testfactory", "docs", "internal/architecture"}

// vocabulary is what a client of the API (the Go client, the CLI) and the
// configuration may reach besides each other: the words of the contract,
// no behaviour that does I/O.
var vocabulary = []string{"internal/job", "internal/retry", "internal/ids", "internal/invalid", "internal/fault", "internal/clock", "internal/envelope", "internal/resources"}

// clients reach no domain package and no adapter.
var clients = []string{"internal/apiclient", "cmd/conveyor", "internal/config"}

// noIO are the standard packages a package that does no I/O imports none
// of (directly: the standard library's own imports are its business).
var noIO = []string{"net/http", "os", "os/exec", "io/fs", "database/sql"}

type pkg struct {
	ImportPath string
	Imports    []string
	Deps       []string
}

// TestTheHouseRules: every package of the module against the rules. A
// violation not in exceptions.txt fails, and so does an exception that no
// longer happens (delete its line: the list only shrinks).
func TestTheHouseRules(t *testing.T) {
	t.Parallel()
	got := violations(t, list(t))
	want := readExceptions(t)
	for _, v := range got {
		if !slices.Contains(want, v) {
			t.Errorf("breaks a house rule: %s (docs/architecture.md says the rule and where the code goes instead)", v)
		}
	}
	for _, v := range want {
		if !slices.Contains(got, v) {
			t.Errorf("no longer happens: %s — delete its line from exceptions.txt", v)
		}
	}
	t.Logf("%d known exceptions, by rule: %v", len(want), byRule(want))
}

// violations are the rules' findings, one line each: "rule pkg -> what".
func violations(t *testing.T, pkgs []pkg) []string {
	t.Helper()
	var out []string
	add := func(rule, from, to string) { out = append(out, fmt.Sprintf("%s %s -> %s", rule, from, to)) }
	for _, p := range pkgs {
		name := strings.TrimPrefix(p.ImportPath, module)
		if hasPrefix(name, wiring) {
			continue
		}
		deps := map[string]bool{}
		for _, d := range p.Deps {
			deps[d] = true
		}
		if !isAdapter(name) {
			// Only the adapters reach an AWS service SDK.
			for _, svc := range services(p.Deps) {
				add("sdk", name, svc)
			}
			// The domain, the vocabulary and the clients reach no adapter.
			for _, a := range reached(p.Deps, isAdapter) {
				add("adapter", name, a)
			}
		}
		if slices.Contains(clients, name) {
			for _, d := range reached(p.Deps, func(d string) bool {
				return !isAdapter(d) && !hasPrefix(d, wiring) && !slices.Contains(vocabulary, d) && !slices.Contains(clients, d)
			}) {
				add("client", name, d)
			}
		}
		if slices.Contains(vocabulary, name) {
			// The vocabulary does no I/O and reaches nothing of the domain.
			for _, d := range p.Imports {
				if slices.Contains(noIO, d) {
					add("no-io", name, d)
				}
			}
			for _, d := range reached(p.Deps, func(d string) bool { return !slices.Contains(vocabulary, d) && !isAdapter(d) }) {
				add("vocabulary", name, d)
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func isAdapter(name string) bool {
	return strings.HasPrefix(name, adapterHome)
}

func hasPrefix(name string, prefixes []string) bool {
	return slices.ContainsFunc(prefixes, func(p string) bool { return name == p || strings.HasPrefix(name, p) && strings.HasSuffix(p, "/") })
}

// services are the SDK services deps reach, by name.
func services(deps []string) []string {
	var out []string
	for _, d := range deps {
		if rest, ok := strings.CutPrefix(d, sdkServices); ok {
			svc, _, _ := strings.Cut(rest, "/")
			if svc != "internal" {
				out = append(out, "service/"+svc)
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// reached are the module's packages among deps that match.
func reached(deps []string, match func(string) bool) []string {
	var out []string
	for _, d := range deps {
		if name, ok := strings.CutPrefix(d, module); ok && match(name) {
			out = append(out, name)
		}
	}
	return out
}

// list runs `go list -deps` over the module's packages (their tests not
// counted: a test may reach what it checks).
func list(t *testing.T) []pkg {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		goTool = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	cmd := exec.Command(goTool, "list", "-json=ImportPath,Imports,Deps", "./...")
	cmd.Dir = filepath.Join("..", "..")
	cmd.Stderr = os.Stderr
	raw, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var pkgs []pkg
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	for dec.More() {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) < 40 {
		t.Fatalf("go list found %d packages: not the module", len(pkgs))
	}
	return pkgs
}

func readExceptions(t *testing.T) []string {
	t.Helper()
	f, err := os.Open("exceptions.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if slices.Contains(out, line) {
			t.Errorf("exceptions.txt lists %q twice", line)
		}
		out = append(out, line)
	}
	return out
}

func byRule(lines []string) map[string]int {
	out := map[string]int{}
	for _, l := range lines {
		rule, _, _ := strings.Cut(l, " ")
		out[rule]++
	}
	return out
}
