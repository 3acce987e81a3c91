package simulator

import (
	"crypto/rand"
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
// refresh token presented dies; a new one is issued with the access token.
// client_id and client_secret are accepted as sent.
func (s *Server) token(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 1<<16)
	if err := r.ParseForm(); err != nil {
		apiError(w, http.StatusBadRequest, "invalid_request", "the body is not a valid form")
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
		ExpiresIn: int64(s.opts.AccessTokenTTL / time.Second), RefreshToken: randomToken("rt_"),
		Scope: "browse stash publish",
	}
	s.st.refresh[ans.RefreshToken] = acct
	s.st.access[ans.AccessToken] = access{account: acct, expires: now.Add(s.opts.AccessTokenTTL)}
	s.mu.Unlock()
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, ans)
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

// authed returns the caller's account, or answers 401.
func (s *Server) authed(w http.ResponseWriter, r *http.Request) (int, bool) {
	acct, ok := s.accountFor(bearer(r))
	if !ok {
		unauthorized(w)
	}
	return acct, ok
}
