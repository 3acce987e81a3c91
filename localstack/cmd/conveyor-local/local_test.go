package main

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/conveyor/conveyor/internal/config"
)

// TestTheTokenSecretOutlivesARestart: a second start reads the secret the
// first one kept, so tokens minted against the first still verify; fresh
// makes a new one.
func TestTheTokenSecretOutlivesARestart(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(config.VarJWTSecret, "")
	if _, err := keepJWTSecret(dir, false); err != nil {
		t.Fatal(err)
	}
	first := os.Getenv(config.VarJWTSecret)
	os.Unsetenv(config.VarJWTSecret)
	if _, err := keepJWTSecret(dir, false); err != nil {
		t.Fatal(err)
	}
	if again := os.Getenv(config.VarJWTSecret); again != first || first == "" {
		t.Fatalf("restart: secret %q, want the kept %q", again, first)
	}
	os.Unsetenv(config.VarJWTSecret)
	if _, err := keepJWTSecret(dir, true); err != nil {
		t.Fatal(err)
	}
	if fresh := os.Getenv(config.VarJWTSecret); fresh == first {
		t.Fatal("fresh kept the old secret")
	}
	if fi, err := os.Stat(filepath.Join(dir, "jwt-secret")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the kept secret: %v %v, want mode 0600", fi, err)
	}
}

// TestEachStackHasItsOwnEnvFile: a stack writes .local/env unless another
// stack that still answers wrote it.
func TestEachStackHasItsOwnEnvFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	main := filepath.Join(dir, "env")
	if got := envFileFor(dir, "http://127.0.0.1:9000"); got != main {
		t.Fatalf("no other stack: %s, want %s", got, main)
	}
	live := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer live.Close()
	os.WriteFile(main, []byte("export CONVEYOR_API_URL='"+live.URL+"'\n"), 0o600)
	if got := envFileFor(dir, "http://127.0.0.1:9000"); got != main+".9000" {
		t.Fatalf("another live stack: %s, want %s", got, main+".9000")
	}
	os.WriteFile(main, []byte("export CONVEYOR_API_URL='http://127.0.0.1:1'\n"), 0o600)
	if got := envFileFor(dir, "http://127.0.0.1:9000"); got != main {
		t.Fatalf("a dead stack's file: %s, want %s (replaced)", got, main)
	}
}

// TestTheDataDirectoryIsKeptLockedAndEmptiedOnRequest: the first stack
// keeps its data in dir/data; a second one while it runs keeps nothing; the
// next run finds the data; FRESH empties it.
func TestTheDataDirectoryIsKeptLockedAndEmptiedOnRequest(t *testing.T) {
	dir := t.TempDir()
	path, unlock, note, err := keepData(dir, false)
	if err != nil || path != filepath.Join(dir, "data") || !strings.Contains(note, "started empty") {
		t.Fatalf("first run: %q %q %v", path, note, err)
	}
	if err := os.MkdirAll(filepath.Join(path, "dynamodb"), 0o700); err != nil {
		t.Fatal(err)
	}
	second, unlock2, note2, err := keepData(dir, false)
	if err != nil || second != "" || !strings.Contains(note2, "another running stack") {
		t.Fatalf("a second stack while the first runs: %q %q %v", second, note2, err)
	}
	unlock2()
	unlock()
	path, unlock, note, err = keepData(dir, false)
	if err != nil || path == "" || !strings.Contains(note, "kept from the last run") {
		t.Fatalf("the next run: %q %q %v", path, note, err)
	}
	unlock()
	path, unlock, note, err = keepData(dir, true)
	defer unlock()
	if _, serr := os.Stat(filepath.Join(path, "dynamodb")); err != nil || !os.IsNotExist(serr) || !strings.Contains(note, "FRESH=1") {
		t.Fatalf("FRESH: %q %q %v, the old data: %v", path, note, err, serr)
	}
}
