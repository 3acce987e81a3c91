package lambdaruntime

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"strings"

	"github.com/conveyor/conveyor/internal/resources"
)

// Build compiles the named functions (their main packages,
// ./functions/<name> under moduleRoot) for this host into
// dir/<name>/bootstrap, as Lambda's provided runtime runs them: one
// `go build -tags` resources.LambdaBuildTags `-trimpath` (as make build
// builds what deploys) with CGO off for the host's GOOS/GOARCH.
// The build goes to dir/.build first, where go skips the link of a binary
// that is up to date, so a rebuild of unchanged code takes about a second;
// each bootstrap is then replaced atomically (a hard link renamed over it),
// so a running instance is never disturbed. It returns the bootstraps'
// paths by name.
func Build(ctx context.Context, moduleRoot, dir string, names []string) (map[string]string, error) {
	if len(names) == 0 {
		return map[string]string{}, nil
	}
	stage := filepath.Join(dir, ".build")
	if err := os.MkdirAll(stage, 0o755); err != nil {
		return nil, fmt.Errorf("building the functions: %w", err)
	}
	args := []string{"build", "-tags", resources.LambdaBuildTags, "-trimpath", "-o", stage + string(filepath.Separator)}
	for _, n := range names {
		args = append(args, "./functions/"+n)
	}
	cmd := exec.CommandContext(ctx, goTool(), args...)
	cmd.Dir = moduleRoot
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+goruntime.GOOS, "GOARCH="+goruntime.GOARCH)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("building the functions (go %s): %w\n%s", strings.Join(args, " "), err, out.String())
	}
	paths := map[string]string{}
	for _, n := range names {
		dst := filepath.Join(dir, n, "bootstrap")
		if err := install(filepath.Join(stage, n), dst); err != nil {
			return nil, fmt.Errorf("building the functions: %w", err)
		}
		paths[n] = dst
	}
	return paths, nil
}

// install makes dst the file src is, atomically, unless it is already.
func install(src, dst string) error {
	si, err := os.Stat(src)
	if err != nil {
		return err
	}
	if di, err := os.Stat(dst); err == nil && os.SameFile(si, di) {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	tmp := dst + ".new-" + randomHex(4)
	if err := os.Link(src, tmp); err != nil {
		// No hard links here: copy.
		b, err := os.ReadFile(src)
		if err != nil {
			return err
		}
		if err := os.WriteFile(tmp, b, 0o755); err != nil {
			return err
		}
	}
	if err := os.Rename(tmp, dst); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return nil
}

// goTool is the go command that built this program, or the one on PATH.
func goTool() string {
	if p := filepath.Join(goruntime.GOROOT(), "bin", "go"); goruntime.GOROOT() != "" {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return "go"
}

// ModuleRoot finds the Conveyor module's root (the directory of its go.mod)
// at or above the working directory.
func ModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.Contains(b, []byte("module github.com/conveyor/conveyor\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("runtime: not inside the Conveyor module (no go.mod of github.com/conveyor/conveyor above the working directory)")
		}
		dir = parent
	}
}
