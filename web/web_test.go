package web

import (
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

func get(t *testing.T, h http.Handler, method, path string) *http.Response {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, path, nil))
	return rec.Result()
}

func TestHandler(t *testing.T) {
	h := Handler()
	for _, tc := range []struct {
		method, path string
		status       int
		contentType  string
		location     string
	}{
		{"GET", "/dashboard/", 200, "text/html", ""},
		{"HEAD", "/dashboard/", 200, "text/html", ""},
		{"GET", "/dashboard/js/main.js", 200, "text/javascript", ""},
		{"GET", "/dashboard/app.css", 200, "text/css", ""},
		{"GET", "/dashboard", 301, "", "/dashboard/"},
		{"GET", "/dashboard?x=1", 301, "", "/dashboard/?x=1"},
		{"GET", "/dashboard/nope.js", 404, "", ""},
		{"GET", "/dashboard/../go.mod", 404, "", ""},
		{"GET", "/elsewhere", 404, "", ""},
		{"POST", "/dashboard/", 405, "", ""},
	} {
		resp := get(t, h, tc.method, tc.path)
		if resp.StatusCode != tc.status {
			t.Errorf("%s %s: status %d, want %d", tc.method, tc.path, resp.StatusCode, tc.status)
			continue
		}
		if ct := resp.Header.Get("Content-Type"); tc.contentType != "" && !strings.HasPrefix(ct, tc.contentType) {
			t.Errorf("%s %s: Content-Type %q, want %s", tc.method, tc.path, ct, tc.contentType)
		}
		if loc := resp.Header.Get("Location"); tc.location != "" && loc != tc.location {
			t.Errorf("%s %s: Location %q, want %q", tc.method, tc.path, loc, tc.location)
		}
		if tc.status == 200 && resp.Header.Get("Content-Security-Policy") == "" {
			t.Errorf("%s %s: no Content-Security-Policy", tc.method, tc.path)
		}
	}
}

// TestBuiltAppIsComplete checks the committed build: every module the page
// and the modules import is there, and nothing loads from another origin.
func TestBuiltAppIsComplete(t *testing.T) {
	files := Files()
	index, err := fs.ReadFile(files, "index.html")
	if err != nil {
		t.Fatalf("dist/index.html: %v (run `make web`)", err)
	}
	ref := regexp.MustCompile(`(?:src|href)="([^"]+)"`)
	imp := regexp.MustCompile(`(?m)^\s*(?:import|export)\b[^'"]*from\s+['"]([^'"]+)['"]`)
	seen := map[string]bool{}
	var visit func(path string, data []byte)
	visit = func(path string, data []byte) {
		var refs [][]string
		if strings.HasSuffix(path, ".html") {
			refs = ref.FindAllStringSubmatch(string(data), -1)
		} else {
			refs = imp.FindAllStringSubmatch(string(data), -1)
		}
		dir := path[:strings.LastIndex(path, "/")+1]
		for _, m := range refs {
			u := m[1]
			if strings.HasPrefix(u, "data:") {
				continue
			}
			if strings.Contains(u, "//") {
				t.Errorf("%s loads %s from another origin", path, u)
				continue
			}
			target := cleanJoin(dir, u)
			if seen[target] {
				continue
			}
			seen[target] = true
			b, err := fs.ReadFile(files, target)
			if err != nil {
				t.Errorf("%s refers to %s, which is not in dist: %v", path, u, err)
				continue
			}
			if strings.HasSuffix(target, ".js") {
				visit(target, b)
			}
		}
	}
	visit("/index.html", index)
	if !seen["js/main.js"] {
		t.Errorf("index.html does not load js/main.js: %v", seen)
	}
	// And every built module is reached from the page (a stale file would
	// mean dist was not rebuilt cleanly).
	_ = fs.WalkDir(files, ".", func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && path != "index.html" && !seen[path] {
			t.Errorf("dist/%s is not reached from index.html", path)
		}
		return err
	})
}

func cleanJoin(dir, rel string) string {
	parts := strings.Split(strings.TrimPrefix(dir, "/")+rel, "/")
	var out []string
	for _, p := range parts {
		switch p {
		case "", ".":
		case "..":
			if len(out) > 0 {
				out = out[:len(out)-1]
			}
		default:
			out = append(out, p)
		}
	}
	return strings.Join(out, "/")
}

func TestIndexIsHTML(t *testing.T) {
	resp := get(t, Handler(), "GET", "/dashboard/")
	b, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(b), `<div id="app">`) {
		t.Errorf("index: %s", b)
	}
}
