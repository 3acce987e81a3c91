package deviantart_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/conveyor/conveyor/internal/deviantart"
	"github.com/conveyor/conveyor/localstack/simulator"
)

const clientSecret = "cs_very_secret"

var epoch = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

type testBundle struct {
	sim    *simulator.Server
	url    string
	client *deviantart.Client
	rt     *recordingTransport
}

// recordingTransport notes each request as the client hands it over.
type recordingTransport struct {
	base    *http.Transport
	started atomic.Int32
	mu      sync.Mutex
	lengths []int64
}

func (t *recordingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	t.mu.Lock()
	t.lengths = append(t.lengths, req.ContentLength)
	t.mu.Unlock()
	t.started.Add(1)
	return t.base.RoundTrip(req)
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	sim, base, stop, err := simulator.Start("127.0.0.1:0", simulator.Options{Seed: 1, ClientID: "conveyor", ClientSecret: clientSecret})
	if err != nil {
		t.Fatal(err)
	}
	rt := &recordingTransport{base: &http.Transport{ExpectContinueTimeout: time.Second}}
	t.Cleanup(func() {
		stop()
		rt.base.CloseIdleConnections()
	})
	client := newClient(t, deviantart.Config{
		BaseURL: base + "/", ClientID: "conveyor", ClientSecret: clientSecret,
		HTTPClient: &http.Client{Transport: rt}, Now: func() time.Time { return epoch },
	})
	return &testBundle{sim: sim, url: base, client: client, rt: rt}
}

// login connects a new account and returns its access token.
func (b *testBundle) login(t *testing.T) string {
	t.Helper()
	tok, err := b.client.Refresh(context.Background(), b.sim.MintRefreshToken())
	if err != nil {
		t.Fatal(err)
	}
	return tok.AccessToken
}

func submission(stack string, body []byte) deviantart.Submission {
	return deviantart.Submission{Title: "Sleeping cat", Description: "zzz", Tags: []string{"cat", "nap"}, Stack: stack,
		Filename: "cat.png", ContentType: "image/png", Body: bytes.NewReader(body), Size: int64(len(body))}
}

func apiError(t *testing.T, err error) *deviantart.APIError {
	t.Helper()
	var e *deviantart.APIError
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T) is not an *APIError", err, err)
	}
	return e
}

// noSecrets fails if err's message holds any of secrets.
func noSecrets(t *testing.T, err error, secrets ...string) {
	t.Helper()
	for _, s := range append(secrets, clientSecret) {
		if s != "" && strings.Contains(err.Error(), s) {
			t.Errorf("error %q contains a secret", err)
		}
	}
}

func TestRefreshRotates(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()

	first, err := b.client.Refresh(ctx, "connected-by-the-user")
	if err != nil {
		t.Fatal(err)
	}
	if first.AccessToken == "" || first.RefreshToken == "" || !first.ExpiresAt.Equal(epoch.Add(time.Hour)) {
		t.Fatalf("token = %+v", first)
	}
	second, err := b.client.Refresh(ctx, first.RefreshToken)
	if err != nil {
		t.Fatal(err)
	}
	if second.RefreshToken == first.RefreshToken {
		t.Fatal("the refresh token did not rotate")
	}

	_, err = b.client.Refresh(ctx, first.RefreshToken)
	e := apiError(t, err)
	if e.Status != 400 || e.Code != "invalid_grant" || e.Temporary() {
		t.Errorf("reused token: %+v, temporary %v", e, e.Temporary())
	}
	if !deviantart.IsGrantRejected(err) || deviantart.IsClientRejected(err) {
		t.Errorf("reused token: IsGrantRejected %v, IsClientRejected %v, want true, false",
			deviantart.IsGrantRejected(err), deviantart.IsClientRejected(err))
	}
	noSecrets(t, err, first.RefreshToken, second.RefreshToken)

	if _, err := b.client.Refresh(ctx, ""); err == nil {
		t.Error("an empty refresh token was sent")
	}
	if st := b.sim.Stats(); st.Accounts[b.sim.AccountOf(second.AccessToken)].Refreshes != 2 {
		t.Errorf("account refreshes = %+v", st.Accounts)
	}
}

// TestRefreshWithAWrongClient: the strict simulator refuses a client it
// does not know; the error says so without any credential, is not
// temporary, and is told apart from a dead refresh token.
func TestRefreshWithAWrongClient(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tests := []struct{ name, id, secret string }{
		{"wrong secret", "conveyor", "cs_wrong_secret"},
		{"wrong id", "someone", clientSecret},
		{"none", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := newClient(t, deviantart.Config{BaseURL: b.url, ClientID: tt.id, ClientSecret: tt.secret})
			rt := b.sim.MintRefreshToken()
			_, err := c.Refresh(context.Background(), rt)
			e := apiError(t, err)
			if e.Status != 401 || e.Code != "invalid_client" || e.Temporary() {
				t.Errorf("error = %+v, temporary %v; want 401 invalid_client, not temporary", e, e.Temporary())
			}
			if !deviantart.IsClientRejected(err) || deviantart.IsGrantRejected(err) {
				t.Errorf("IsClientRejected %v, IsGrantRejected %v, want true, false",
					deviantart.IsClientRejected(err), deviantart.IsGrantRejected(err))
			}
			noSecrets(t, err, rt, tt.secret)
			// The refused call did not spend the user's refresh token.
			if _, err := b.client.Refresh(context.Background(), rt); err != nil {
				t.Errorf("the refresh token died with the refused client: %v", err)
			}
		})
	}
}

// gatedReader serves size bytes, and before the second half checks that
// the HTTP request has already started: proof the body is streamed.
type gatedReader struct {
	r         io.Reader
	size, n   int64
	started   func() bool
	wasLive   bool
	checkedAt int64
}

func (g *gatedReader) Read(p []byte) (int, error) {
	if g.n >= g.size/2 && g.checkedAt == 0 {
		g.checkedAt, g.wasLive = g.n, g.started()
	}
	n, err := g.r.Read(p)
	g.n += int64(n)
	return n, err
}

func TestSubmitStreamsALargeBody(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tok := b.login(t)

	const size = 8<<20 + 12345
	content := make([]byte, size)
	for i := range content {
		content[i] = byte(i * 7 / 3)
	}
	sum := sha256.Sum256(content)
	body := &gatedReader{r: bytes.NewReader(content), size: size, started: func() bool { return b.rt.started.Load() > 1 }}
	s := submission("itm_big", nil)
	s.Body, s.Size = onlyReader{body}, size

	id, err := b.client.Submit(context.Background(), tok, s)
	if err != nil {
		t.Fatal(err)
	}
	if !body.wasLive {
		t.Error("the body was read to its middle before the request started: it is buffered, not streamed")
	}
	items := b.sim.Items()
	if len(items) != 1 {
		t.Fatalf("items = %+v", items)
	}
	want := simulator.Item{ItemID: id, Account: b.sim.AccountOf(tok), Stack: "itm_big", Title: "Sleeping cat",
		ArtistComments: "zzz", Tags: []string{"cat", "nap"}, Filename: "cat.png", ContentType: "image/png",
		Size: size, SHA256: hex.EncodeToString(sum[:])}
	got := items[0]
	got.StackID, got.SubmittedAt = 0, time.Time{}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("recorded item (-want +got):\n%s", diff)
	}
	b.rt.mu.Lock()
	length := b.rt.lengths[len(b.rt.lengths)-1]
	b.rt.mu.Unlock()
	if length <= size || length > size+4096 {
		t.Errorf("Content-Length = %d, want the file plus a small envelope", length)
	}
}

// onlyReader hides every method but Read.
type onlyReader struct{ r io.Reader }

func (o onlyReader) Read(p []byte) (int, error) { return o.r.Read(p) }

func TestSubmitUnknownSizeIsChunked(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tok := b.login(t)
	s := submission("itm_chunked", []byte("some png bytes"))
	s.Size = 0
	if _, err := b.client.Submit(context.Background(), tok, s); err != nil {
		t.Fatal(err)
	}
	if items := b.sim.Items(); len(items) != 1 || items[0].Size != int64(len("some png bytes")) {
		t.Errorf("items = %+v", items)
	}
}

func TestSubmitRejectsABodyOfTheWrongSize(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tok := b.login(t)
	for _, tt := range []struct {
		name string
		size int64
	}{{"shorter", 100}, {"longer", 10}} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := submission("itm_"+tt.name, bytes.Repeat([]byte("x"), 50))
			s.Size = tt.size
			_, err := b.client.Submit(context.Background(), tok, s)
			if err == nil {
				t.Fatal("no error")
			}
			var e *deviantart.APIError
			if errors.As(err, &e) {
				t.Fatalf("an APIError for a local failure: %v", err)
			}
		})
	}
	t.Cleanup(func() {
		if n := len(b.sim.Items()); n != 0 {
			t.Errorf("%d items recorded from truncated bodies", n)
		}
	})
}

func TestSubmitErrors(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tok := b.login(t)
	ctx := context.Background()

	t.Run("title too long is permanent", func(t *testing.T) {
		t.Parallel()
		s := submission("itm_long", []byte("x"))
		s.Title = strings.Repeat("t", 51)
		_, err := b.client.Submit(ctx, tok, s)
		e := apiError(t, err)
		if e.Status != 400 || e.Code != "invalid_request" || e.Temporary() {
			t.Errorf("err = %+v", e)
		}
	})
	t.Run("dead token is refused before the file is sent", func(t *testing.T) {
		t.Parallel()
		body := &countingReader{r: bytes.NewReader(make([]byte, 4<<20))}
		s := submission("itm_dead", nil)
		s.Body, s.Size = body, 4<<20
		_, err := b.client.Submit(ctx, "at_dead_token", s)
		if e := apiError(t, err); e.Status != 401 || e.Code != "invalid_token" || e.Temporary() {
			t.Errorf("err = %+v", e)
		}
		noSecrets(t, err, "at_dead_token")
		if n := body.n.Load(); n >= 4<<20 {
			t.Errorf("read %d bytes of the file for a refused call", n)
		}
	})
	t.Run("no body", func(t *testing.T) {
		t.Parallel()
		if _, err := b.client.Submit(ctx, tok, deviantart.Submission{Title: "x"}); err == nil {
			t.Error("no error")
		}
	})
}

type countingReader struct {
	r io.Reader
	n atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

func TestPublishAndAlreadyPublished(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tok := b.login(t)
	ctx := context.Background()
	id, err := b.client.Submit(ctx, tok, submission("itm_pub", []byte("png")))
	if err != nil {
		t.Fatal(err)
	}
	dev, err := b.client.Publish(ctx, tok, id)
	if err != nil {
		t.Fatal(err)
	}
	pubs := b.sim.Publications()
	if len(pubs) != 1 || pubs[0].DeviationID != dev.ID || pubs[0].URL != dev.URL || pubs[0].ItemID != id {
		t.Fatalf("publication %+v, client saw %+v", pubs, dev)
	}

	_, err = b.client.Publish(ctx, tok, id)
	if !deviantart.IsAlreadyPublished(err) {
		t.Fatalf("second publish: %v, want already published", err)
	}
	if e := apiError(t, err); e.Temporary() || e.ErrorCode != "already_published" || e.Code != "invalid_request" {
		t.Errorf("err = %+v", e)
	}
	if n := len(b.sim.Publications()); n != 1 {
		t.Errorf("publications = %d, want 1", n)
	}

	_, err = b.client.Publish(ctx, tok, 424242)
	if e := apiError(t, err); e.Status != 400 || e.Temporary() || deviantart.IsAlreadyPublished(err) {
		t.Errorf("unknown item: %+v", e)
	}
	noSecrets(t, err, tok)
}

func TestFindWhatACrashedAttemptDid(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tok := b.login(t)
	ctx := context.Background()

	// More than one delta page of other items first.
	for i := range 130 {
		if _, err := b.client.Submit(ctx, tok, submission(fmt.Sprintf("itm_other_%d", i), []byte("x"))); err != nil {
			t.Fatal(err)
		}
	}
	// The crashed attempt: submitted, answer lost.
	if _, err := b.client.Submit(ctx, tok, submission("itm_crashed", []byte("png"))); err != nil {
		t.Fatal(err)
	}

	found, ok, err := b.client.FindByStack(ctx, tok, "itm_crashed")
	if err != nil || !ok {
		t.Fatalf("FindByStack = %+v, %v, %v", found, ok, err)
	}
	if found.Stack != "itm_crashed" || found.Title != "Sleeping cat" || found.ItemID == 0 {
		t.Errorf("found %+v", found)
	}
	if _, ok, err := b.client.FindByStack(ctx, tok, "itm_never"); ok || err != nil {
		t.Errorf("FindByStack of an unknown stack = %v, %v", ok, err)
	}
	other := b.login(t)
	if _, ok, err := b.client.FindByStack(ctx, other, "itm_crashed"); ok || err != nil {
		t.Errorf("another account sees the item: %v, %v", ok, err)
	}

	before, err := b.client.Item(ctx, tok, found.ItemID)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(deviantart.StashItem{ItemID: found.ItemID, Stack: "itm_crashed", Title: "Sleeping cat"}, before); diff != "" {
		t.Errorf("item before publishing (-want +got):\n%s", diff)
	}

	// The crashed attempt published too, and forgot again.
	if _, err := b.client.Publish(ctx, tok, found.ItemID); err != nil {
		t.Fatal(err)
	}
	after, err := b.client.Item(ctx, tok, found.ItemID)
	if err != nil {
		t.Fatal(err)
	}
	pub := b.sim.Publications()[0]
	want := deviantart.StashItem{ItemID: found.ItemID, Stack: "itm_crashed", Title: "Sleeping cat", Published: true,
		DeviationID: pub.DeviationID, URL: pub.URL}
	if diff := cmp.Diff(want, after); diff != "" {
		t.Errorf("item after publishing (-want +got):\n%s", diff)
	}

	if _, err := b.client.Item(ctx, tok, 1); apiError(t, err).Status != 400 {
		t.Errorf("unknown item: %v", err)
	}
}

func TestInjectedFaults(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tests := []struct {
		name          string
		fault         simulator.Fault
		status        int
		temporary     bool
		retryAfter    time.Duration
		code          string
		alreadyPublic bool
	}{
		{name: "429 with Retry-After", fault: simulator.Fault{Status: 429, RetryAfter: 7}, status: 429, temporary: true, retryAfter: 7 * time.Second, code: "user_api_threshold"},
		{name: "500", fault: simulator.Fault{Status: 500}, status: 500, temporary: true, code: "server_error"},
		{name: "503 with Retry-After", fault: simulator.Fault{Status: 503, RetryAfter: 120}, status: 503, temporary: true, retryAfter: 2 * time.Minute, code: "server_error"},
		{name: "400 is permanent", fault: simulator.Fault{Status: 400}, status: 400, code: "invalid_request"},
		{name: "403 is permanent", fault: simulator.Fault{Status: 403}, status: 403, code: "insufficient_scope"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			tok := b.login(t)
			id, err := b.client.Submit(ctx, tok, submission("itm", []byte("x")))
			if err != nil {
				t.Fatal(err)
			}
			f := tt.fault
			f.Path, f.Count = "/api/v1/oauth2/stash/publish", 1
			b.sim.AddFault(f)

			_, err = b.client.Publish(ctx, tok, id)
			e := apiError(t, err)
			got := struct {
				Status     int
				Temporary  bool
				RetryAfter time.Duration
				Code       string
				Already    bool
			}{e.StatusCode(), e.Temporary(), e.RetryAfter(), e.Code, deviantart.IsAlreadyPublished(err)}
			want := got
			want.Status, want.Temporary, want.RetryAfter, want.Code, want.Already = tt.status, tt.temporary, tt.retryAfter, tt.code, tt.alreadyPublic
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("error %q (-want +got):\n%s", err, diff)
			}
			noSecrets(t, err, tok)
			if n := len(b.sim.Publications()); n != 0 {
				t.Errorf("a faulted call published (%d)", n)
			}
			if _, err := b.client.Publish(ctx, tok, id); err != nil {
				t.Errorf("after the fault: %v", err)
			}
		})
	}
}

func TestDeadlineAgainstInjectedLatency(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tok := b.login(t)
	b.sim.AddFault(simulator.Fault{Path: "/api/v1/oauth2/stash/", LatencyMs: 30_000})

	calls := map[string]func(ctx context.Context) error{
		"publish": func(ctx context.Context) error { _, err := b.client.Publish(ctx, tok, 1); return err },
		"item":    func(ctx context.Context) error { _, err := b.client.Item(ctx, tok, 1); return err },
		"find":    func(ctx context.Context) error { _, _, err := b.client.FindByStack(ctx, tok, "s"); return err },
		"submit": func(ctx context.Context) error {
			_, err := b.client.Submit(ctx, tok, submission("s", bytes.Repeat([]byte("x"), 1<<20)))
			return err
		},
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			defer cancel()
			start := time.Now()
			err := call(ctx)
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("returned after %v", d)
			}
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("err = %v, want a deadline", err)
			}
			var e *deviantart.APIError
			if errors.As(err, &e) {
				t.Errorf("a deadline is an APIError: %v", err)
			}
			noSecrets(t, err, tok)
		})
	}
}

func TestTransportErrorIsNotAnAPIError(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.NotFoundHandler())
	base := srv.URL
	srv.Close()
	c := newClient(t, deviantart.Config{BaseURL: base, ClientSecret: clientSecret})
	_, err := c.Refresh(context.Background(), "rt_secret")
	var e *deviantart.APIError
	if err == nil || errors.As(err, &e) {
		t.Fatalf("err = %v", err)
	}
	noSecrets(t, err, "rt_secret")
}

func TestErrorsNeverCarrySecrets(t *testing.T) {
	t.Parallel()
	// A server that echoes every credential it is sent into its errors.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		echo := r.Header.Get("Authorization") + " " + r.Form.Get("refresh_token") + " " + r.Form.Get("client_secret")
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Retry-After", epoch.Add(90*time.Second).Format(http.TimeFormat))
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintf(w, `{"error":"server_error","error_description":%q,"error_code":503}`, echo)
	}))
	defer srv.Close()
	c := newClient(t, deviantart.Config{BaseURL: srv.URL, ClientSecret: clientSecret, HTTPClient: srv.Client(),
		Now: func() time.Time { return epoch }})
	ctx := context.Background()

	_, err := c.Refresh(ctx, "rt_echoed")
	noSecrets(t, err, "rt_echoed")
	e := apiError(t, err)
	if e.Retry != 90*time.Second || e.ErrorCode != "503" || !e.Temporary() {
		t.Errorf("err = %+v", e)
	}
	_, err = c.Publish(ctx, "at_echoed", 1)
	noSecrets(t, err, "at_echoed")
	_, err = c.Item(ctx, "at_echoed", 1)
	noSecrets(t, err, "at_echoed")
	_, err = c.Submit(ctx, "at_echoed", submission("s", []byte("x")))
	noSecrets(t, err, "at_echoed")
}

func TestRetryAfterForms(t *testing.T) {
	t.Parallel()
	tests := []struct {
		header string
		want   time.Duration
	}{
		{"", 0},
		{"0", 0},
		{"-5", 0},
		{"30", 30 * time.Second},
		{" 30 ", 30 * time.Second},
		{"99999999999999", deviantart.RetryAfterMax},
		{epoch.Add(45 * time.Second).Format(http.TimeFormat), 45 * time.Second},
		{epoch.Add(-time.Hour).Format(http.TimeFormat), 0},
		{"soon", 0},
	}
	for _, tt := range tests {
		t.Run(tt.header, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if tt.header != "" {
					w.Header().Set("Retry-After", tt.header)
				}
				w.WriteHeader(http.StatusTooManyRequests)
			}))
			defer srv.Close()
			c := newClient(t, deviantart.Config{BaseURL: srv.URL, HTTPClient: srv.Client(), Now: func() time.Time { return epoch }})
			_, err := c.Item(context.Background(), "at", 1)
			e := apiError(t, err)
			if e.RetryAfter() != tt.want || e.Code != "" || !e.Temporary() {
				t.Errorf("RetryAfter = %v, want %v (%+v)", e.RetryAfter(), tt.want, e)
			}
		})
	}
}
