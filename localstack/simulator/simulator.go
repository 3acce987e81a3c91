// Package simulator is a real HTTP server that stands in for the DeviantArt
// API paths the publisher uses, so the publisher can be tested and run
// offline: pointing the base URL at the real service is the only change.
//
// It speaks:
//
//   - POST /oauth2/token: grant_type=refresh_token with rotating refresh
//     tokens, for the configured OAuth client only (client_id and
//     client_secret in the form or as HTTP Basic; anything else is 401
//     invalid_client). A token that was already used is refused
//     (invalid_grant); a token never seen before is accepted as a fresh
//     grant, so a test can connect an account with any string. Access
//     tokens expire (Options.AccessTokenTTL, 1 h by default).
//   - POST /api/v1/oauth2/stash/submit: a multipart file plus title (≤ 50
//     characters), artist_comments, tags[] and stack, answered with itemid.
//   - POST /api/v1/oauth2/stash/publish: itemid answered with deviationid and
//     url; publishing an item twice is refused (error_code
//     "already_published") and records nothing.
//   - GET /api/v1/oauth2/stash/item/{itemid} and GET /api/v1/oauth2/stash/delta:
//     the lookups a client uses to find out what an interrupted attempt
//     already did. This is the contract the publisher assumes; a real
//     DeviantArt integration maps it onto stash/delta and the deviation
//     endpoints.
//
// Every API call may be rate limited per access token (429
// user_api_threshold with Retry-After; Options.RateLimit, off by default)
// and delayed (Options.Latency and LatencyJitter, none by default), so a
// run can look like the real service.
//
// For tests there are control endpoints under /_sim: fault injection by
// path (status, rate, count, Retry-After, latency), the settings that can
// change while it runs (latency, rate limit, token lifetime), the
// publications made, call statistics, and a reset. Every answer is JSON,
// errors included.
package simulator

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	mrand "math/rand/v2"
)

// AccessTokenTTLDefault is how long an access token lives unless
// Options.AccessTokenTTL says otherwise.
const AccessTokenTTLDefault = time.Hour

// SubmitMaxBytes bounds one stash/submit request body; larger bodies are
// answered 413.
const SubmitMaxBytes = 256 << 20

// Paths of the simulated API, as counted in Stats.Calls.
const (
	PathToken   = "/oauth2/token"
	PathSubmit  = "/api/v1/oauth2/stash/submit"
	PathPublish = "/api/v1/oauth2/stash/publish"
	PathItem    = "/api/v1/oauth2/stash/item"
	PathDelta   = "/api/v1/oauth2/stash/delta"
)

// ClientIDDefault and ClientSecretDefault are the OAuth client credentials
// the token endpoint requires unless Options name others. The local stack
// generates its own and gives the same to the simulator and the functions.
const (
	ClientIDDefault     = "conveyor-simulator"
	ClientSecretDefault = "conveyor-simulator-secret"
)

// RateWindowDefault is the window of the per-token rate limit unless
// Options.RateWindow says otherwise.
const RateWindowDefault = time.Minute

// Options configures a Server. The zero value is ready to use: a strict
// token endpoint for ClientIDDefault, tokens that live an hour, no rate
// limit and no added latency.
type Options struct {
	// ClientID and ClientSecret are the only OAuth client credentials the
	// token endpoint accepts. Default ClientIDDefault and
	// ClientSecretDefault (both or neither: a lone value is kept with the
	// other's default).
	ClientID, ClientSecret string
	// AccessTokenTTL is how long an access token is accepted after it is
	// issued. Default AccessTokenTTLDefault (1h).
	AccessTokenTTL time.Duration
	// RateLimit is how many API calls one access token may make per
	// RateWindow; the next is answered 429 user_api_threshold with a
	// Retry-After until the window ends. Default 0: no limit.
	RateLimit int
	// RateWindow is the fixed window of RateLimit, starting at a token's
	// first call. Default RateWindowDefault (1m).
	RateWindow time.Duration
	// Latency delays every call of the simulated API (not /_sim or
	// /healthz), and LatencyJitter adds a uniformly drawn extra delay up
	// to itself, so a run can look like the real service. Default 0.
	Latency, LatencyJitter time.Duration
	// Now is the clock used for token expiry and publication times.
	// Default time.Now.
	Now func() time.Time
	// Seed seeds the draws that decide whether a fault with a rate below 1
	// fires, so a test can make them repeatable. Default 0: seeded from
	// the time.
	Seed int64
}

// Server is the simulator: an http.Handler safe for concurrent use. Its
// state lives in memory and is cleared by Reset.
type Server struct {
	opts Options
	mux  *http.ServeMux

	mu       sync.Mutex
	rng      *mrand.Rand
	st       state
	set      Settings // what /_sim/settings changes; Reset restores opts'
	faultSeq int
}

// state is everything Reset clears.
type state struct {
	refresh   map[string]int    // live refresh token → account
	used      map[string]int    // rotated-away refresh token → account
	access    map[string]access // access token → account and expiry
	accounts  []*account        // index = account id - 1
	items     map[int64]*item
	stacks    map[stackKey]int64
	nextItem  int64
	nextStack int64
	pubs      []Publication
	faults    []*Fault
	calls     map[string]map[string]int
	refreshes int
	windows   map[string]*window // access token → its rate-limit window
}

// New returns a Server configured by opts.
func New(opts Options) *Server {
	opts = opts.withDefaults()
	seed := uint64(opts.Seed)
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	s := &Server{opts: opts, rng: mrand.New(mrand.NewPCG(seed, 0x5eed))}
	s.st = newState()
	s.set = settingsOf(opts)
	s.mux = s.routes()
	return s
}

// withDefaults fills the options left empty or out of range.
func (o Options) withDefaults() Options {
	if o.ClientID == "" {
		o.ClientID = ClientIDDefault
	}
	if o.ClientSecret == "" {
		o.ClientSecret = ClientSecretDefault
	}
	if o.AccessTokenTTL <= 0 {
		o.AccessTokenTTL = AccessTokenTTLDefault
	}
	if o.RateWindow <= 0 {
		o.RateWindow = RateWindowDefault
	}
	o.RateLimit = max(o.RateLimit, 0)
	o.Latency, o.LatencyJitter = max(o.Latency, 0), max(o.LatencyJitter, 0)
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// routes serves the external API's endpoints, the simulator's own
// controls (/_sim/…) and a health check.
func (s *Server) routes() *http.ServeMux {
	mux := http.NewServeMux()
	route := func(pattern, method string, h http.HandlerFunc) {
		mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
			if r.Method != method && (method != http.MethodGet || r.Method != http.MethodHead) {
				w.Header().Set("Allow", method)
				apiError(w, http.StatusMethodNotAllowed, "invalid_request", "method not allowed")
				return
			}
			h(w, r)
		})
	}
	route(PathToken, http.MethodPost, s.token)
	route(PathSubmit, http.MethodPost, s.submit)
	route(PathPublish, http.MethodPost, s.publish)
	route(PathItem+"/{itemid}", http.MethodGet, s.item)
	route(PathDelta, http.MethodGet, s.delta)
	mux.HandleFunc("/_sim/faults", func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodPost:
			s.addFault(w, r)
		case http.MethodGet, http.MethodHead:
			s.listFaults(w, r)
		case http.MethodDelete:
			s.ClearFaults()
			w.WriteHeader(http.StatusNoContent)
		default:
			w.Header().Set("Allow", "GET, POST, DELETE")
			apiError(w, http.StatusMethodNotAllowed, "invalid_request", "method not allowed")
		}
	})
	mux.HandleFunc("/_sim/settings", func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodGet, http.MethodHead:
			writeJSON(w, http.StatusOK, s.Settings())
		case http.MethodPut, http.MethodPatch:
			s.putSettings(w, r)
		default:
			w.Header().Set("Allow", "GET, PUT, PATCH")
			apiError(w, http.StatusMethodNotAllowed, "invalid_request", "method not allowed")
		}
	})
	route("/_sim/publications", http.MethodGet, func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, s.Publications())
	})
	route("/_sim/items", http.MethodGet, func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, s.Items())
	})
	route("/_sim/stats", http.MethodGet, func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, s.Stats())
	})
	route("/_sim/reset", http.MethodPost, func(w http.ResponseWriter, r *http.Request) {
		s.Reset()
		w.WriteHeader(http.StatusNoContent)
	})
	route("/healthz", http.MethodGet, func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		apiError(w, http.StatusNotFound, "invalid_request", "unknown path")
	})
	return mux
}

func newState() state {
	return state{
		refresh: map[string]int{}, used: map[string]int{}, access: map[string]access{},
		items: map[int64]*item{}, stacks: map[stackKey]int64{}, calls: map[string]map[string]int{},
		windows: map[string]*window{}, nextItem: 1000, nextStack: 500000,
	}
}

// Reset forgets everything: faults, tokens, accounts, items, publications,
// rate-limit windows and statistics, and restores the settings of Options
// (as POST /_sim/reset does). Tokens handed out before are unknown
// afterwards; an old refresh token is then a fresh grant again.
func (s *Server) Reset() {
	s.mu.Lock()
	s.st = newState()
	s.set = settingsOf(s.opts)
	s.mu.Unlock()
}

// Start serves a new Server on addr ("127.0.0.1:0" picks a free port). It
// returns the server, its base URL (http://host:port) and a stop function
// that shuts it down, ending requests still waiting on injected latency.
func Start(addr string, opts Options) (*Server, string, func(), error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, "", nil, err
	}
	s := New(opts)
	base, cancel := context.WithCancel(context.Background())
	srv := &http.Server{
		Handler:           s,
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return base },
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			ctx, cancelShutdown := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancelShutdown()
			if err := srv.Shutdown(ctx); err != nil {
				_ = srv.Close()
			}
			<-done
		})
	}
	return s, "http://" + ln.Addr().String(), stop, nil
}

// ServeHTTP waits the configured latency, applies the first matching fault
// (with its own latency on top), serves the request and counts the call in
// the statistics (control endpoints and /healthz are neither delayed,
// faulted nor counted).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, "/_sim/") || r.URL.Path == "/healthz" {
		s.mux.ServeHTTP(w, r)
		return
	}
	sw := &statusWriter{ResponseWriter: w}
	defer s.count(statsPath(r.URL.Path), sw)
	if !s.wait(sw, r, s.latency()) {
		return
	}
	if f, ok := s.fault(r.URL.Path); ok {
		if !s.wait(sw, r, time.Duration(f.LatencyMs)*time.Millisecond) {
			return
		}
		if f.Status != 0 {
			if f.RetryAfter > 0 {
				sw.Header().Set("Retry-After", strconv.Itoa(f.RetryAfter))
			}
			apiError(sw, f.Status, errorName(f.Status), "injected fault")
			return
		}
	}
	s.mux.ServeHTTP(sw, r)
}

// wait delays the answer by d. It returns false, having answered, when the
// client went away first (or the server is stopping): the answer is for
// whoever is left, and the statistics count it as nginx's 499.
func (s *Server) wait(sw *statusWriter, r *http.Request, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-r.Context().Done():
		sw.status = statusClientClosed
		apiError(sw.ResponseWriter, http.StatusServiceUnavailable, "server_error", "request cancelled")
		return false
	case <-t.C:
		return true
	}
}

// latency draws the delay of one call from the settings.
func (s *Server) latency() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := time.Duration(s.set.LatencyMs) * time.Millisecond
	if j := s.set.LatencyJitterMs; j > 0 {
		d += time.Duration(s.rng.Int64N(int64(j)*int64(time.Millisecond) + 1))
	}
	return d
}

// statusClientClosed is what the statistics record for a request whose
// client went away while it waited on injected latency (nginx's 499).
const statusClientClosed = 499

func statsPath(p string) string {
	if strings.HasPrefix(p, PathItem+"/") {
		return PathItem
	}
	return p
}

func (s *Server) count(path string, sw *statusWriter) {
	status := sw.status
	if status == 0 {
		status = http.StatusOK
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	byStatus := s.st.calls[path]
	if byStatus == nil {
		byStatus = map[string]int{}
		s.st.calls[path] = byStatus
	}
	byStatus[strconv.Itoa(status)]++
}

// statusWriter remembers the status written, for the statistics.
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
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"status":"error","error":"server_error","error_description":"encoding the answer"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// apiError writes a DeviantArt-shaped error.
func apiError(w http.ResponseWriter, status int, code, desc string) {
	writeJSON(w, status, errorBody{Status: "error", Error: code, Description: desc})
}

type errorBody struct {
	Status      string `json:"status"`
	Error       string `json:"error"`
	Description string `json:"error_description"`
	Code        string `json:"error_code,omitempty"`
}

// errorName is the "error" of an injected status, as DeviantArt names it.
func errorName(status int) string {
	switch {
	case status == http.StatusTooManyRequests:
		return "user_api_threshold"
	case status >= 500:
		return "server_error"
	case status == http.StatusUnauthorized:
		return "invalid_token"
	case status == http.StatusForbidden:
		return "insufficient_scope"
	}
	return "invalid_request"
}

var errBadParam = errors.New("bad parameter")

// intParam parses a non-negative integer query parameter (def if absent).
func intParam(v string, def int) (int, error) {
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, errBadParam
	}
	return n, nil
}
