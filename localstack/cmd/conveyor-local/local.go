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
