// Package deviantart is the client of the external publishing API: OAuth
// refresh (the provider rotates refresh tokens), stash/submit with the file
// streamed as multipart, stash/publish, and the lookups that tell what an
// earlier, interrupted attempt already did. Errors carry the HTTP status and
// Retry-After and never a token.
package deviantart

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Config configures a Client.
type Config struct {
	// BaseURL is e.g. https://www.deviantart.com (or the simulator).
	BaseURL string
	// ClientID and ClientSecret identify the application.
	ClientID, ClientSecret string
	// HTTPClient defaults to a client without a global timeout: deadlines
	// come from each call's context.
	HTTPClient *http.Client
	// Now defaults to time.Now.
	Now func() time.Time
}

// Client calls the API.
type Client struct{ cfg Config }

// New returns a Client.
func New(cfg Config) *Client {
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Transport: &http.Transport{
			Proxy: http.ProxyFromEnvironment, MaxIdleConnsPerHost: 64, IdleConnTimeout: 90 * time.Second,
			TLSHandshakeTimeout: 10 * time.Second, ResponseHeaderTimeout: 60 * time.Second,
		}}
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	cfg.BaseURL = strings.TrimRight(cfg.BaseURL, "/")
	return &Client{cfg: cfg}
}

// APIError is a non-2xx answer.
type APIError struct {
	Op          string
	Status      int
	Code        string
	Description string
	// Retry is the Retry-After the API asked for.
	Retry time.Duration
}

func (e *APIError) Error() string {
	s := fmt.Sprintf("%s: HTTP %d", e.Op, e.Status)
	if e.Code != "" {
		s += " " + e.Code
	}
	if e.Description != "" {
		s += ": " + e.Description
	}
	return s
}

// Temporary reports whether retrying may help: 429 and 5xx.
func (e *APIError) Temporary() bool { return e.Status == 429 || e.Status >= 500 }

// RetryAfter is the delay the API asked for (0 if none).
func (e *APIError) RetryAfter() time.Duration { return e.Retry }

// IsAlreadyPublished reports whether err says the item was published before.
func IsAlreadyPublished(err error) bool {
	var e *APIError
	return errors.As(err, &e) && (e.Code == "already_published" || strings.Contains(strings.ToLower(e.Description), "already published"))
}

// Token is an OAuth token pair.
type Token struct {
	AccessToken, RefreshToken string
	ExpiresAt                 time.Time
}

// Deviation is a published item.
type Deviation struct{ ID, URL string }

// StashItem is what the API knows of a submitted item.
type StashItem struct {
	ItemID      int64
	Stack       string
	Title       string
	Published   bool
	DeviationID string
	URL         string
}

// Submission is one file to submit.
type Submission struct {
	Title, Description string
	Tags               []string
	// Stack names the stash stack; the publisher uses the item id, so it
	// can find the submission again after a crash.
	Stack                 string
	Filename, ContentType string
	Body                  io.Reader
	Size                  int64
}

func (c *Client) do(ctx context.Context, op string, req *http.Request, out any) error {
	resp, err := c.cfg.HTTPClient.Do(req.WithContext(ctx))
	if err != nil {
		return fmt.Errorf("%s: %w", op, scrub(err))
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("%s: reading the answer: %w", op, err)
	}
	var envelope struct {
		Error       string `json:"error"`
		Description string `json:"error_description"`
		Code        any    `json:"error_code"`
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		_ = json.Unmarshal(body, &envelope)
		e := &APIError{Op: op, Status: resp.StatusCode, Code: envelope.Error, Description: envelope.Description, Retry: retryAfter(resp.Header.Get("Retry-After"), c.cfg.Now())}
		if code, ok := envelope.Code.(string); ok && code != "" {
			e.Code = code
		}
		return e
	}
	if out != nil {
		if err := json.Unmarshal(body, out); err != nil {
			return fmt.Errorf("%s: decoding the answer: %w", op, err)
		}
	}
	return nil
}

// scrub removes the query (which may carry a token) from URL errors.
func scrub(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		u, perr := url.Parse(ue.URL)
		if perr == nil {
			u.RawQuery = ""
			return &url.Error{Op: ue.Op, URL: u.String(), Err: ue.Err}
		}
	}
	return err
}

func retryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if s, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && s >= 0 {
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// Refresh exchanges a refresh token for a new pair (the old one dies).
func (c *Client) Refresh(ctx context.Context, refreshToken string) (Token, error) {
	form := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {refreshToken}, "client_id": {c.cfg.ClientID}, "client_secret": {c.cfg.ClientSecret}}
	req, err := http.NewRequest(http.MethodPost, c.cfg.BaseURL+"/oauth2/token", strings.NewReader(form.Encode()))
	if err != nil {
		return Token{}, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	var out struct {
		AccessToken  string `json:"access_token"`
		RefreshToken string `json:"refresh_token"`
		ExpiresIn    int    `json:"expires_in"`
	}
	if err := c.do(ctx, "token refresh", req, &out); err != nil {
		return Token{}, err
	}
	if out.AccessToken == "" || out.RefreshToken == "" {
		return Token{}, errors.New("token refresh: the answer has no tokens")
	}
	return Token{AccessToken: out.AccessToken, RefreshToken: out.RefreshToken, ExpiresAt: c.cfg.Now().Add(time.Duration(out.ExpiresIn) * time.Second)}, nil
}

func (c *Client) authed(method, path, token string, body io.Reader) (*http.Request, error) {
	req, err := http.NewRequest(method, c.cfg.BaseURL+path, body)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	return req, nil
}

// Submit streams the file into stash/submit and returns the item id. The
// body is never held in memory whole.
func (c *Client) Submit(ctx context.Context, accessToken string, s Submission) (int64, error) {
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() {
		err := func() error {
			fields := [][2]string{{"title", s.Title}, {"artist_comments", s.Description}, {"stack", s.Stack}}
			for _, t := range s.Tags {
				fields = append(fields, [2]string{"tags[]", t})
			}
			for _, f := range fields {
				if f[1] == "" && f[0] != "title" {
					continue
				}
				if err := mw.WriteField(f[0], f[1]); err != nil {
					return err
				}
			}
			h := textproto.MIMEHeader{}
			h.Set("Content-Disposition", fmt.Sprintf(`form-data; name="file"; filename=%q`, s.Filename))
			h.Set("Content-Type", s.ContentType)
			part, err := mw.CreatePart(h)
			if err != nil {
				return err
			}
			if _, err := io.Copy(part, s.Body); err != nil {
				return err
			}
			return mw.Close()
		}()
		pw.CloseWithError(err)
	}()
	req, err := c.authed(http.MethodPost, "/api/v1/oauth2/stash/submit", accessToken, pr)
	if err != nil {
		pr.Close()
		return 0, err
	}
	req.Header.Set("Content-Type", mw.FormDataContentType())
	var out struct {
		ItemID int64 `json:"itemid"`
	}
	err = c.do(ctx, "stash submit", req, &out)
	pr.Close()
	if err != nil {
		return 0, err
	}
	if out.ItemID == 0 {
		return 0, errors.New("stash submit: the answer has no itemid")
	}
	return out.ItemID, nil
}

// Publish publishes a stash item.
func (c *Client) Publish(ctx context.Context, accessToken string, itemID int64) (Deviation, error) {
	form := url.Values{"itemid": {strconv.FormatInt(itemID, 10)}, "agree_submission": {"1"}, "agree_tos": {"1"}, "is_mature": {"false"}}
	req, err := c.authed(http.MethodPost, "/api/v1/oauth2/stash/publish", accessToken, strings.NewReader(form.Encode()))
	if err != nil {
		return Deviation{}, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	var out struct {
		DeviationID string `json:"deviationid"`
		URL         string `json:"url"`
	}
	if err := c.do(ctx, "stash publish", req, &out); err != nil {
		return Deviation{}, err
	}
	return Deviation{ID: out.DeviationID, URL: out.URL}, nil
}

type itemJSON struct {
	ItemID      int64  `json:"itemid"`
	Stack       string `json:"stack"`
	Title       string `json:"title"`
	Published   bool   `json:"published"`
	DeviationID string `json:"deviationid"`
	URL         string `json:"url"`
	Metadata    struct {
		Title string `json:"title"`
	} `json:"metadata"`
}

func (i itemJSON) item() StashItem {
	t := i.Title
	if t == "" {
		t = i.Metadata.Title
	}
	return StashItem{ItemID: i.ItemID, Stack: i.Stack, Title: t, Published: i.Published, DeviationID: i.DeviationID, URL: i.URL}
}

// Item returns what the API knows of a stash item.
func (c *Client) Item(ctx context.Context, accessToken string, itemID int64) (StashItem, error) {
	req, err := c.authed(http.MethodGet, "/api/v1/oauth2/stash/item/"+strconv.FormatInt(itemID, 10), accessToken, nil)
	if err != nil {
		return StashItem{}, err
	}
	var out itemJSON
	if err := c.do(ctx, "stash item", req, &out); err != nil {
		return StashItem{}, err
	}
	return out.item(), nil
}

// FindByStack pages through the account's stash for an item submitted to
// stack.
func (c *Client) FindByStack(ctx context.Context, accessToken, stack string) (StashItem, bool, error) {
	offset := 0
	for range 1000 {
		req, err := c.authed(http.MethodGet, fmt.Sprintf("/api/v1/oauth2/stash/delta?offset=%d&limit=120", offset), accessToken, nil)
		if err != nil {
			return StashItem{}, false, err
		}
		var out struct {
			HasMore    bool       `json:"has_more"`
			NextOffset *int       `json:"next_offset"`
			Entries    []itemJSON `json:"entries"`
		}
		if err := c.do(ctx, "stash delta", req, &out); err != nil {
			return StashItem{}, false, err
		}
		for _, e := range out.Entries {
			if e.Stack == stack {
				return e.item(), true, nil
			}
		}
		if !out.HasMore || out.NextOffset == nil {
			return StashItem{}, false, nil
		}
		offset = *out.NextOffset
	}
	return StashItem{}, false, errors.New("stash delta: too many pages")
}

// StatusCode is the HTTP status of the answer.
func (e *APIError) StatusCode() int { return e.Status }
