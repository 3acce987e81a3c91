package web

import (
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/conveyor/conveyor/internal/httpapi"
	"github.com/conveyor/conveyor/internal/job"
)

// SessionPath is where the local stack's gateway serves the dashboard its
// session: the app asks it first and signs itself in when it answers.
const SessionPath = Prefix + "sign-in.json"

// LocalUser is who the dashboard (and the CLI, by default) acts as on the
// local stack.
const LocalUser = "local-admin"

// SessionTTLDefault is how long a local session's token lasts.
const SessionTTLDefault = 12 * time.Hour

// Session is what the dashboard signs in with: a token and where the API
// and the event streams are (empty: the page's origin).
type Session struct {
	Token      string `json:"token"`
	APIBase    string `json:"apiBase"`
	EventsBase string `json:"eventsBase"`
	ExpiresAt  string `json:"expiresAt"`
}

// LocalSession configures SessionHandler.
type LocalSession struct {
	// Env is the stack's environment (CONVEYOR_ENV): anything but local is
	// refused, whatever else is set.
	Env job.Env
	// Secret is the environment's HS256 key.
	Secret []byte
	// StreamURL is the origin of the event streams ("" or the API's own:
	// the page's origin).
	StreamURL string
	// TTL is the token's lifetime (default SessionTTLDefault).
	TTL time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// SessionHandler answers GET SessionPath with an admin token for LocalUser,
// so that the dashboard opens signed in on the local stack. It exists only
// there, and answers 404 outside CONVEYOR_ENV=local, to a request whose Host
// is not a loopback address (a page of another site cannot reach it by
// rebinding its name to 127.0.0.1), and to a cross-site request.
func SessionHandler(cfg LocalSession) http.Handler {
	if cfg.TTL <= 0 {
		cfg.TTL = SessionTTLDefault
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Type", "application/json")
		h.Set("Cache-Control", "no-store")
		h.Set("X-Content-Type-Options", "nosniff")
		if cfg.Env != job.Local || len(cfg.Secret) == 0 || !loopbackHost(r.Host) || r.Header.Get("Sec-Fetch-Site") == "cross-site" {
			w.WriteHeader(http.StatusNotFound)
			_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"code": "not_found",
				"message": "no local session here: the dashboard signs itself in only on the local stack (CONVEYOR_ENV=local, on 127.0.0.1); elsewhere paste a token"}})
			return
		}
		exp := cfg.Now().Add(cfg.TTL)
		tok, err := httpapi.Mint(cfg.Secret, httpapi.Claims{Subject: LocalUser, Role: httpapi.RoleAdmin, Plan: "pro", ExpiresAt: exp})
		if err != nil {
			http.Error(w, `{"error":{"code":"internal","message":"minting the local token failed"}}`, http.StatusInternalServerError)
			return
		}
		_ = json.NewEncoder(w).Encode(Session{Token: tok, EventsBase: strings.TrimRight(cfg.StreamURL, "/"), ExpiresAt: exp.UTC().Format(time.RFC3339)})
	})
}

// loopbackHost: the request was addressed to 127.0.0.1, ::1 or localhost.
func loopbackHost(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		host = hostport
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}
