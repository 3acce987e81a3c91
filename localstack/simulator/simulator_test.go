package simulator_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/conveyor/conveyor/internal/clock"
	"github.com/conveyor/conveyor/localstack/simulator"
)

type testBundle struct {
	t     *testing.T
	sim   *simulator.Server
	url   string
	http  *http.Client
	clock *clock.Simulated
}

// The client credentials every test bundle's simulator requires.
const (
	clientID     = "cid"
	clientSecret = "secret"
)

func setup(t *testing.T) *testBundle {
	t.Helper()
	return setupWith(t, simulator.Options{})
}

// setupWith starts a simulator with opts, on the test clock and a fixed
// seed, for clientID and clientSecret.
func setupWith(t *testing.T, opts simulator.Options) *testBundle {
	t.Helper()
	c := clock.NewSimulated(time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC))
	opts.Now, opts.Seed, opts.ClientID, opts.ClientSecret = c.Now, 42, clientID, clientSecret
	sim := simulator.New(opts)
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	return &testBundle{t: t, sim: sim, url: srv.URL, http: srv.Client(), clock: c}
}

// answer is a decoded response.
type answer struct {
	Status int
	Header http.Header
	Body   map[string]any
	Raw    []byte
}

func (b *testBundle) do(req *http.Request) answer {
	b.t.Helper()
	resp, err := b.http.Do(req)
	if err != nil {
		b.t.Fatalf("%s %s: %v", req.Method, req.URL.Path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		b.t.Fatal(err)
	}
	a := answer{Status: resp.StatusCode, Header: resp.Header, Raw: raw}
	if len(raw) > 0 && raw[0] == '{' {
		if err := json.Unmarshal(raw, &a.Body); err != nil {
			b.t.Fatalf("%s %s: answer is not JSON: %v: %s", req.Method, req.URL.Path, err, raw)
		}
	}
	return a
}

func (b *testBundle) req(method, path, token string, body io.Reader, contentType string) answer {
	b.t.Helper()
	req, err := http.NewRequest(method, b.url+path, body)
	if err != nil {
		b.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	return b.do(req)
}

func (b *testBundle) form(path, token string, v url.Values) answer {
	b.t.Helper()
	return b.req(http.MethodPost, path, token, strings.NewReader(v.Encode()), "application/x-www-form-urlencoded")
}

func (b *testBundle) json(method, path string, v any) answer {
	b.t.Helper()
	var body io.Reader
	if v != nil {
		raw, err := json.Marshal(v)
		if err != nil {
			b.t.Fatal(err)
		}
		body = bytes.NewReader(raw)
	}
	return b.req(method, path, "", body, "application/json")
}

func (b *testBundle) refresh(rt string) answer {
	b.t.Helper()
	return b.form("/oauth2/token", "", url.Values{"grant_type": {"refresh_token"}, "refresh_token": {rt},
		"client_id": {clientID}, "client_secret": {clientSecret}})
}

// login returns a fresh access token of a new account.
func (b *testBundle) login() string {
	b.t.Helper()
	a := b.refresh(b.sim.MintRefreshToken())
	if a.Status != http.StatusOK {
		b.t.Fatalf("refresh: %d %s", a.Status, a.Raw)
	}
	return a.Body["access_token"].(string)
}

// part is one multipart part.
type part struct {
	name, filename, value string
}

func multipartBody(t *testing.T, parts ...part) (*bytes.Buffer, string) {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	for _, p := range parts {
		var w io.Writer
		var err error
		if p.filename != "" {
			w, err = mw.CreateFormFile(p.name, p.filename)
		} else {
			w, err = mw.CreateFormField(p.name)
		}
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(w, p.value); err != nil {
			t.Fatal(err)
		}
	}
	if err := mw.Close(); err != nil {
		t.Fatal(err)
	}
	return &buf, mw.FormDataContentType()
}

func (b *testBundle) submit(token string, parts ...part) answer {
	b.t.Helper()
	body, ct := multipartBody(b.t, parts...)
	return b.req(http.MethodPost, "/api/v1/oauth2/stash/submit", token, body, ct)
}

// submitOK submits a small file to stack and returns the item id.
func (b *testBundle) submitOK(token, title, stack string) int64 {
	b.t.Helper()
	a := b.submit(token, part{name: "title", value: title}, part{name: "stack", value: stack},
		part{name: "file", filename: "a.png", value: "png bytes"})
	if a.Status != http.StatusOK {
		b.t.Fatalf("submit: %d %s", a.Status, a.Raw)
	}
	return int64(a.Body["itemid"].(float64))
}

func (b *testBundle) publish(token string, itemID int64) answer {
	b.t.Helper()
	return b.form("/api/v1/oauth2/stash/publish", token, url.Values{"itemid": {strconv.FormatInt(itemID, 10)},
		"agree_submission": {"1"}, "agree_tos": {"1"}, "is_mature": {"false"}})
}

func wantStatus(t *testing.T, a answer, status int, errCode string) {
	t.Helper()
	if a.Status != status {
		t.Fatalf("status = %d, want %d: %s", a.Status, status, a.Raw)
	}
	if errCode != "" && a.Body["error"] != errCode {
		t.Fatalf("error = %v, want %q: %s", a.Body["error"], errCode, a.Raw)
	}
	if ct := a.Header.Get("Content-Type"); len(a.Raw) > 0 && ct != "application/json" {
		t.Fatalf("Content-Type = %q, want application/json", ct)
	}
}

func TestRefreshRotatesTokens(t *testing.T) {
	t.Parallel()
	b := setup(t)

	first := b.refresh("any-string-is-a-fresh-grant")
	wantStatus(t, first, http.StatusOK, "")
	for _, k := range []string{"access_token", "refresh_token"} {
		if s, _ := first.Body[k].(string); s == "" {
			t.Fatalf("%s missing: %s", k, first.Raw)
		}
	}
	if diff := cmp.Diff(map[string]any{"status": "success", "token_type": "Bearer", "expires_in": 3600.0, "scope": "browse stash publish"},
		first.Body, cmpIgnoreKeys("access_token", "refresh_token")); diff != "" {
		t.Errorf("token answer (-want +got):\n%s", diff)
	}

	second := b.refresh(first.Body["refresh_token"].(string))
	wantStatus(t, second, http.StatusOK, "")
	if second.Body["refresh_token"] == first.Body["refresh_token"] {
		t.Error("the refresh token did not rotate")
	}

	for name, rt := range map[string]string{
		"the original token": "any-string-is-a-fresh-grant",
		"the rotated token":  first.Body["refresh_token"].(string),
	} {
		a := b.refresh(rt)
		wantStatus(t, a, http.StatusBadRequest, "invalid_grant")
		if strings.Contains(string(a.Raw), rt) {
			t.Errorf("%s: the error echoes the token", name)
		}
	}

	acct := b.sim.AccountOf(second.Body["refresh_token"].(string))
	if acct == "" || acct != b.sim.AccountOf("any-string-is-a-fresh-grant") || acct != b.sim.AccountOf(second.Body["access_token"].(string)) {
		t.Fatalf("the chain is not one account: %q", acct)
	}
	st := b.sim.Stats()
	if st.Refreshes != 2 || st.Accounts[acct].Refreshes != 2 {
		t.Errorf("refreshes = %d, account's = %d, want 2 and 2", st.Refreshes, st.Accounts[acct].Refreshes)
	}
	if n := st.Calls["/oauth2/token"]; n["200"] != 2 || n["400"] != 2 {
		t.Errorf("token calls = %v, want 2×200 and 2×400", n)
	}
}

func cmpIgnoreKeys(keys ...string) cmp.Option {
	ignore := map[string]bool{}
	for _, k := range keys {
		ignore[k] = true
	}
	return cmp.FilterPath(func(p cmp.Path) bool {
		mi, ok := p.Last().(cmp.MapIndex)
		return ok && ignore[mi.Key().String()]
	}, cmp.Ignore())
}

func TestTokenRejectsBadRequests(t *testing.T) {
	t.Parallel()
	b := setup(t)
	client := url.Values{"client_id": {clientID}, "client_secret": {clientSecret}}.Encode()
	tests := []struct {
		name    string
		body    string
		ct      string
		method  string
		status  int
		errCode string
	}{
		{"wrong grant type", "grant_type=authorization_code&code=x&" + client, "application/x-www-form-urlencoded", "POST", 400, "unsupported_grant_type"},
		{"no refresh token", "grant_type=refresh_token&" + client, "application/x-www-form-urlencoded", "POST", 400, "invalid_request"},
		{"no client", "grant_type=refresh_token&refresh_token=x", "application/x-www-form-urlencoded", "POST", 401, "invalid_client"},
		{"not a form", "grant_type=%zz", "application/x-www-form-urlencoded", "POST", 400, "invalid_request"},
		{"GET", "", "", "GET", 405, "invalid_request"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			a := b.req(tt.method, "/oauth2/token", "", strings.NewReader(tt.body), tt.ct)
			wantStatus(t, a, tt.status, tt.errCode)
		})
	}
}

func TestAuthFailures(t *testing.T) {
	t.Parallel()
	b := setup(t)
	good := b.login()
	itemID := b.submitOK(good, "Cat", "stk")
	b.clock.Advance(59 * time.Minute)
	old := good // expires in a minute
	fresh := b.login()
	b.clock.Advance(2 * time.Minute)

	item := "/api/v1/oauth2/stash/item/" + strconv.FormatInt(itemID, 10)
	tests := []struct {
		name   string
		header string
		path   string
		status int
	}{
		{"no token", "", item, 401},
		{"unknown token", "Bearer at_nope", item, 401},
		{"expired token", "Bearer " + old, item, 401},
		{"not a bearer", "Basic " + fresh, item, 401},
		{"bearer is case-insensitive", "bearer " + fresh, "/api/v1/oauth2/stash/delta", 200},
		{"token in the query", "", "/api/v1/oauth2/stash/delta?access_token=" + fresh, 200},
		{"another account's item", "Bearer " + fresh, item, 400},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			req, _ := http.NewRequest(http.MethodGet, b.url+tt.path, nil)
			if tt.header != "" {
				req.Header.Set("Authorization", tt.header)
			}
			a := b.do(req)
			want := ""
			if tt.status == 401 {
				want = "invalid_token"
			}
			wantStatus(t, a, tt.status, want)
		})
	}

	t.Run("submit and publish", func(t *testing.T) {
		t.Parallel()
		wantStatus(t, b.submit("at_nope", part{name: "title", value: "x"}, part{name: "f", filename: "a", value: "x"}), 401, "invalid_token")
		wantStatus(t, b.publish(old, itemID), 401, "invalid_token")
	})
	t.Run("publish with the token in the form", func(t *testing.T) {
		t.Parallel()
		tok := b.login()
		id := b.submitOK(tok, "Form token", "s")
		a := b.form("/api/v1/oauth2/stash/publish", "", url.Values{"itemid": {strconv.FormatInt(id, 10)}, "access_token": {tok}})
		wantStatus(t, a, 200, "")
	})
	t.Run("submit with the token as a multipart field", func(t *testing.T) {
		t.Parallel()
		tok := b.login()
		a := b.submit("", part{name: "access_token", value: tok}, part{name: "title", value: "x"}, part{name: "f", filename: "a", value: "x"})
		wantStatus(t, a, 200, "")
		a = b.submit("", part{name: "title", value: "x"}, part{name: "f", filename: "a", value: "x"})
		wantStatus(t, a, 401, "invalid_token")
	})
}

func TestSubmitPublishAndAlreadyPublished(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tok := b.login()

	content := bytes.Repeat([]byte("0123456789abcdef"), 4096)
	sum := sha256.Sum256(content)
	sub := b.submit(tok,
		part{name: "title", value: "A Cat, Sleeping!"},
		part{name: "artist_comments", value: "zzz"},
		part{name: "tags[]", value: "cat"},
		part{name: "tags[]", value: "sleep"},
		part{name: "stack", value: "itm_1"},
		part{name: "image", filename: "cat.png", value: string(content)})
	wantStatus(t, sub, 200, "")
	itemID := int64(sub.Body["itemid"].(float64))
	if sub.Body["status"] != "success" || sub.Body["stack"] != "itm_1" || sub.Body["stackid"].(float64) == 0 {
		t.Fatalf("submit answer: %s", sub.Raw)
	}

	items := b.sim.Items()
	if len(items) != 1 {
		t.Fatalf("items = %d, want 1", len(items))
	}
	want := simulator.Item{ItemID: itemID, Account: b.sim.AccountOf(tok), Stack: "itm_1", Title: "A Cat, Sleeping!",
		ArtistComments: "zzz", Tags: []string{"cat", "sleep"}, Filename: "cat.png", ContentType: "application/octet-stream",
		Size: int64(len(content)), SHA256: hex.EncodeToString(sum[:]), SubmittedAt: b.clock.Now()}
	if diff := cmp.Diff(want, items[0], cmpIgnoreFields("StackID")); diff != "" {
		t.Errorf("recorded item (-want +got):\n%s", diff)
	}

	itemPath := "/api/v1/oauth2/stash/item/" + strconv.FormatInt(itemID, 10)
	before := b.req(http.MethodGet, itemPath, tok, nil, "")
	wantStatus(t, before, 200, "")
	if before.Body["published"] != false || before.Body["deviationid"] != nil || before.Body["size"].(float64) != float64(len(content)) {
		t.Errorf("item before publishing: %s", before.Raw)
	}

	pub := b.publish(tok, itemID)
	wantStatus(t, pub, 200, "")
	devID, _ := pub.Body["deviationid"].(string)
	u, _ := pub.Body["url"].(string)
	if len(devID) != 36 || !strings.HasPrefix(u, "https://www.deviantart.com/sim/art/a-cat-sleeping-") {
		t.Fatalf("publish answer: %s", pub.Raw)
	}

	again := b.publish(tok, itemID)
	wantStatus(t, again, 400, "invalid_request")
	if again.Body["error_code"] != "already_published" || again.Body["error_description"] != "Item already published" {
		t.Errorf("second publish: %s", again.Raw)
	}

	after := b.req(http.MethodGet, itemPath, tok, nil, "")
	if diff := cmp.Diff(map[string]any{"itemid": float64(itemID), "stackid": sub.Body["stackid"], "stack": "itm_1",
		"title": "A Cat, Sleeping!", "size": float64(len(content)), "published": true, "deviationid": devID, "url": u}, after.Body); diff != "" {
		t.Errorf("item after publishing (-want +got):\n%s", diff)
	}

	wantPubs := []simulator.Publication{{DeviationID: devID, ItemID: itemID, Title: "A Cat, Sleeping!", Stack: "itm_1", URL: u, PublishedAt: b.clock.Now()}}
	if diff := cmp.Diff(wantPubs, b.sim.Publications()); diff != "" {
		t.Errorf("publications (-want +got):\n%s", diff)
	}
	var overHTTP []simulator.Publication
	if err := json.Unmarshal(b.req(http.MethodGet, "/_sim/publications", "", nil, "").Raw, &overHTTP); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(wantPubs, overHTTP); diff != "" {
		t.Errorf("GET /_sim/publications (-want +got):\n%s", diff)
	}

	t.Run("unknown item", func(t *testing.T) {
		t.Parallel()
		wantStatus(t, b.publish(tok, 999999), 400, "invalid_request")
		wantStatus(t, b.req(http.MethodGet, "/api/v1/oauth2/stash/item/999999", tok, nil, ""), 400, "invalid_request")
		wantStatus(t, b.req(http.MethodGet, "/api/v1/oauth2/stash/item/abc", tok, nil, ""), 400, "invalid_request")
		wantStatus(t, b.form("/api/v1/oauth2/stash/publish", tok, url.Values{"itemid": {"x"}}), 400, "invalid_request")
	})
}

func cmpIgnoreFields(names ...string) cmp.Option {
	ignore := map[string]bool{}
	for _, n := range names {
		ignore[n] = true
	}
	return cmp.FilterPath(func(p cmp.Path) bool {
		sf, ok := p.Last().(cmp.StructField)
		return ok && ignore[sf.Name()]
	}, cmp.Ignore())
}

func TestSubmitRejectsBadInput(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tok := b.login()
	file := part{name: "file", filename: "a.png", value: "x"}
	title := part{name: "title", value: "ok"}
	tests := []struct {
		name   string
		parts  []part
		raw    string // a raw body instead of parts
		ct     string
		status int
	}{
		{name: "no title", parts: []part{file}, status: 400},
		{name: "blank title", parts: []part{{name: "title", value: "   "}, file}, status: 400},
		{name: "title of 51 characters", parts: []part{{name: "title", value: strings.Repeat("a", 51)}, file}, status: 400},
		{name: "title of 50 multibyte characters", parts: []part{{name: "title", value: strings.Repeat("é", 50)}, file}, status: 200},
		{name: "no file", parts: []part{title}, status: 400},
		{name: "empty file", parts: []part{title, {name: "file", filename: "a.png"}}, status: 400},
		{name: "two files", parts: []part{title, file, file}, status: 400},
		{name: "file in a part without filename", parts: []part{title, {name: "upload", value: "bytes"}}, status: 200},
		{name: "oversized field", parts: []part{title, {name: "artist_comments", value: strings.Repeat("x", 70<<10)}, file}, status: 400},
		{name: "not multipart", raw: "title=x", ct: "application/x-www-form-urlencoded", status: 400},
		{name: "no boundary", raw: "--x\r\n", ct: "multipart/form-data", status: 400},
		{name: "truncated multipart", raw: "--b\r\nContent-Disposition: form-data; name=\"title\"\r\n\r\nx", ct: "multipart/form-data; boundary=b", status: 400},
		{name: "garbage multipart", raw: "garbage", ct: "multipart/form-data; boundary=b", status: 400},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var a answer
			if tt.parts != nil {
				a = b.submit(tok, tt.parts...)
			} else {
				a = b.req(http.MethodPost, "/api/v1/oauth2/stash/submit", tok, strings.NewReader(tt.raw), tt.ct)
			}
			want := ""
			if tt.status == 400 {
				want = "invalid_request"
			}
			wantStatus(t, a, tt.status, want)
		})
	}
}

func TestDeltaPagesThroughTheCallersItems(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tok, other := b.login(), b.login()
	var want []float64
	for i := range 5 {
		want = append(want, float64(b.submitOK(tok, fmt.Sprintf("t%d", i), fmt.Sprintf("stack-%d", i))))
		b.submitOK(other, "other", fmt.Sprintf("stack-%d", i))
	}
	b.publish(tok, int64(want[1]))

	var got []float64
	offset := "0"
	for pages := 0; ; pages++ {
		if pages > 5 {
			t.Fatal("delta does not end")
		}
		a := b.req(http.MethodGet, "/api/v1/oauth2/stash/delta?limit=2&offset="+offset, tok, nil, "")
		wantStatus(t, a, 200, "")
		for _, e := range a.Body["entries"].([]any) {
			e := e.(map[string]any)
			got = append(got, e["itemid"].(float64))
			if e["stack"] != fmt.Sprintf("stack-%d", len(got)-1) || e["metadata"].(map[string]any)["title"] != fmt.Sprintf("t%d", len(got)-1) {
				t.Errorf("entry: %v", e)
			}
		}
		if a.Body["has_more"] == false {
			if a.Body["next_offset"] != nil {
				t.Errorf("next_offset on the last page: %s", a.Raw)
			}
			break
		}
		offset = strconv.Itoa(int(a.Body["next_offset"].(float64)))
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("item ids (-want +got):\n%s", diff)
	}

	for _, q := range []string{"offset=-1", "limit=x", "offset=1e3"} {
		wantStatus(t, b.req(http.MethodGet, "/api/v1/oauth2/stash/delta?"+q, tok, nil, ""), 400, "invalid_request")
	}
	far := b.req(http.MethodGet, "/api/v1/oauth2/stash/delta?offset=9223372036854775807", tok, nil, "")
	wantStatus(t, far, 200, "")
	if len(far.Body["entries"].([]any)) != 0 || far.Body["has_more"] != false {
		t.Errorf("far offset: %s", far.Raw)
	}
}

func TestFaults(t *testing.T) {
	t.Parallel()

	t.Run("status, count and Retry-After", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		tok := b.login()
		id := b.submitOK(tok, "x", "s")
		add := b.json(http.MethodPost, "/_sim/faults", map[string]any{"path": "/api/v1/oauth2/stash/publish", "status": 429, "retryAfter": 2, "count": 2})
		wantStatus(t, add, 201, "")
		if add.Body["id"].(float64) == 0 {
			t.Errorf("fault has no id: %s", add.Raw)
		}
		for range 2 {
			a := b.publish(tok, id)
			wantStatus(t, a, 429, "user_api_threshold")
			if a.Header.Get("Retry-After") != "2" {
				t.Errorf("Retry-After = %q", a.Header.Get("Retry-After"))
			}
		}
		wantStatus(t, b.publish(tok, id), 200, "")
		if n := len(b.sim.Faults()); n != 0 {
			t.Errorf("a spent fault is still listed (%d)", n)
		}
		if got := b.sim.Stats().Calls["/api/v1/oauth2/stash/publish"]; !cmp.Equal(got, map[string]int{"429": 2, "200": 1}) {
			t.Errorf("publish calls = %v", got)
		}
		if n := len(b.sim.Publications()); n != 1 {
			t.Errorf("publications = %d, want 1", n)
		}
	})

	t.Run("prefix match, order, list and clear", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		tok := b.login()
		b.json(http.MethodPost, "/_sim/faults", map[string]any{"path": "/api/v1/oauth2/stash/", "status": 503})
		b.json(http.MethodPost, "/_sim/faults", map[string]any{"path": "/api/v1/oauth2/stash/item", "status": 500})
		wantStatus(t, b.req(http.MethodGet, "/api/v1/oauth2/stash/item/1", tok, nil, ""), 503, "server_error")
		wantStatus(t, b.req(http.MethodGet, "/api/v1/oauth2/stash/delta", tok, nil, ""), 503, "server_error")
		wantStatus(t, b.refresh("unfaulted"), 200, "")

		var listed []simulator.Fault
		if err := json.Unmarshal(b.req(http.MethodGet, "/_sim/faults", "", nil, "").Raw, &listed); err != nil {
			t.Fatal(err)
		}
		if len(listed) != 2 || listed[0].Path != "/api/v1/oauth2/stash/" || listed[0].Fired != 2 || listed[1].Fired != 0 {
			t.Errorf("listed faults: %+v", listed)
		}
		wantStatus(t, b.req(http.MethodDelete, "/_sim/faults", "", nil, ""), 204, "")
		wantStatus(t, b.req(http.MethodGet, "/api/v1/oauth2/stash/delta", tok, nil, ""), 200, "")
		if st := b.sim.Stats().Calls; st["/api/v1/oauth2/stash/item"]["503"] != 1 || st["/api/v1/oauth2/stash/delta"]["503"] != 1 {
			t.Errorf("faulted calls are not counted: %v", st)
		}
	})

	t.Run("rate with a fixed seed", func(t *testing.T) {
		t.Parallel()
		fired := func() []bool {
			sim := simulator.New(simulator.Options{Seed: 7})
			sim.AddFault(simulator.Fault{Path: "/healthy", Status: 500, Rate: 0.5})
			var out []bool
			for range 200 {
				rec := httptest.NewRecorder()
				sim.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthy", nil))
				out = append(out, rec.Code == 500)
			}
			return out
		}
		a, b := fired(), fired()
		if !cmp.Equal(a, b) {
			t.Error("the same seed gave different draws")
		}
		n := 0
		for _, f := range a {
			if f {
				n++
			}
		}
		if n < 70 || n > 130 {
			t.Errorf("a rate of 0.5 fired %d times in 200", n)
		}
	})

	t.Run("latency then normal service", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.sim.AddFault(simulator.Fault{Path: "/oauth2/token", LatencyMs: 30, Count: 1})
		start := time.Now()
		wantStatus(t, b.refresh("slow"), 200, "")
		if d := time.Since(start); d < 30*time.Millisecond {
			t.Errorf("answered after %v, want ≥ 30ms", d)
		}
	})

	t.Run("latency stops when the client goes away", func(t *testing.T) {
		t.Parallel()
		sim := simulator.New(simulator.Options{})
		sim.AddFault(simulator.Fault{Path: "/oauth2/token", Status: 500, LatencyMs: 60_000})
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		done := make(chan struct{})
		go func() {
			defer close(done)
			sim.ServeHTTP(httptest.NewRecorder(), httptest.NewRequestWithContext(ctx, http.MethodPost, "/oauth2/token", nil))
		}()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatal("the handler kept waiting after the client went away")
		}
		if got := sim.Stats().Calls["/oauth2/token"]; !cmp.Equal(got, map[string]int{"499": 1}) {
			t.Errorf("calls = %v, want one 499", got)
		}
	})

	t.Run("bad fault definitions", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		for _, body := range []string{
			`{}`, `{"path":"x","status":500}`, `{"path":"/a","status":200}`, `{"path":"/a","status":600}`,
			`{"path":"/a","rate":1.5}`, `{"path":"/a","rate":-1}`, `{"path":"/a","count":-1}`, `{"path":"/a","latencyMs":-1}`,
			`{"path":"/a","bogus":1}`, `not json`, `{"path":"/a","status":"500"}`,
		} {
			a := b.req(http.MethodPost, "/_sim/faults", "", strings.NewReader(body), "application/json")
			wantStatus(t, a, 400, "invalid_request")
		}
		if n := len(b.sim.Faults()); n != 0 {
			t.Errorf("%d bad faults were added", n)
		}
	})
}

func TestStatsAndReset(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tok := b.login()
	id := b.submitOK(tok, "x", "s")
	b.publish(tok, id)
	b.publish(tok, id)
	b.req(http.MethodGet, "/api/v1/oauth2/stash/item/"+strconv.FormatInt(id, 10), tok, nil, "")
	b.req(http.MethodGet, "/api/v1/oauth2/stash/item/77", tok, nil, "")
	b.req(http.MethodGet, "/healthz", "", nil, "")

	var st simulator.Stats
	if err := json.Unmarshal(b.req(http.MethodGet, "/_sim/stats", "", nil, "").Raw, &st); err != nil {
		t.Fatal(err)
	}
	want := simulator.Stats{
		Calls: map[string]map[string]int{
			"/oauth2/token":                {"200": 1},
			"/api/v1/oauth2/stash/submit":  {"200": 1},
			"/api/v1/oauth2/stash/publish": {"200": 1, "400": 1},
			"/api/v1/oauth2/stash/item":    {"200": 1, "400": 1},
		},
		Refreshes: 1, Publications: 1,
		Accounts: map[string]simulator.AccountStats{b.sim.AccountOf(tok): {Refreshes: 1, Items: 1, Publications: 1}},
	}
	if diff := cmp.Diff(want, st); diff != "" {
		t.Errorf("stats (-want +got):\n%s", diff)
	}

	b.sim.AddFault(simulator.Fault{Path: "/", Status: 500})
	wantStatus(t, b.req(http.MethodGet, "/healthz", "", nil, ""), 200, "")
	wantStatus(t, b.req(http.MethodPost, "/_sim/reset", "", nil, ""), 204, "")
	if diff := cmp.Diff(simulator.Stats{Calls: map[string]map[string]int{}, Accounts: map[string]simulator.AccountStats{}}, b.sim.Stats()); diff != "" {
		t.Errorf("stats after reset (-want +got):\n%s", diff)
	}
	if len(b.sim.Faults()) != 0 || len(b.sim.Items()) != 0 || len(b.sim.Publications()) != 0 {
		t.Error("reset left state behind")
	}
	wantStatus(t, b.req(http.MethodGet, "/api/v1/oauth2/stash/delta", tok, nil, ""), 401, "invalid_token")
}

func TestUnknownRoutesAnswerJSON(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tests := []struct {
		method, path string
		status       int
	}{
		{"GET", "/nope", 404},
		{"GET", "/api/v1/oauth2/stash/item/", 404},
		{"GET", "/api/v1/oauth2/stash/submit", 405},
		{"PUT", "/_sim/faults", 405},
		{"GET", "/_sim/reset", 405},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			t.Parallel()
			wantStatus(t, b.req(tt.method, tt.path, "", nil, ""), tt.status, "invalid_request")
		})
	}
}

func TestConcurrentClients(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.sim.AddFault(simulator.Fault{Path: "/api/v1/oauth2/stash/publish", Status: 503, Rate: 0.3})
	const workers = 16
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			tok := b.login()
			id := b.submitOK(tok, fmt.Sprintf("w%d", w), "s")
			for range 50 {
				a := b.publish(tok, id)
				if a.Status == 200 || a.Body["error_code"] == "already_published" {
					continue
				}
				if a.Status != 503 {
					errs <- fmt.Errorf("publish: %d %s", a.Status, a.Raw)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := len(b.sim.Publications()); n != workers {
		t.Errorf("publications = %d, want %d", n, workers)
	}
}

func TestStart(t *testing.T) {
	t.Parallel()
	sim, base, stop, err := simulator.Start("127.0.0.1:0", simulator.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if !strings.HasPrefix(base, "http://127.0.0.1:") {
		t.Fatalf("base URL = %q", base)
	}
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	resp, err := client.Get(base + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("healthz = %d", resp.StatusCode)
	}

	// stop ends a request waiting on injected latency.
	sim.AddFault(simulator.Fault{Path: "/oauth2/token", LatencyMs: 60_000})
	errc := make(chan error, 1)
	go func() {
		resp, err := client.PostForm(base+"/oauth2/token", url.Values{"grant_type": {"refresh_token"}, "refresh_token": {"x"}})
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	for sim.Faults()[0].Fired == 0 { // wait until the request is held
		time.Sleep(time.Millisecond)
	}
	start := time.Now()
	stop()
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("stop took %v", d)
	}
	<-errc
	if resp, err := client.Get(base + "/healthz"); err == nil {
		resp.Body.Close()
		t.Error("still serving after stop")
	}
}
