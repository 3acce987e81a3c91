package simulator

import (
	"encoding/json"
	"io"
	"math"
	"net/http"
	"strings"
	"time"
)

// Fault is a failure injected into requests whose path equals Path or
// starts with it. Faults are tried in the order they were added; the first
// that matches and fires answers the request.
type Fault struct {
	// ID identifies the fault; assigned when it is added.
	ID int `json:"id"`
	// Path is matched exactly or as a prefix of the request path.
	Path string `json:"path"`
	// Status is the error status answered (400–599) with a DeviantArt-like
	// JSON error body; 0 adds latency only and then serves normally.
	Status int `json:"status"`
	// Rate is the probability in (0,1] that the fault fires on a matching
	// request; 0 means always.
	Rate float64 `json:"rate"`
	// RetryAfter, in seconds, is sent as the Retry-After header when > 0.
	RetryAfter int `json:"retryAfter"`
	// LatencyMs delays the answer; the wait ends early if the client goes
	// away.
	LatencyMs int `json:"latencyMs"`
	// Count is how many times the fault fires before it disappears; 0
	// means without limit.
	Count int `json:"count"`
	// Fired is how many times the fault has fired so far.
	Fired int `json:"fired"`
}

func (f Fault) valid() bool {
	return f.Path != "" && strings.HasPrefix(f.Path, "/") && !math.IsNaN(f.Rate) && f.Rate >= 0 && f.Rate <= 1 &&
		(f.Status == 0 || (f.Status >= 400 && f.Status <= 599)) &&
		f.Count >= 0 && f.LatencyMs >= 0 && f.RetryAfter >= 0
}

// AddFault injects f (as POST /_sim/faults does) and returns it with its
// id. Its Fired count starts at 0.
func (s *Server) AddFault(f Fault) Fault {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faultSeq++
	f.ID, f.Fired = s.faultSeq, 0
	s.st.faults = append(s.st.faults, &f)
	return f
}

// Faults returns the active faults in matching order.
func (s *Server) Faults() []Fault {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Fault, 0, len(s.st.faults))
	for _, f := range s.st.faults {
		out = append(out, *f)
	}
	return out
}

// ClearFaults removes every fault (as DELETE /_sim/faults does).
func (s *Server) ClearFaults() {
	s.mu.Lock()
	s.st.faults = nil
	s.mu.Unlock()
}

// fault returns the first active fault that matches path and fires, and
// counts the firing (removing a fault whose count is spent).
func (s *Server) fault(path string) (Fault, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, f := range s.st.faults {
		if !strings.HasPrefix(path, f.Path) {
			continue
		}
		if f.Rate > 0 && f.Rate < 1 && s.rng.Float64() >= f.Rate {
			continue
		}
		f.Fired++
		if f.Count > 0 && f.Fired >= f.Count {
			s.st.faults = append(s.st.faults[:i:i], s.st.faults[i+1:]...)
		}
		return *f, true
	}
	return Fault{}, false
}

func (s *Server) addFault(w http.ResponseWriter, r *http.Request) {
	var f Fault
	dec := json.NewDecoder(io.LimitReader(r.Body, 1<<16))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil || !f.valid() {
		apiError(w, http.StatusBadRequest, "invalid_request",
			`want {"path":"/…","status":0|400–599,"rate":0–1,"retryAfter":s,"latencyMs":ms,"count":n}`)
		return
	}
	writeJSON(w, http.StatusCreated, s.AddFault(f))
}

func (s *Server) listFaults(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, s.Faults())
}

// Stats counts what the simulated API was asked and did since the last
// reset.
type Stats struct {
	// Calls counts requests by path, then by status as a decimal string
	// ("200", "429"), faulted ones included. Every stash/item/{id} call
	// counts under /api/v1/oauth2/stash/item; 499 counts a client that
	// went away during injected latency.
	Calls map[string]map[string]int `json:"calls"`
	// Refreshes counts successful token refreshes.
	Refreshes int `json:"refreshes"`
	// Publications counts successful publications.
	Publications int `json:"publications"`
	// Accounts holds per-account counts, keyed by the id AccountOf returns.
	Accounts map[string]AccountStats `json:"accounts"`
}

// AccountStats counts what one account (one chain of rotated refresh
// tokens) did.
type AccountStats struct {
	// Refreshes counts successful refreshes along the chain.
	Refreshes int `json:"refreshes"`
	// Items counts items submitted.
	Items int `json:"items"`
	// Publications counts items published.
	Publications int `json:"publications"`
}

// Stats returns a snapshot of the statistics (the data of GET /_sim/stats).
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := Stats{Calls: map[string]map[string]int{}, Refreshes: s.st.refreshes, Publications: len(s.st.pubs),
		Accounts: map[string]AccountStats{}}
	for p, m := range s.st.calls {
		c := make(map[string]int, len(m))
		for k, v := range m {
			c[k] = v
		}
		out.Calls[p] = c
	}
	for _, a := range s.st.accounts {
		out.Accounts[accountID(a.id)] = AccountStats{Refreshes: a.refreshes}
	}
	for _, it := range s.st.items {
		id := accountID(it.account)
		a := out.Accounts[id]
		a.Items++
		if it.Published {
			a.Publications++
		}
		out.Accounts[id] = a
	}
	return out
}

// Settings are the knobs that can change while the simulator runs (GET and
// PUT /_sim/settings). They start from Options; Reset restores them.
type Settings struct {
	// LatencyMs delays every call of the simulated API; LatencyJitterMs
	// adds a uniformly drawn extra delay up to itself.
	LatencyMs       int `json:"latencyMs"`
	LatencyJitterMs int `json:"latencyJitterMs"`
	// RateLimit is how many calls one access token may make per
	// RateWindowMs; 0 means no limit.
	RateLimit    int `json:"rateLimit"`
	RateWindowMs int `json:"rateWindowMs"`
	// AccessTokenTTLMs is the lifetime of access tokens issued from now on.
	AccessTokenTTLMs int `json:"accessTokenTtlMs"`
}

func settingsOf(o Options) Settings {
	return Settings{
		LatencyMs: int(o.Latency / time.Millisecond), LatencyJitterMs: int(o.LatencyJitter / time.Millisecond),
		RateLimit: o.RateLimit, RateWindowMs: int(o.RateWindow / time.Millisecond),
		AccessTokenTTLMs: int(o.AccessTokenTTL / time.Millisecond),
	}
}

func (v Settings) valid() bool {
	return v.LatencyMs >= 0 && v.LatencyJitterMs >= 0 && v.RateLimit >= 0 && v.RateWindowMs > 0 && v.AccessTokenTTLMs > 0
}

// Settings returns the current settings.
func (s *Server) Settings() Settings {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.set
}

// SetSettings replaces the settings (as PUT /_sim/settings does) and
// reports whether they were valid: latencies and the limit not negative,
// the window and the token lifetime positive. Invalid settings change
// nothing.
func (s *Server) SetSettings(v Settings) bool {
	if !v.valid() {
		return false
	}
	s.mu.Lock()
	s.set = v
	s.mu.Unlock()
	return true
}

// putSettings changes the fields the body names and keeps the others.
func (s *Server) putSettings(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	v := s.set
	s.mu.Unlock()
	dec := json.NewDecoder(io.LimitReader(r.Body, 1<<16))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil || !s.SetSettings(v) {
		apiError(w, http.StatusBadRequest, "invalid_request",
			`want {"latencyMs":ms,"latencyJitterMs":ms,"rateLimit":n,"rateWindowMs":ms>0,"accessTokenTtlMs":ms>0}, any subset`)
		return
	}
	writeJSON(w, http.StatusOK, s.Settings())
}

// SetClient replaces the OAuth client credentials the token endpoint
// accepts, as regenerating the application's secret at the provider does:
// from now on only the new ones work. Reset keeps them.
func (s *Server) SetClient(id, secret string) {
	s.mu.Lock()
	s.opts.ClientID, s.opts.ClientSecret = id, secret
	s.mu.Unlock()
}

// ClientID returns the OAuth client id the token endpoint accepts (the
// secret is never handed out).
func (s *Server) ClientID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.opts.ClientID
}
