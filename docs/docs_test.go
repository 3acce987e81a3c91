// Package docs_test keeps the README and docs/ honest: the README stays a
// reference a newcomer reads in ten minutes, no page tells history (dates,
// sessions, issue numbers), every relative link and every repository path
// a page names exists, and docs/architecture.md's layout names every
// package.
package docs_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// readmeMaxWords is the README's budget, in words as wc -w counts them
// (runs of non-space): what Conveyor is, the two commands, a first job,
// the layout in short, the other targets, deploying, the index of docs/.
// Design, operations, configuration and figures live in docs/.
const readmeMaxWords = 1500

// readmeMaxLine is the longest line the README may have, in characters: a
// budget in words is not to be met by a few long lines.
const readmeMaxLine = 160

// root is the repository, seen from docs/.
const root = ".."

// page is one Markdown file: its path from the root and its text.
type page struct {
	path string
	text string
}

// pages returns README.md and every docs/*.md.
func pages(t *testing.T) []page {
	t.Helper()
	names := []string{"README.md"}
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range docs {
		names = append(names, filepath.ToSlash(strings.TrimPrefix(d, root+string(filepath.Separator))))
	}
	out := make([]page, 0, len(names))
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join(root, n))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, page{path: n, text: string(b)})
	}
	return out
}

func TestREADMEIsShort(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(bytes.Fields(b)); n > readmeMaxWords {
		t.Errorf("README.md has %d words, more than %d: move design, operations and figures to docs/", n, readmeMaxWords)
	}
	for i, line := range strings.Split(string(b), "\n") {
		if n := utf8.RuneCountInString(line); n > readmeMaxLine {
			t.Errorf("README.md:%d is %d characters long, more than %d: wrap it", i+1, n, readmeMaxLine)
		}
	}
}

// prose is a page without its fenced code blocks and inline code: what is
// left is what the page says in words.
func prose(text string) []string {
	var lines []string
	fenced := false
	for line := range strings.Lines(text) {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			lines = append(lines, "")
			continue
		}
		if fenced {
			lines = append(lines, "")
			continue
		}
		lines = append(lines, inlineCode.ReplaceAllString(line, "``"))
	}
	return lines
}

var (
	inlineCode = regexp.MustCompile("`[^`]*`")
	// history is what a page in the present tense does not say: when
	// something happened or in which piece of work.
	history = map[string]*regexp.Regexp{
		"a date":          regexp.MustCompile(`\b(19|20)\d\d-\d\d-\d\d\b`),
		"a session":       regexp.MustCompile(`(?i)\bsessions?\b`),
		"an issue number": regexp.MustCompile(`(?i)\bissues?\s+#?\d+|(^|[\s(])#\d+\b`),
	}
)

func TestPagesTellWhatIsNotWhatHappened(t *testing.T) {
	t.Parallel()
	for _, p := range pages(t) {
		for i, line := range prose(p.text) {
			for what, re := range history {
				if m := re.FindString(line); m != "" {
					t.Errorf("%s:%d names %s (%q): say what is; history lives in git", p.path, i+1, what, m)
				}
			}
		}
	}
}

// link is a Markdown link's target: [text](target).
var link = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)

func TestRelativeLinksResolve(t *testing.T) {
	t.Parallel()
	anchors := map[string][]string{} // page path → its headings' anchors
	for _, p := range pages(t) {
		anchors[p.path] = headingAnchors(p.text)
	}
	for _, p := range pages(t) {
		for i, line := range prose(p.text) {
			for _, m := range link.FindAllStringSubmatch(line, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				file, anchor, _ := strings.Cut(target, "#")
				resolved := p.path
				if file != "" {
					resolved = filepath.ToSlash(filepath.Join(filepath.Dir(p.path), file))
					if _, err := os.Stat(filepath.Join(root, resolved)); err != nil {
						t.Errorf("%s:%d links to %s, which does not exist", p.path, i+1, target)
						continue
					}
				}
				if anchor == "" {
					continue
				}
				as, ok := anchors[resolved]
				if !ok {
					continue // a file that is not one of the pages: its anchors are not ours to check
				}
				if !slices.Contains(as, anchor) {
					t.Errorf("%s:%d links to %s, but %s has no heading with the anchor #%s", p.path, i+1, target, resolved, anchor)
				}
			}
		}
	}
}

// headingAnchors are the anchors GitHub gives a page's headings: lower
// case, punctuation dropped, spaces as hyphens, repeats numbered.
func headingAnchors(text string) []string {
	var out []string
	seen := map[string]int{}
	fenced := false
	for line := range strings.Lines(text) {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
		}
		if fenced || !strings.HasPrefix(line, "#") {
			continue
		}
		title := strings.TrimSpace(strings.TrimLeft(line, "#"))
		var b strings.Builder
		for _, r := range strings.ToLower(title) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsNumber(r):
				b.WriteRune(r)
			}
		}
		a := b.String()
		if n := seen[a]; n > 0 {
			out = append(out, fmt.Sprintf("%s-%d", a, n))
		} else {
			out = append(out, a)
		}
		seen[a]++
	}
	return out
}

// repoPath is inline code that names a file or directory of the
// repository: it starts with one of its top-level directories.
var repoPath = regexp.MustCompile("`((?:internal|functions|localstack|cmd|infra|events|docs|web)/[A-Za-z0-9_./-]*)`")

func TestNamedPathsExist(t *testing.T) {
	t.Parallel()
	for _, p := range pages(t) {
		sc := bufio.NewScanner(strings.NewReader(p.text))
		sc.Buffer(nil, 1<<20)
		for n := 1; sc.Scan(); n++ {
			for _, m := range repoPath.FindAllStringSubmatch(sc.Text(), -1) {
				path := strings.TrimSuffix(m[1], "/")
				if _, err := os.Stat(filepath.Join(root, path)); err != nil {
					t.Errorf("%s:%d names %s, which does not exist", p.path, n, m[1])
				}
			}
		}
	}
}

// TestLayoutNamesEveryPackage: docs/architecture.md's layout is the map of
// the repository, so every package of the main module is on it.
func TestLayoutNamesEveryPackage(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(filepath.Join(root, "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	layout := string(b)
	for _, top := range []string{"cmd", "functions", "internal", "localstack"} {
		err := filepath.WalkDir(filepath.Join(root, top), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !d.IsDir() {
				return nil
			}
			if d.Name() == "testdata" || d.Name() == "node_modules" || strings.HasPrefix(d.Name(), ".") {
				return filepath.SkipDir
			}
			goFiles, _ := filepath.Glob(filepath.Join(path, "*.go"))
			if len(goFiles) == 0 {
				return nil
			}
			pkg := filepath.ToSlash(strings.TrimPrefix(path, root+string(filepath.Separator)))
			if !strings.Contains(layout, "`"+pkg+"`") {
				t.Errorf("docs/architecture.md's layout does not name package %s", pkg)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestREADMEIndexesEveryPage: the README's index of docs/ links every page,
// so a new page is found from the front door.
func TestREADMEIndexesEveryPage(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pages(t) {
		if p.path == "README.md" {
			continue
		}
		if !strings.Contains(string(b), "]("+p.path+")") {
			t.Errorf("README.md's index does not link %s", p.path)
		}
	}
}
