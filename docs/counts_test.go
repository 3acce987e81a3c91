package docs_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/resources"
)

// numbers reads a count as the docs write it: a numeral or a word.
var numbers = map[string]int{"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
	"nine": 9, "ten": 10, "eleven": 11, "twelve": 12}

// TestCountsComeFromTheDefinition: where the docs count what the resource
// definition holds — the table's indexes, the scheduled runs, the tier
// queues, the functions — the count is the definition's.
func TestCountsComeFromTheDefinition(t *testing.T) {
	def := resources.For(job.ProdEN)
	checks := []struct {
		re   *regexp.Regexp
		want int
		what string
	}{
		{regexp.MustCompile(`(?i)\b(\w+) GSIs\b`), len(def.Table.Indexes), "the table's indexes"},
		{regexp.MustCompile(`(?i)\((\w+) indexes( each)?\)`), len(def.Table.Indexes), "the table's indexes"},
		{regexp.MustCompile(`(?i)\bthe (\w+) schedules\b`), len(def.Schedules), "the definition's schedules"},
		{regexp.MustCompile(`(?i)\b(\w+) schedules on a function\b`), len(def.Schedules), "the definition's schedules"},
		{regexp.MustCompile(`(?i)\b(\w+) tier queues\b`), len(def.Queues), "the tier queues"},
		{regexp.MustCompile(`(?i)\bthe (\w+) functions\b`), len(def.Functions), "the functions"},
	}
	pages, _ := filepath.Glob("*.md")
	pages = append(pages, filepath.Join("..", "README.md"))
	for _, page := range pages {
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			for _, c := range checks {
				for _, m := range c.re.FindAllStringSubmatch(line, -1) {
					n, ok := numbers[strings.ToLower(m[1])]
					if !ok {
						if n, err = strconv.Atoi(m[1]); err != nil {
							continue // not a count ("the recurring schedules")
						}
					}
					if n != c.want {
						t.Errorf("%s:%d: %q, but the definition has %d (%s)", page, i+1, m[0], c.want, c.what)
					}
				}
			}
		}
	}
}
