// Package deviantart is the client of the external publishing API
// (DeviantArt, or the simulator in localstack/simulator): OAuth refresh with
// rotating refresh tokens, stash/submit with the file streamed as
// multipart, stash/publish, and the lookups that tell what an earlier,
// interrupted attempt already did.
//
// Every non-2xx answer is an *APIError carrying the status, the API's error
// code and Retry-After; transport failures and context deadlines are
// returned wrapped as they are. No error ever carries an access token, a
// refresh token or the client secret.
package deviantart

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/conveyor/conveyor/internal/telemetry"
)

// RetryAfterMax bounds the Retry-After an APIError reports.
const RetryAfterMax = 24 * time.Hour

// Per-call deadlines. A call's context ends at the earlier of its caller's
// deadline and its own: Config.CallTimeout for every call but Submit, and
// for Submit CallTimeout plus the file's size at Config.UploadRateMin
// (with the defaults of internal/config, a 50 MiB file: 20 s + 50 s).
// Under a half-open breaker the probe's own bound (breaker.ProbeCallTimeout,
// four fifths of the probe lease) applies on top, so no call outlives the
// lease it runs under; the configuration keeps CallTimeout below it.

// answerMaxBytes bounds how much of an answer is read.
const answerMaxBytes = 1 << 20

// Config configures a Client.
type Config struct {
	// BaseURL is the API's scheme and host, e.g. https://www.deviantart.com
	// or the simulator's URL (required).
	BaseURL string
	// ClientID and ClientSecret identify Conveyor to the API's token
	// endpoint. The secret never appears in an error.
	ClientID, ClientSecret string
	// Credentials, when set, gives ClientID and ClientSecret at each
	// refresh instead (read from a secret when first needed); its error
	// ends the refresh before any call.
	Credentials func(ctx context.Context) (id, secret string, err error)
	// HTTPClient makes the calls. Default: a client with connection
	// pooling and dial/TLS timeouts but no overall timeout; each call's
	// deadline comes from its context.
	HTTPClient *http.Client
	// Now is the clock that turns expires_in and Retry-After dates into
	// times. Default time.Now.
	Now func() time.Time
	// CallTimeout bounds every call (required, positive); Submit adds the
	// file's size at UploadRateMin.
	CallTimeout time.Duration
	// UploadRateMin is the slowest upload Submit allows for, in bytes per
	// second (required, positive).
	UploadRateMin int64
}

// Client calls the API. It is safe for concurrent use.
type Client struct{ cfg Config }

// New returns a Client for cfg, or an error naming what cfg lacks: a
// base URL, a positive CallTimeout and UploadRateMin (their defaults live
// in internal/config).
func New(cfg Config) (*Client, error) {
	switch {
	case cfg.BaseURL == "":
		return nil, errors.New("deviantart: the base URL is required")
	case cfg.CallTimeout <= 0:
		return nil, fmt.Errorf("deviantart: the call timeout must be positive, got %s", cfg.CallTimeout)
	case cfg.UploadRateMin <= 0:
		return nil, fmt.Errorf("deviantart: the slowest upload rate must be positive, got %d bytes/s", cfg.UploadRateMin)
	}
	cfg.BaseURL = strings.TrimRight(cfg.BaseURL, "/")
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Transport: newTransport()}
	}
	// Every call is a client span named by its path, carrying its trace
	// context (traceparent) to the API.
	cfg.HTTPClient = telemetry.Client(cfg.HTTPClient, func(r *http.Request) string { return r.Method + " " + r.URL.Path })
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Client{cfg: cfg}, nil
}

// Timeout is the overall deadline of a call sending size bytes of file (0
// for every call but Submit): CallTimeout plus size at UploadRateMin.
func (c *Client) Timeout(size int64) time.Duration {
	return c.cfg.CallTimeout + time.Duration(max(size, 0)*int64(time.Second)/c.cfg.UploadRateMin)
}

// newTransport is HTTP/1.1 with a keep-alive pool per host: the functions
// are built without net/http's HTTP/2 (resources.LambdaBuildTags), and a
// job's calls are one at a time, so each in-flight call of an instance
// holds one pooled connection.
func newTransport() *http.Transport {
	d := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	return &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           d.DialContext,
		MaxIdleConns:          100,
		MaxIdleConnsPerHost:   64,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
}

// APIError is a non-2xx answer of the API. Its message names the operation,
// the status and the API's error, never a token or secret.
type APIError struct {
	// Op is the operation that failed, e.g. "stash publish".
	Op string
	// Status is the HTTP status.
	Status int
	// Code is the API's "error" field, e.g. "invalid_grant",
	// "invalid_request" ("" if the body was not the API's JSON).
	Code string
	// ErrorCode is the API's "error_code" field when present, e.g.
	// "already_published".
	ErrorCode string
	// Description is the API's "error_description".
	Description string
	// Retry is the delay the Retry-After header asked for (seconds or an
	// HTTP date), at most RetryAfterMax; 0 if none.
	Retry time.Duration
}

// Error describes the failure without any credential.
func (e *APIError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: HTTP %d", e.Op, e.Status)
	if e.Code != "" {
		b.WriteString(" " + e.Code)
	}
	if e.ErrorCode != "" {
		b.WriteString(" (" + e.ErrorCode + ")")
	}
	if e.Description != "" {
		b.WriteString(": " + e.Description)
	}
	if e.Retry > 0 {
		fmt.Fprintf(&b, " (retry after %s)", e.Retry)
	}
	return b.String()
}

// Temporary reports whether the same call may succeed later: true for 429
// and 5xx, false for every other status.
func (e *APIError) Temporary() bool {
	return e.Status == http.StatusTooManyRequests || e.Status >= 500
}

// RetryAfter is the delay the API asked for before the next call (0 if it
// did not say).
func (e *APIError) RetryAfter() time.Duration { return e.Retry }

// StatusCode is the HTTP status of the answer.
func (e *APIError) StatusCode() int { return e.Status }

// IsAlreadyPublished reports whether err is the API refusing to publish an
// item that was published before.
func IsAlreadyPublished(err error) bool {
	var e *APIError
	return errors.As(err, &e) && e.Status < 500 &&
		(e.ErrorCode == "already_published" || strings.Contains(strings.ToLower(e.Description), "already published"))
}

// opRefresh is the Op of an APIError from the token endpoint.
const opRefresh = "token refresh"

// IsClientRejected reports whether err is the token endpoint refusing
// Conveyor's own OAuth client: invalid_client or unauthorized_client, or
// any 401 from the token endpoint (RFC 6749 §5.2). The client id or secret
// is wrong or missing — an operator's configuration error that no retry and
// no user action can fix, unlike IsGrantRejected.
func IsClientRejected(err error) bool {
	var e *APIError
	return errors.As(err, &e) && e.Op == opRefresh &&
		(e.Code == "invalid_client" || e.Code == "unauthorized_client" || e.Status == http.StatusUnauthorized)
}

// IsGrantRejected reports whether err is the token endpoint refusing the
// user's refresh token (invalid_grant: used, revoked or expired): the user
// must connect the account again.
func IsGrantRejected(err error) bool {
	var e *APIError
	return errors.As(err, &e) && e.Op == opRefresh && e.Code == "invalid_grant"
}

// Token is an OAuth token pair. The refresh token replaces the one
// presented, which the API no longer accepts.
type Token struct {
	// AccessToken authorises API calls until ExpiresAt.
	AccessToken string
	// RefreshToken is good for exactly one refresh.
	RefreshToken string
	// ExpiresAt is when the access token stops working.
	ExpiresAt time.Time
}

// Deviation is a published item.
type Deviation struct {
	// ID is the API's deviation id (a UUID).
	ID string
	// URL is the deviation's public page.
	URL string
}

// StashItem is what the API knows of a submitted item.
type StashItem struct {
	// ItemID is the stash item id Submit returned.
	ItemID int64
	// Stack is the stack the item was submitted to.
	Stack string
	// Title is the item's title.
	Title string
	// Published, DeviationID and URL say whether and where the item was
	// published; only Item fills them.
	Published   bool
	DeviationID string
	URL         string
}

// Submission is one file to submit.
type Submission struct {
	// Title is required; the API accepts at most 50 characters.
	Title string
	// Description is sent as the artist comments.
	Description string
	// Tags are sent as tags[].
	Tags []string
	// Stack names the stash stack the item goes to. The publisher uses its
	// item id, so FindByStack can find the submission after a crash.
	Stack string
	// Filename and ContentType describe the file part.
	Filename, ContentType string
	// Body is the file, read once, as a stream. It is not read after
	// Submit returns, and it should honour the call's context (an S3
	// object body does) so a cancelled call does not wait on it.
	Body io.Reader
	// Size is Body's length in bytes; when positive it is sent as part of
	// the Content-Length and a body of another length fails the call.
	// 0 means unknown (the request is chunked).
	Size int64
}

// errorAnswer is the API's error body.
type errorAnswer struct {
	Error       string          `json:"error"`
	Description string          `json:"error_description"`
	Code        json.RawMessage `json:"error_code"`
}

// do sends req and decodes a 2xx JSON answer into out. secrets are
// scrubbed from anything the error carries.
func (c *Client) do(req *http.Request, op string, out any, secrets ...string) error {
	resp, err := c.cfg.HTTPClient.Do(req)
	if err != nil {
		return fmt.Errorf("%s: %w", op, scrubURL(err))
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, answerMaxBytes))
	if err != nil {
		return fmt.Errorf("%s: reading the answer: %w", op, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		var ea errorAnswer
		_ = json.Unmarshal(body, &ea)
		return &APIError{
			Op: op, Status: resp.StatusCode,
			Code:        redact(ea.Error, secrets),
			ErrorCode:   redact(errorCode(ea.Code), secrets),
			Description: redact(ea.Description, secrets),
			Retry:       parseRetryAfter(resp.Header.Get("Retry-After"), c.cfg.Now()),
		}
	}
	if out != nil {
		if err := json.Unmarshal(body, out); err != nil {
			return fmt.Errorf("%s: decoding the answer (HTTP %d): %w", op, resp.StatusCode, err)
		}
	}
	return nil
}

// errorCode reads error_code, a string or a number.
func errorCode(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var n json.Number
	if json.Unmarshal(raw, &n) == nil {
		return n.String()
	}
	return ""
}

// redact replaces every secret in s.
func redact(s string, secrets []string) string {
	for _, sec := range secrets {
		if sec != "" {
			s = strings.ReplaceAll(s, sec, "[redacted]")
		}
	}
	return s
}

// scrubURL drops the query from a transport error's URL. This client never
// puts a credential in a URL; this keeps it so.
func scrubURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		if u, perr := url.Parse(ue.URL); perr == nil && (u.RawQuery != "" || u.User != nil) {
			u.RawQuery, u.User = "", nil
			return &url.Error{Op: ue.Op, URL: u.String(), Err: ue.Err}
		}
	}
	return err
}

// parseRetryAfter reads a Retry-After header: delay-seconds or an HTTP date.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseInt(v, 10, 64); err == nil {
		if s <= 0 {
			return 0
		}
		if s >= int64(RetryAfterMax/time.Second) {
			return RetryAfterMax
		}
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return min(t.Sub(now), RetryAfterMax)
	}
	return 0
}

// newRequest builds a request; the caller must hold ctx bounded by Timeout
// (see bounded).
func (c *Client) newRequest(ctx context.Context, method, path, accessToken string, body io.Reader) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.cfg.BaseURL+path, body)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	if accessToken != "" {
		req.Header.Set("Authorization", "Bearer "+accessToken)
	}
	return req, nil
}

func (c *Client) postForm(ctx context.Context, path, accessToken string, form url.Values) (*http.Request, error) {
	req, err := c.newRequest(ctx, http.MethodPost, path, accessToken, strings.NewReader(form.Encode()))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return req, nil
}

// Refresh exchanges refreshToken for a new token pair. The API rotates
// refresh tokens: after a successful call refreshToken is dead, so the
// caller must store the new one before anything else; a dead or revoked
// token is an *APIError with Code "invalid_grant" (IsGrantRejected), and
// wrong client credentials one with Code "invalid_client"
// (IsClientRejected); neither is temporary.
func (c *Client) Refresh(ctx context.Context, refreshToken string) (Token, error) {
	ctx, cancel := context.WithTimeout(ctx, c.Timeout(0))
	defer cancel()
	const op = opRefresh
	if refreshToken == "" {
		return Token{}, fmt.Errorf("%s: no refresh token", op)
	}
	id, clientSecret := c.cfg.ClientID, c.cfg.ClientSecret
	if c.cfg.Credentials != nil {
		var err error
		if id, clientSecret, err = c.cfg.Credentials(ctx); err != nil {
			return Token{}, fmt.Errorf("%s: %w", op, err)
		}
	}
	form := url.Values{
		"grant_type": {"refresh_token"}, "refresh_token": {refreshToken},
		"client_id": {id}, "client_secret": {clientSecret},
	}
	req, err := c.postForm(ctx, "/oauth2/token", "", form)
	if err != nil {
		return Token{}, fmt.Errorf("%s: %w", op, err)
	}
	var out struct {
		AccessToken  string `json:"access_token"`
		RefreshToken string `json:"refresh_token"`
		ExpiresIn    int64  `json:"expires_in"`
	}
	if err := c.do(req, op, &out, refreshToken, clientSecret); err != nil {
		return Token{}, err
	}
	if out.AccessToken == "" || out.RefreshToken == "" {
		return Token{}, fmt.Errorf("%s: the answer has no tokens", op)
	}
	return Token{
		AccessToken: out.AccessToken, RefreshToken: out.RefreshToken,
		ExpiresAt: c.cfg.Now().Add(time.Duration(out.ExpiresIn) * time.Second),
	}, nil
}

// Publish publishes a stash item and returns its deviation. Publishing an
// item that was already published fails with an error for which
// IsAlreadyPublished is true; Item then tells its deviation.
func (c *Client) Publish(ctx context.Context, accessToken string, itemID int64) (Deviation, error) {
	ctx, cancel := context.WithTimeout(ctx, c.Timeout(0))
	defer cancel()
	const op = "stash publish"
	form := url.Values{
		"itemid": {strconv.FormatInt(itemID, 10)}, "agree_submission": {"1"}, "agree_tos": {"1"}, "is_mature": {"false"},
	}
	req, err := c.postForm(ctx, "/api/v1/oauth2/stash/publish", accessToken, form)
	if err != nil {
		return Deviation{}, fmt.Errorf("%s: %w", op, err)
	}
	var out struct {
		DeviationID string `json:"deviationid"`
		URL         string `json:"url"`
	}
	if err := c.do(req, op, &out, accessToken); err != nil {
		return Deviation{}, err
	}
	if out.DeviationID == "" {
		return Deviation{}, fmt.Errorf("%s: the answer has no deviationid", op)
	}
	return Deviation{ID: out.DeviationID, URL: out.URL}, nil
}

// Item returns what the API knows of a stash item of the caller, including
// whether and where it was published. An unknown item is an *APIError
// (400).
func (c *Client) Item(ctx context.Context, accessToken string, itemID int64) (StashItem, error) {
	ctx, cancel := context.WithTimeout(ctx, c.Timeout(0))
	defer cancel()
	const op = "stash item"
	req, err := c.newRequest(ctx, http.MethodGet, "/api/v1/oauth2/stash/item/"+strconv.FormatInt(itemID, 10), accessToken, nil)
	if err != nil {
		return StashItem{}, fmt.Errorf("%s: %w", op, err)
	}
	var out struct {
		ItemID      int64  `json:"itemid"`
		Stack       string `json:"stack"`
		Title       string `json:"title"`
		Published   bool   `json:"published"`
		DeviationID string `json:"deviationid"`
		URL         string `json:"url"`
	}
	if err := c.do(req, op, &out, accessToken); err != nil {
		return StashItem{}, err
	}
	return StashItem{ItemID: out.ItemID, Stack: out.Stack, Title: out.Title, Published: out.Published,
		DeviationID: out.DeviationID, URL: out.URL}, nil
}

// deltaPageSize is how many entries FindByStack asks for per page (the
// API's maximum).
const deltaPageSize = 120

// deltaPagesMax bounds how many pages FindByStack reads.
const deltaPagesMax = 1000

// FindByStack pages through the caller's stash for an item submitted to
// stack and returns the first (oldest) one, with ItemID, Stack and Title
// set; call Item for its publication state. found is false when no item is
// in that stack.
func (c *Client) FindByStack(ctx context.Context, accessToken, stack string) (StashItem, bool, error) {
	const op = "stash delta"
	offset := 0
	for range deltaPagesMax {
		item, found, next, err := c.deltaPage(ctx, accessToken, stack, offset)
		if err != nil || found || next < 0 {
			return item, found, err
		}
		offset = next
	}
	return StashItem{}, false, fmt.Errorf("%s: more than %d pages", op, deltaPagesMax)
}

// deltaPage reads one page of the stash delta from offset, under its own
// deadline: the item of stack if the page has it, else the next offset (-1
// at the end).
func (c *Client) deltaPage(ctx context.Context, accessToken, stack string, offset int) (StashItem, bool, int, error) {
	const op = "stash delta"
	ctx, cancel := context.WithTimeout(ctx, c.Timeout(0))
	defer cancel()
	q := url.Values{"offset": {strconv.Itoa(offset)}, "limit": {strconv.Itoa(deltaPageSize)}}
	req, err := c.newRequest(ctx, http.MethodGet, "/api/v1/oauth2/stash/delta?"+q.Encode(), accessToken, nil)
	if err != nil {
		return StashItem{}, false, -1, fmt.Errorf("%s: %w", op, err)
	}
	var out struct {
		HasMore    bool `json:"has_more"`
		NextOffset *int `json:"next_offset"`
		Entries    []struct {
			ItemID   int64  `json:"itemid"`
			Stack    string `json:"stack"`
			Metadata struct {
				Title string `json:"title"`
			} `json:"metadata"`
		} `json:"entries"`
	}
	if err := c.do(req, op, &out, accessToken); err != nil {
		return StashItem{}, false, -1, err
	}
	for _, e := range out.Entries {
		if e.Stack == stack {
			return StashItem{ItemID: e.ItemID, Stack: e.Stack, Title: e.Metadata.Title}, true, -1, nil
		}
	}
	if !out.HasMore || out.NextOffset == nil {
		return StashItem{}, false, -1, nil
	}
	if *out.NextOffset <= offset {
		return StashItem{}, false, -1, fmt.Errorf("%s: next_offset %d does not advance from %d", op, *out.NextOffset, offset)
	}
	return StashItem{}, false, *out.NextOffset, nil
}
