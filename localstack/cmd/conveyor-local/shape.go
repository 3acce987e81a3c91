package main

import (
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// MaxLinesDefault is the length above which shape lists a function.
const MaxLinesDefault = 80

type longFunc struct {
	pos   string
	name  string
	lines int
}

// runShape is the shape subcommand (make shape): figures about the code's
// shape to compare before and after a clean-up — the functions longer than
// a limit (go/ast, from the opening to the closing brace) and the packages
// that have no test file of their own. It reads the Go files below a folder
// and writes a report on stdout; it changes nothing.
func runShape(args []string) int {
	flags := flag.NewFlagSet("shape", flag.ContinueOnError)
	max := flags.Int("max", MaxLinesDefault, "list functions with more lines than this")
	dir := flags.String("dir", ".", "the tree to read")
	if code, done := parse(flags, args); done {
		return code
	}
	long, untested, err := measure(*dir, *max)
	if err != nil {
		fmt.Fprintln(os.Stderr, "shape:", err)
		return 1
	}
	fmt.Printf("functions over %d lines: %d\n", *max, len(long))
	for _, f := range long {
		fmt.Printf("  %4d  %s  %s\n", f.lines, f.pos, f.name)
	}
	fmt.Printf("packages without tests of their own: %d\n", len(untested))
	for _, p := range untested {
		fmt.Printf("  %s\n", p)
	}
	return 0
}

// measure walks dir (skipping hidden folders, node_modules, testdata and
// web/dist) and returns the functions over max lines, longest first, and the
// folders holding Go files but no _test.go file.
func measure(dir string, max int) ([]longFunc, []string, error) {
	fset := token.NewFileSet()
	var long []longFunc
	hasGo := map[string]bool{}
	hasTest := map[string]bool{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != dir && (strings.HasPrefix(name, ".") || name == "node_modules" || name == "testdata" || name == "cdk.out" ||
				filepath.ToSlash(path) == filepath.ToSlash(filepath.Join(dir, "web/dist"))) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		pkg := filepath.Dir(path)
		if strings.HasSuffix(path, "_test.go") {
			hasTest[pkg] = true
		} else {
			hasGo[pkg] = true
		}
		file, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return fmt.Errorf("parsing %s: %w", path, err)
		}
		ast.Inspect(file, func(n ast.Node) bool {
			var name string
			var body *ast.BlockStmt
			switch fn := n.(type) {
			case *ast.FuncDecl:
				name, body = funcName(fn), fn.Body
			case *ast.FuncLit:
				name, body = "func literal", fn.Body
			default:
				return true
			}
			if body == nil {
				return true
			}
			start, end := fset.Position(n.Pos()), fset.Position(body.Rbrace)
			if lines := end.Line - start.Line + 1; lines > max {
				long = append(long, longFunc{pos: fmt.Sprintf("%s:%d", start.Filename, start.Line), name: name, lines: lines})
			}
			return true
		})
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	sort.Slice(long, func(i, j int) bool {
		if long[i].lines != long[j].lines {
			return long[i].lines > long[j].lines
		}
		return long[i].pos < long[j].pos
	})
	var untested []string
	for pkg := range hasGo {
		if !hasTest[pkg] {
			untested = append(untested, pkg)
		}
	}
	sort.Strings(untested)
	return long, untested, nil
}

func funcName(fn *ast.FuncDecl) string {
	if fn.Recv == nil || len(fn.Recv.List) == 0 {
		return fn.Name.Name
	}
	t := fn.Recv.List[0].Type
	if s, ok := t.(*ast.StarExpr); ok {
		t = s.X
	}
	if ix, ok := t.(*ast.IndexExpr); ok {
		t = ix.X
	}
	if id, ok := t.(*ast.Ident); ok {
		return id.Name + "." + fn.Name.Name
	}
	return fn.Name.Name
}
