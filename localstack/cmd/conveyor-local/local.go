package main

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/conveyor/conveyor/internal/config"
)

// localDir holds the local stack's files (git-ignored).
const localDir = ".local"

// keepJWTSecret makes CONVEYOR_JWT_SECRET the one kept in dir/jwt-secret
// (made when absent or when fresh), unless the environment sets it; it
// returns what the banner says about tokens.
func keepJWTSecret(dir string, fresh bool) (string, error) {
	if os.Getenv(config.VarJWTSecret) != "" {
		return "signed with CONVEYOR_JWT_SECRET from the environment", nil
	}
	path := filepath.Join(dir, "jwt-secret")
	raw, err := os.ReadFile(path)
	secret := strings.TrimSpace(string(raw))
	switch {
	case err == nil && secret != "" && !fresh:
		os.Setenv(config.VarJWTSecret, secret)
		return "signed with the secret kept in " + path + ": tokens minted before a restart stay valid (make run FRESH=1 for a new one)", nil
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return "", fmt.Errorf("reading %s: %w", path, err)
	}
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	secret = hex.EncodeToString(b)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	if err := os.WriteFile(path, []byte(secret+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("keeping the token secret in %s: %w", path, err)
	}
	os.Setenv(config.VarJWTSecret, secret)
	return "signed with a new secret, kept in " + path + " for the next runs (tokens minted before no longer verify)", nil
}

// envFileFor is the file this stack's environment goes to: dir/env, unless
// a stack that answers at another address wrote it; then dir/env.<port>.
func envFileFor(dir, apiURL string) string {
	main := filepath.Join(dir, "env")
	other := apiURLIn(main)
	if other == "" || other == apiURL || !answers(other) {
		return main
	}
	port := "other"
	if u, err := url.Parse(apiURL); err == nil {
		if _, p, err := net.SplitHostPort(u.Host); err == nil {
			port = p
		}
	}
	return main + "." + port
}

// apiURLIn reads CONVEYOR_API_URL from an env file ("" when absent).
func apiURLIn(path string) string {
	raw, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "export CONVEYOR_API_URL="); ok {
			return strings.Trim(v, "'\"")
		}
	}
	return ""
}

// answers reports whether a stack answers at apiURL.
func answers(apiURL string) bool {
	c := http.Client{Timeout: time.Second}
	resp, err := c.Get(apiURL + "/healthz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return true
}

// keepData returns the directory the emulators keep their data in
// (dir/data: DynamoDB Local's database and moto's state file), emptied
// first when fresh, and what the banner says about it. Only one running
// stack may use it: it is locked while the stack runs, and a second stack
// starts with empty emulators that keep nothing ("" and a note saying so).
func keepData(dir string, fresh bool) (path string, unlock func(), note string, err error) {
	path = filepath.Join(dir, "data")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", nil, "", err
	}
	lock, err := os.OpenFile(filepath.Join(dir, "data.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return "", nil, "", err
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = lock.Close()
		return "", func() {}, "another running stack keeps " + path + "; this one starts empty and keeps nothing", nil
	}
	unlock = func() { _ = lock.Close() }
	_, statErr := os.Stat(path)
	switch {
	case fresh:
		if err := os.RemoveAll(path); err != nil {
			unlock()
			return "", nil, "", fmt.Errorf("emptying %s: %w", path, err)
		}
		note = "started empty (FRESH=1); kept in " + path + " for the next runs"
	case statErr == nil:
		note = "kept from the last run in " + path + " (make run FRESH=1 starts empty)"
	default:
		note = "started empty; kept in " + path + " for the next runs (make run FRESH=1 starts empty)"
	}
	return path, unlock, note, nil
}
