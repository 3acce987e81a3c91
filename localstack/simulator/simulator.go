// Package simulator is a real HTTP server that speaks the DeviantArt API
// paths the publisher uses — OAuth refresh with rotating refresh tokens,
// stash/submit (multipart), stash/publish, and the item lookups a client
// needs to find out what already happened after a crash — plus control
// endpoints for tests: fault injection by path, the publications made, and
// call statistics. Pointing the base URL at the real service is the only
// change needed to go live.
//
// The lookup contract the publisher assumes: GET /api/v1/oauth2/stash/item/{itemid}
// tells whether an item was published (and its deviation), and
// GET /api/v1/oauth2/stash/delta lists the account's items with the stack
// each was submitted to. A real integration maps these onto DeviantArt's
// stash/delta and deviation endpoints.
package simulator

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	mrand "math/rand/v2"
	"mime"
	"mime/multipart"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Options configures a Server.
type Options struct {
	// AccessTokenTTL is how long an access token lives (default 1h).
	AccessTokenTTL time.Duration
	// Now defaults to time.Now.
	Now func() time.Time
	// Seed seeds fault rates (0: random).
	Seed int64
}

// Publication is one published deviation.
type Publication struct {
	DeviationID string    `json:"deviationid"`
	ItemID      int64     `json:"itemid"`
	Title       string    `json:"title"`
	Stack       string    `json:"stack"`
	PublishedAt time.Time `json:"publishedAt"`
}

// Fault is an injected failure on requests whose path matches.
type Fault struct {
	ID         int     `json:"id"`
	Path       string  `json:"path"`
	Status     int     `json:"status"`
	Rate       float64 `json:"rate"`
	RetryAfter int     `json:"retryAfter"`
	LatencyMs  int     `json:"latencyMs"`
	Count      int     `json:"count"`
	fired      int
}

type item struct {
	ID          int64
	Account     int
	Stack       string
	StackID     int64
	Title       string
	Size        int64
	SHA256      string
	Published   bool
	DeviationID string
	URL         string
}

type access struct {
	account int
	expires time.Time
}

// Server is the simulator.
type Server struct {
	opts Options
	mu   sync.Mutex
	rng  *mrand.Rand
	// refresh tokens: live ones map to their account; used ones are remembered.
	refresh     map[string]int
	usedRefresh map[string]bool
	accessTok   map[string]access
	accounts    int
	refreshes   int
	items       map[int64]*item
	stacks      map[string]int64
	nextItem    int64
	pubs        []Publication
	faults      []*Fault
	nextFault   int
	calls       map[string]map[string]int
	mux         *http.ServeMux
}

// New returns a Server.
func New(opts Options) *Server {
	if opts.AccessTokenTTL == 0 {
		opts.AccessTokenTTL = time.Hour
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	seed := opts.Seed
	if seed == 0 {
		seed = time.Now().UnixNano()
	}
	s := &Server{opts: opts, rng: mrand.New(mrand.NewPCG(uint64(seed), 0x5eed))}
	s.reset()
	mux := http.NewServeMux()
	mux.HandleFunc("POST /oauth2/token", s.token)
	mux.HandleFunc("POST /api/v1/oauth2/stash/submit", s.submit)
	mux.HandleFunc("POST /api/v1/oauth2/stash/publish", s.publish)
	mux.HandleFunc("GET /api/v1/oauth2/stash/item/{itemid}", s.item)
	mux.HandleFunc("GET /api/v1/oauth2/stash/delta", s.delta)
	mux.HandleFunc("POST /_sim/faults", s.addFault)
	mux.HandleFunc("GET /_sim/faults", s.listFaults)
	mux.HandleFunc("DELETE /_sim/faults", s.clearFaults)
	mux.HandleFunc("GET /_sim/publications", s.publications)
	mux.HandleFunc("GET /_sim/stats", s.stats)
	mux.HandleFunc("POST /_sim/reset", func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.reset()
		s.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, 200, map[string]string{"status": "ok"}) })
	s.mux = mux
	return s
}

func (s *Server) reset() {
	s.refresh, s.usedRefresh, s.accessTok = map[string]int{}, map[string]bool{}, map[string]access{}
	s.items, s.stacks, s.calls = map[int64]*item{}, map[string]int64{}, map[string]map[string]int{}
	s.pubs, s.faults = nil, nil
	s.nextItem, s.refreshes, s.accounts = 1000, 0, 0
}

// Start listens on addr ("127.0.0.1:0" for a free port) and serves.
func Start(addr string, opts Options) (*Server, string, func(), error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, "", nil, err
	}
	s := New(opts)
	srv := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	stop := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}
	return s, "http://" + ln.Addr().String(), stop, nil
}

// statusWriter records the status for the stats.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = 200
	}
	return w.ResponseWriter.Write(b)
}

// ServeHTTP applies faults, serves, and counts the call.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	sw := &statusWriter{ResponseWriter: w}
	path := r.URL.Path
	if strings.HasPrefix(path, "/api/v1/oauth2/stash/item/") {
		path = "/api/v1/oauth2/stash/item"
	}
	defer func() {
		if !strings.HasPrefix(path, "/_sim") && path != "/healthz" {
			s.mu.Lock()
			if s.calls[path] == nil {
				s.calls[path] = map[string]int{}
			}
			s.calls[path][strconv.Itoa(sw.status)]++
			s.mu.Unlock()
		}
	}()
	if !strings.HasPrefix(path, "/_sim") {
		if f, ok := s.fault(r.URL.Path); ok {
			if f.LatencyMs > 0 {
				t := time.NewTimer(time.Duration(f.LatencyMs) * time.Millisecond)
				select {
				case <-r.Context().Done():
					t.Stop()
					sw.status = 499
					return
				case <-t.C:
				}
			}
			if f.Status != 0 {
				if f.RetryAfter > 0 {
					sw.Header().Set("Retry-After", strconv.Itoa(f.RetryAfter))
				}
				writeJSON(sw, f.Status, map[string]any{"status": "error", "error": errorName(f.Status), "error_description": "injected fault"})
				return
			}
		}
	}
	s.mux.ServeHTTP(sw, r)
}

func errorName(status int) string {
	switch {
	case status == 429:
		return "rate_limited"
	case status >= 500:
		return "server_error"
	case status == 401:
		return "invalid_token"
	}
	return "invalid_request"
}

// fault picks the first matching active fault, if it fires.
func (s *Server) fault(path string) (Fault, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, f := range s.faults {
		if path != f.Path && !strings.HasPrefix(path, f.Path) {
			continue
		}
		rate := f.Rate
		if rate <= 0 {
			rate = 1
		}
		if s.rng.Float64() >= rate {
			return Fault{}, false
		}
		f.fired++
		out := *f
		if f.Count > 0 && f.fired >= f.Count {
			s.faults = append(s.faults[:i], s.faults[i+1:]...)
		}
		return out, true
	}
	return Fault{}, false
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func apiError(w http.ResponseWriter, status int, code, desc string) {
	writeJSON(w, status, map[string]any{"status": "error", "error": code, "error_description": desc})
}

func randomToken(prefix string) string {
	b := make([]byte, 18)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// MintRefreshToken returns a valid, fresh refresh token.
func (s *Server) MintRefreshToken() string { return randomToken("rt_") }

func (s *Server) token(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		apiError(w, 400, "invalid_request", "bad form")
		return
	}
	if r.PostForm.Get("grant_type") != "refresh_token" {
		apiError(w, 400, "unsupported_grant_type", "only refresh_token is supported")
		return
	}
	rt := r.PostForm.Get("refresh_token")
	if rt == "" {
		apiError(w, 400, "invalid_request", "refresh_token is required")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.usedRefresh[rt] {
		apiError(w, 400, "invalid_grant", "the refresh token was already used")
		return
	}
	acct, ok := s.refresh[rt]
	if !ok {
		s.accounts++
		acct = s.accounts // a never-seen token is a fresh grant
	}
	delete(s.refresh, rt)
	s.usedRefresh[rt] = true
	s.refreshes++
	next, at := randomToken("rt_"), randomToken("at_")
	s.refresh[next] = acct
	s.accessTok[at] = access{account: acct, expires: s.opts.Now().Add(s.opts.AccessTokenTTL)}
	writeJSON(w, 200, map[string]any{
		"status": "success", "access_token": at, "token_type": "Bearer",
		"expires_in": int(s.opts.AccessTokenTTL.Seconds()), "refresh_token": next, "scope": "browse stash publish",
	})
}

// authed returns the caller's account, or writes 401.
func (s *Server) authed(w http.ResponseWriter, r *http.Request) (int, bool) {
	tok := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	if tok == "" {
		tok = r.URL.Query().Get("access_token")
	}
	s.mu.Lock()
	a, ok := s.accessTok[tok]
	s.mu.Unlock()
	if !ok || !a.expires.After(s.opts.Now()) {
		apiError(w, 401, "invalid_token", "expired or invalid access token")
		return 0, false
	}
	return a.account, true
}

func (s *Server) submit(w http.ResponseWriter, r *http.Request) {
	acct, ok := s.authed(w, r)
	if !ok {
		return
	}
	mt, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/form-data" || params["boundary"] == "" {
		apiError(w, 400, "invalid_request", "multipart/form-data required")
		return
	}
	mr := multipart.NewReader(r.Body, params["boundary"])
	fields := map[string]string{}
	var size int64
	var sum string
	gotFile := false
	for {
		p, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			apiError(w, 400, "invalid_request", "bad multipart body")
			return
		}
		if p.FileName() != "" {
			h := sha256.New()
			n, err := io.Copy(h, p)
			if err != nil {
				apiError(w, 400, "invalid_request", "bad file part")
				return
			}
			size, sum, gotFile = n, hex.EncodeToString(h.Sum(nil)), true
			continue
		}
		v, _ := io.ReadAll(io.LimitReader(p, 1<<20))
		fields[p.FormName()] = string(v)
	}
	title := fields["title"]
	switch {
	case title == "" || len([]rune(title)) > 50:
		apiError(w, 400, "invalid_request", "title is required and at most 50 characters")
		return
	case !gotFile || size == 0:
		apiError(w, 400, "invalid_request", "a non-empty file is required")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextItem++
	it := &item{ID: s.nextItem, Account: acct, Stack: fields["stack"], Title: title, Size: size, SHA256: sum}
	if it.Stack != "" {
		id, ok := s.stacks[it.Stack]
		if !ok {
			id = 500000 + int64(len(s.stacks))
			s.stacks[it.Stack] = id
		}
		it.StackID = id
	}
	s.items[it.ID] = it
	writeJSON(w, 200, map[string]any{"status": "success", "itemid": it.ID, "stack": it.Stack, "stackid": it.StackID})
}

func (s *Server) publish(w http.ResponseWriter, r *http.Request) {
	acct, ok := s.authed(w, r)
	if !ok {
		return
	}
	if err := r.ParseForm(); err != nil {
		apiError(w, 400, "invalid_request", "bad form")
		return
	}
	id, err := strconv.ParseInt(r.PostForm.Get("itemid"), 10, 64)
	s.mu.Lock()
	defer s.mu.Unlock()
	it, ok := s.items[id]
	if err != nil || !ok || it.Account != acct {
		apiError(w, 400, "invalid_request", "unknown itemid")
		return
	}
	if it.Published {
		writeJSON(w, 400, map[string]any{"status": "error", "error": "invalid_request", "error_description": "Item already published", "error_code": "already_published"})
		return
	}
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	uuid := fmt.Sprintf("%X-%X-%X-%X-%X", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
	it.Published, it.DeviationID = true, uuid
	it.URL = fmt.Sprintf("https://www.deviantart.com/sim/art/%s-%d", slug(it.Title), it.ID)
	s.pubs = append(s.pubs, Publication{DeviationID: uuid, ItemID: it.ID, Title: it.Title, Stack: it.Stack, PublishedAt: s.opts.Now().UTC()})
	writeJSON(w, 200, map[string]any{"status": "success", "url": it.URL, "deviationid": uuid})
}

func slug(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		case b.Len() > 0 && !strings.HasSuffix(b.String(), "-"):
			b.WriteByte('-')
		}
	}
	out := strings.Trim(b.String(), "-")
	if out == "" {
		return "untitled"
	}
	return out
}

func (s *Server) itemJSON(it *item) map[string]any {
	m := map[string]any{"itemid": it.ID, "stackid": it.StackID, "stack": it.Stack, "title": it.Title, "size": it.Size, "published": it.Published}
	if it.Published {
		m["deviationid"], m["url"] = it.DeviationID, it.URL
	}
	return m
}

func (s *Server) item(w http.ResponseWriter, r *http.Request) {
	acct, ok := s.authed(w, r)
	if !ok {
		return
	}
	id, err := strconv.ParseInt(r.PathValue("itemid"), 10, 64)
	s.mu.Lock()
	defer s.mu.Unlock()
	it, ok := s.items[id]
	if err != nil || !ok || it.Account != acct {
		apiError(w, 400, "invalid_request", "unknown itemid")
		return
	}
	writeJSON(w, 200, s.itemJSON(it))
}

func (s *Server) delta(w http.ResponseWriter, r *http.Request) {
	acct, ok := s.authed(w, r)
	if !ok {
		return
	}
	offset, _ := strconv.Atoi(r.URL.Query().Get("offset"))
	limit, _ := strconv.Atoi(r.URL.Query().Get("limit"))
	if limit <= 0 || limit > 120 {
		limit = 120
	}
	s.mu.Lock()
	var mine []*item
	for _, it := range s.items {
		if it.Account == acct {
			mine = append(mine, it)
		}
	}
	s.mu.Unlock()
	sort.Slice(mine, func(i, j int) bool { return mine[i].ID < mine[j].ID })
	entries := []any{}
	for i := offset; i < len(mine) && i < offset+limit; i++ {
		it := mine[i]
		entries = append(entries, map[string]any{"itemid": it.ID, "stackid": it.StackID, "stack": it.Stack, "metadata": map[string]any{"title": it.Title}})
	}
	var next any
	hasMore := offset+limit < len(mine)
	if hasMore {
		next = offset + limit
	}
	writeJSON(w, 200, map[string]any{"has_more": hasMore, "next_offset": next, "entries": entries})
}

func (s *Server) addFault(w http.ResponseWriter, r *http.Request) {
	var f Fault
	dec := json.NewDecoder(io.LimitReader(r.Body, 1<<16))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil || f.Path == "" || f.Rate < 0 || f.Rate > 1 || math.IsNaN(f.Rate) ||
		(f.Status != 0 && (f.Status < 100 || f.Status > 599)) || f.Count < 0 || f.LatencyMs < 0 || f.RetryAfter < 0 {
		apiError(w, 400, "invalid_request", `want {"path","status","rate","retryAfter","latencyMs","count"}`)
		return
	}
	s.mu.Lock()
	s.nextFault++
	f.ID = s.nextFault
	s.faults = append(s.faults, &f)
	s.mu.Unlock()
	writeJSON(w, 201, f)
}

func (s *Server) listFaults(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	out := []Fault{}
	for _, f := range s.faults {
		out = append(out, *f)
	}
	s.mu.Unlock()
	writeJSON(w, 200, out)
}

func (s *Server) clearFaults(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.faults = nil
	s.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

// Publications returns every publication made.
func (s *Server) Publications() []Publication {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Publication{}, s.pubs...)
}

func (s *Server) publications(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, 200, s.Publications())
}

// Stats are call counts per path and status.
type Stats struct {
	Calls        map[string]map[string]int `json:"calls"`
	Refreshes    int                       `json:"refreshes"`
	Publications int                       `json:"publications"`
}

// Stats returns the call counts.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	calls := map[string]map[string]int{}
	for p, m := range s.calls {
		calls[p] = map[string]int{}
		for k, v := range m {
			calls[p][k] = v
		}
	}
	return Stats{Calls: calls, Refreshes: s.refreshes, Publications: len(s.pubs)}
}

func (s *Server) stats(w http.ResponseWriter, r *http.Request) { writeJSON(w, 200, s.Stats()) }

// AddFault injects a fault (as POST /_sim/faults does).
func (s *Server) AddFault(f Fault) {
	s.mu.Lock()
	s.nextFault++
	f.ID = s.nextFault
	s.faults = append(s.faults, &f)
	s.mu.Unlock()
}

// ClearFaults removes every fault.
func (s *Server) ClearFaults() {
	s.mu.Lock()
	s.faults = nil
	s.mu.Unlock()
}
