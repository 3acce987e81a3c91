package simulator

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// account is one connected DeviantArt user: the chain of refresh tokens
// rotated from one grant.
type account struct {
	id        int
	refreshes int
}

type access struct {
	account int
	expires time.Time
}

func randomToken(prefix string) string {
	b := make([]byte, 20)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// newAccount registers a new account; s.mu must be held.
func (s *Server) newAccount() int {
	a := &account{id: len(s.st.accounts) + 1}
	s.st.accounts = append(s.st.accounts, a)
	return a.id
}

// MintRefreshToken returns a refresh token that the token endpoint accepts
// once, as the start of a new account's chain.
func (s *Server) MintRefreshToken() string {
	tok := randomToken("rt_")
	s.mu.Lock()
	s.st.refresh[tok] = s.newAccount()
	s.mu.Unlock()
	return tok
}

// AccountOf returns the id of the account a refresh or access token belongs
// to (live, expired or rotated away), or "" if the token was never issued or
// seen. The ids key Stats.Accounts.
func (s *Server) AccountOf(token string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if a, ok := s.st.refresh[token]; ok {
		return accountID(a)
	}
	if a, ok := s.st.used[token]; ok {
		return accountID(a)
	}
	if a, ok := s.st.access[token]; ok {
		return accountID(a.account)
	}
	return ""
}

func accountID(n int) string { return "acct_" + strconv.Itoa(n) }

type tokenAnswer struct {
	Status       string `json:"status"`
	AccessToken  string `json:"access_token"`
	TokenType    string `json:"token_type"`
	ExpiresIn    int64  `json:"expires_in"`
	RefreshToken string `json:"refresh_token"`
	Scope        string `json:"scope"`
}

// token serves POST /oauth2/token with grant_type=refresh_token. The
// client must authenticate first (client_id and client_secret in the form,
// or HTTP Basic), as the configured client; then the refresh token
// presented dies and a new one is issued with the access token.
func (s *Server) token(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 1<<16)
	if err := r.ParseForm(); err != nil {
		apiError(w, http.StatusBadRequest, "invalid_request", "the body is not a valid form")
		return
	}
	if !s.clientOK(r) {
		// RFC 6749 §5.2, and what DeviantArt answers: 401 invalid_client,
		// never saying which of the two was wrong.
		w.Header().Set("WWW-Authenticate", `Basic realm="oauth2"`)
		apiError(w, http.StatusUnauthorized, "invalid_client", "client authentication failed: unknown client_id or wrong client_secret")
		return
	}
	if g := r.Form.Get("grant_type"); g != "refresh_token" {
		apiError(w, http.StatusBadRequest, "unsupported_grant_type", "only grant_type=refresh_token is supported")
		return
	}
	rt := r.Form.Get("refresh_token")
	if rt == "" {
		apiError(w, http.StatusBadRequest, "invalid_request", "refresh_token is required")
		return
	}
	now := s.opts.Now()
	s.mu.Lock()
	ttl := time.Duration(s.set.AccessTokenTTLMs) * time.Millisecond
	if _, used := s.st.used[rt]; used {
		s.mu.Unlock()
		apiError(w, http.StatusBadRequest, "invalid_grant", "the refresh token is invalid or was already used")
		return
	}
	acct, ok := s.st.refresh[rt]
	if !ok {
		acct = s.newAccount() // a token never seen before is a fresh grant
	}
	delete(s.st.refresh, rt)
	s.st.used[rt] = acct
	s.st.refreshes++
	s.st.accounts[acct-1].refreshes++
	ans := tokenAnswer{
		Status: "success", AccessToken: randomToken("at_"), TokenType: "Bearer",
		ExpiresIn: int64(ttl / time.Second), RefreshToken: randomToken("rt_"),
		Scope: "browse stash publish",
	}
	s.st.refresh[ans.RefreshToken] = acct
	s.st.access[ans.AccessToken] = access{account: acct, expires: now.Add(ttl)}
	s.mu.Unlock()
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, ans)
}

// clientOK reports whether the request authenticates as the configured
// client: client_id and client_secret form parameters, or HTTP Basic
// (RFC 6749 §2.3.1), compared in constant time.
func (s *Server) clientOK(r *http.Request) bool {
	id, secret, basic := r.BasicAuth()
	if !basic {
		id, secret = r.Form.Get("client_id"), r.Form.Get("client_secret")
	}
	s.mu.Lock()
	wantID, wantSecret := s.opts.ClientID, s.opts.ClientSecret
	s.mu.Unlock()
	idOK := subtle.ConstantTimeCompare([]byte(id), []byte(wantID))
	secretOK := subtle.ConstantTimeCompare([]byte(secret), []byte(wantSecret))
	return idOK&secretOK == 1
}

// bearer is the access token of a request: the Authorization header, else
// the access_token parameter of the query or, once the handler has parsed
// it, of a url-encoded form. (It never parses a body itself: that would
// buffer a multipart upload.)
func bearer(r *http.Request) string {
	if h := r.Header.Get("Authorization"); h != "" {
		if scheme, tok, ok := strings.Cut(h, " "); ok && strings.EqualFold(scheme, "Bearer") {
			return strings.TrimSpace(tok)
		}
		return ""
	}
	if r.Form != nil {
		return r.Form.Get("access_token")
	}
	return r.URL.Query().Get("access_token")
}

// accountFor returns the account of a live access token.
func (s *Server) accountFor(tok string) (int, bool) {
	if tok == "" {
		return 0, false
	}
	now := s.opts.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.st.access[tok]
	if !ok || !now.Before(a.expires) {
		return 0, false
	}
	return a.account, true
}

func unauthorized(w http.ResponseWriter) {
	w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
	apiError(w, http.StatusUnauthorized, "invalid_token", "expired or invalid access token")
}

// authed returns the caller's account, or answers 401 or 429.
func (s *Server) authed(w http.ResponseWriter, r *http.Request) (int, bool) {
	return s.authorize(w, bearer(r))
}

// authorize returns the account of a live access token that is within its
// rate limit; otherwise it answers 401 (unknown or expired token) or 429
// with Retry-After (over the limit; the refused call does not count).
func (s *Server) authorize(w http.ResponseWriter, tok string) (int, bool) {
	acct, ok := s.accountFor(tok)
	if !ok {
		unauthorized(w)
		return 0, false
	}
	if wait, ok := s.admit(tok); !ok {
		w.Header().Set("Retry-After", strconv.FormatInt(int64((wait+time.Second-1)/time.Second), 10))
		apiError(w, http.StatusTooManyRequests, "user_api_threshold", "user API threshold exceeded")
		return 0, false
	}
	return acct, true
}

// window is one access token's current rate-limit window.
type window struct {
	start time.Time
	calls int
}

// admit counts a call of tok against its limit, or says how long until
// the window ends when the limit is reached.
func (s *Server) admit(tok string) (time.Duration, bool) {
	now := s.opts.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.set.RateLimit <= 0 {
		return 0, true
	}
	span := time.Duration(s.set.RateWindowMs) * time.Millisecond
	win := s.st.windows[tok]
	if win == nil || !now.Before(win.start.Add(span)) {
		win = &window{start: now}
		s.st.windows[tok] = win
	}
	if win.calls >= s.set.RateLimit {
		return max(win.start.Add(span).Sub(now), time.Second), false
	}
	win.calls++
	return 0, true
}
