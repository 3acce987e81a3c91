// Package simulator is a real HTTP server that stands in for the DeviantArt
// API paths the publisher uses, so the publisher can be tested and run
// offline: pointing the base URL at the real service is the only change.
//
// It speaks:
//
//   - POST /oauth2/token: grant_type=refresh_token with rotating refresh
//     tokens. A token that was already used is refused (invalid_grant); a
//     token never seen before is accepted as a fresh grant, so a test can
//     connect an account with any string.
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
// and, for tests, control endpoints under /_sim: fault injection by path
// (status, rate, count, Retry-After, latency), the publications made, call
// statistics, and a reset. Every answer is JSON, errors included.
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

// Options configures a Server. The zero value is ready to use.
type Options struct {
	// AccessTokenTTL is how long an access token is accepted after it is
	// issued. Default AccessTokenTTLDefault (1h).
	AccessTokenTTL time.Duration
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
}

// New returns a Server configured by opts.
func New(opts Options) *Server {
	if opts.AccessTokenTTL <= 0 {
		opts.AccessTokenTTL = AccessTokenTTLDefault
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	seed := uint64(opts.Seed)
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	s := &Server{opts: opts, rng: mrand.New(mrand.NewPCG(seed, 0x5eed))}
	s.st = newState()

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
	s.mux = mux
	return s
}

func newState() state {
	return state{
		refresh: map[string]int{}, used: map[string]int{}, access: map[string]access{},
		items: map[int64]*item{}, stacks: map[stackKey]int64{}, calls: map[string]map[string]int{},
		nextItem: 1000, nextStack: 500000,
	}
}

// Reset forgets everything: faults, tokens, accounts, items, publications
// and statistics (as POST /_sim/reset does). Tokens handed out before are
// unknown afterwards; an old refresh token is then a fresh grant again.
func (s *Server) Reset() {
	s.mu.Lock()
	s.st = newState()
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

// ServeHTTP applies the first matching fault, serves the request and counts
// the call in the statistics (control endpoints and /healthz are neither
// faulted nor counted).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, "/_sim/") || r.URL.Path == "/healthz" {
		s.mux.ServeHTTP(w, r)
		return
	}
	sw := &statusWriter{ResponseWriter: w}
	defer s.count(statsPath(r.URL.Path), sw)
	if f, ok := s.fault(r.URL.Path); ok {
		if f.LatencyMs > 0 {
			t := time.NewTimer(time.Duration(f.LatencyMs) * time.Millisecond)
			select {
			case <-r.Context().Done():
				// The client went away (or the server is stopping): answer
				// for whoever is left, count it as nginx's 499.
				t.Stop()
				sw.status = statusClientClosed
				apiError(w, http.StatusServiceUnavailable, "server_error", "request cancelled")
				return
			case <-t.C:
			}
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
