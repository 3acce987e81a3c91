package simulator

import (
	"cmp"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// TitleMaxRunes is the longest title stash/submit accepts, as on DeviantArt.
const TitleMaxRunes = 50

// fieldMaxBytes bounds one text field of a submission.
const fieldMaxBytes = 64 << 10

// textFields are the stash/submit parameters that are not the file; any
// other part (or any part with a filename) is taken as the file.
var textFields = map[string]bool{
	"title": true, "artist_comments": true, "tags[]": true, "tags": true, "stack": true, "stackid": true,
	"itemid": true, "original_url": true, "is_dirty": true, "noai": true, "is_ai_generated": true,
	"access_token": true,
}

// Item is one submitted stash item as the simulator recorded it.
type Item struct {
	// ItemID is the id stash/submit answered.
	ItemID int64 `json:"itemid"`
	// Account is the owner, as AccountOf names it.
	Account string `json:"account"`
	// Stack and StackID are the stack the item went to; stacks are per
	// account and named by the submit's stack field.
	Stack   string `json:"stack"`
	StackID int64  `json:"stackid"`
	// Title, ArtistComments and Tags are the submitted fields.
	Title          string   `json:"title"`
	ArtistComments string   `json:"artist_comments"`
	Tags           []string `json:"tags"`
	// Filename and ContentType are the file part's.
	Filename    string `json:"filename"`
	ContentType string `json:"contentType"`
	// Size and SHA256 (hex) describe the bytes received.
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
	// SubmittedAt is when the submit was answered (Options.Now).
	SubmittedAt time.Time `json:"submittedAt"`
	// Published, DeviationID and URL say whether and where it was published.
	Published   bool   `json:"published"`
	DeviationID string `json:"deviationid,omitempty"`
	URL         string `json:"url,omitempty"`
}

// item is an Item with its owner as a number.
type item struct {
	Item
	account int
}

type stackKey struct {
	account int
	name    string
}

// Publication is one deviation published through stash/publish.
type Publication struct {
	// DeviationID is the UUID stash/publish answered.
	DeviationID string `json:"deviationid"`
	// ItemID, Title and Stack are the published item's.
	ItemID int64  `json:"itemid"`
	Title  string `json:"title"`
	Stack  string `json:"stack"`
	// URL is the deviation's page as answered.
	URL string `json:"url"`
	// PublishedAt is when it was published (Options.Now, UTC).
	PublishedAt time.Time `json:"publishedAt"`
}

// Publications returns every publication made since the last reset, oldest
// first (the data of GET /_sim/publications).
func (s *Server) Publications() []Publication {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Publication{}, s.st.pubs...)
}

// Items returns every stash item submitted since the last reset, by item
// id (the data of GET /_sim/items).
func (s *Server) Items() []Item {
	s.mu.Lock()
	out := make([]Item, 0, len(s.st.items))
	for _, it := range s.st.items {
		c := it.Item
		c.Tags = slices.Clone(c.Tags)
		out = append(out, c)
	}
	s.mu.Unlock()
	slices.SortFunc(out, func(a, b Item) int { return cmp.Compare(a.ItemID, b.ItemID) })
	return out
}

type submitAnswer struct {
	Status  string `json:"status"`
	ItemID  int64  `json:"itemid"`
	Stack   string `json:"stack"`
	StackID int64  `json:"stackid"`
}

// submit serves POST /api/v1/oauth2/stash/submit. The body is read as a
// stream: the file is hashed as it arrives and never held in memory.
func (s *Server) submit(w http.ResponseWriter, r *http.Request) {
	// A token in the header or query is checked before the body is read;
	// otherwise it must come as an access_token field of the form.
	acct, authed := 0, false
	if tok := bearer(r); tok != "" {
		if acct, authed = s.authorize(w, tok); !authed {
			return
		}
	}
	mt, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/form-data" || params["boundary"] == "" {
		apiError(w, http.StatusBadRequest, "invalid_request", "the body must be multipart/form-data")
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, SubmitMaxBytes)
	sub, err := readSubmission(multipart.NewReader(r.Body, params["boundary"]))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			apiError(w, http.StatusRequestEntityTooLarge, "invalid_request", "the body is too large")
			return
		}
		apiError(w, http.StatusBadRequest, "invalid_request", err.Error())
		return
	}
	if !authed {
		if acct, authed = s.authorize(w, sub.accessToken); !authed {
			return
		}
	}
	switch n := utf8.RuneCountInString(sub.Title); {
	case strings.TrimSpace(sub.Title) == "":
		apiError(w, http.StatusBadRequest, "invalid_request", "title is required")
		return
	case n > TitleMaxRunes:
		apiError(w, http.StatusBadRequest, "invalid_request", fmt.Sprintf("title is longer than %d characters", TitleMaxRunes))
		return
	case !sub.gotFile:
		apiError(w, http.StatusBadRequest, "invalid_request", "a file is required")
		return
	case sub.Size == 0:
		apiError(w, http.StatusBadRequest, "invalid_request", "the file is empty")
		return
	}
	now := s.opts.Now().UTC()
	s.mu.Lock()
	s.st.nextItem++
	it := &item{Item: sub.Item, account: acct}
	it.ItemID, it.Account, it.SubmittedAt = s.st.nextItem, accountID(acct), now
	key := stackKey{acct, it.Stack}
	id, ok := s.st.stacks[key]
	if !ok {
		s.st.nextStack++
		id = s.st.nextStack
		s.st.stacks[key] = id
	}
	it.StackID = id
	s.st.items[it.ItemID] = it
	ans := submitAnswer{Status: "success", ItemID: it.ItemID, Stack: it.Stack, StackID: it.StackID}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, ans)
}

type submission struct {
	Item
	gotFile     bool
	accessToken string
}

// readSubmission reads the parts of a stash/submit form; the file is
// hashed and counted, not kept.
func readSubmission(mr *multipart.Reader) (submission, error) {
	var sub submission
	for {
		p, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			return sub, nil
		}
		if err != nil {
			return sub, fmt.Errorf("bad multipart body: %w", err)
		}
		name := p.FormName()
		if p.FileName() != "" || !textFields[name] {
			if sub.gotFile {
				return sub, errors.New("only one file may be submitted")
			}
			h := sha256.New()
			n, err := io.Copy(h, p)
			if err != nil {
				return sub, fmt.Errorf("bad file part: %w", err)
			}
			sub.gotFile, sub.Size, sub.SHA256 = true, n, hex.EncodeToString(h.Sum(nil))
			sub.Filename, sub.ContentType = p.FileName(), p.Header.Get("Content-Type")
			continue
		}
		b, err := io.ReadAll(io.LimitReader(p, fieldMaxBytes+1))
		if err != nil {
			return sub, fmt.Errorf("bad field %q: %w", name, err)
		}
		if len(b) > fieldMaxBytes {
			return sub, fmt.Errorf("field %q is longer than %d bytes", name, fieldMaxBytes)
		}
		v := string(b)
		switch name {
		case "title":
			sub.Title = v
		case "artist_comments":
			sub.ArtistComments = v
		case "tags[]", "tags":
			sub.Tags = append(sub.Tags, v)
		case "stack":
			sub.Stack = v
		case "access_token":
			sub.accessToken = v
		}
	}
}

type publishAnswer struct {
	Status      string `json:"status"`
	URL         string `json:"url"`
	DeviationID string `json:"deviationid"`
}

// publish serves POST /api/v1/oauth2/stash/publish. An item is published at
// most once: the second attempt is refused with error_code
// "already_published" and records nothing.
func (s *Server) publish(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 1<<16)
	if err := r.ParseForm(); err != nil {
		apiError(w, http.StatusBadRequest, "invalid_request", "the body is not a valid form")
		return
	}
	acct, ok := s.authed(w, r)
	if !ok {
		return
	}
	id, err := strconv.ParseInt(r.Form.Get("itemid"), 10, 64)
	if err != nil {
		apiError(w, http.StatusBadRequest, "invalid_request", "itemid is required and must be an integer")
		return
	}
	now := s.opts.Now().UTC()
	s.mu.Lock()
	it, ok := s.st.items[id]
	switch {
	case !ok || it.account != acct:
		s.mu.Unlock()
		apiError(w, http.StatusBadRequest, "invalid_request", "unknown itemid")
		return
	case it.Published:
		s.mu.Unlock()
		writeJSON(w, http.StatusBadRequest, errorBody{Status: "error", Error: "invalid_request",
			Description: "Item already published", Code: "already_published"})
		return
	}
	it.Published, it.DeviationID = true, newUUID()
	it.URL = fmt.Sprintf("https://www.deviantart.com/sim/art/%s-%d", slug(it.Title), 1000000000+len(s.st.pubs)+1)
	s.st.pubs = append(s.st.pubs, Publication{DeviationID: it.DeviationID, ItemID: it.ItemID, Title: it.Title,
		Stack: it.Stack, URL: it.URL, PublishedAt: now})
	ans := publishAnswer{Status: "success", URL: it.URL, DeviationID: it.DeviationID}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, ans)
}

// newUUID returns a random (version 4) UUID in DeviantArt's upper case.
func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%X-%X-%X-%X-%X", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

func slug(s string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(s) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			if dash && b.Len() > 0 {
				b.WriteByte('-')
			}
			b.WriteRune(r)
			dash = false
		default:
			dash = true
		}
	}
	if b.Len() == 0 {
		return "untitled"
	}
	return b.String()
}

type itemAnswer struct {
	ItemID      int64  `json:"itemid"`
	StackID     int64  `json:"stackid"`
	Stack       string `json:"stack"`
	Title       string `json:"title"`
	Size        int64  `json:"size"`
	Published   bool   `json:"published"`
	DeviationID string `json:"deviationid,omitempty"`
	URL         string `json:"url,omitempty"`
}

// item serves GET /api/v1/oauth2/stash/item/{itemid}: what became of an
// item, including its deviation once published. Items of other accounts are
// unknown.
func (s *Server) item(w http.ResponseWriter, r *http.Request) {
	acct, ok := s.authed(w, r)
	if !ok {
		return
	}
	id, err := strconv.ParseInt(r.PathValue("itemid"), 10, 64)
	if err != nil {
		apiError(w, http.StatusBadRequest, "invalid_request", "itemid must be an integer")
		return
	}
	s.mu.Lock()
	it, ok := s.st.items[id]
	var ans itemAnswer
	if ok && it.account == acct {
		ans = itemAnswer{ItemID: it.ItemID, StackID: it.StackID, Stack: it.Stack, Title: it.Title, Size: it.Size,
			Published: it.Published, DeviationID: it.DeviationID, URL: it.URL}
	}
	s.mu.Unlock()
	if !ok || it.account != acct {
		apiError(w, http.StatusBadRequest, "invalid_request", "unknown itemid")
		return
	}
	writeJSON(w, http.StatusOK, ans)
}

// DeltaLimitMax is the largest page stash/delta serves (DeviantArt's).
const DeltaLimitMax = 120

type deltaEntry struct {
	ItemID   int64         `json:"itemid"`
	StackID  int64         `json:"stackid"`
	Stack    string        `json:"stack"`
	Metadata deltaMetadata `json:"metadata"`
}

type deltaMetadata struct {
	Title          string   `json:"title"`
	ArtistComments string   `json:"artist_comments"`
	Tags           []string `json:"tags"`
}

type deltaAnswer struct {
	HasMore    bool         `json:"has_more"`
	NextOffset *int         `json:"next_offset"`
	Entries    []deltaEntry `json:"entries"`
}

// delta serves GET /api/v1/oauth2/stash/delta?offset=&limit=: the caller's
// items, published or not, by item id, so a client can find the item it
// submitted to a stack.
func (s *Server) delta(w http.ResponseWriter, r *http.Request) {
	acct, ok := s.authed(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	offset, err1 := intParam(q.Get("offset"), 0)
	limit, err2 := intParam(q.Get("limit"), DeltaLimitMax)
	if err1 != nil || err2 != nil {
		apiError(w, http.StatusBadRequest, "invalid_request", "offset and limit must be non-negative integers")
		return
	}
	if limit == 0 || limit > DeltaLimitMax {
		limit = DeltaLimitMax
	}
	var mine []deltaEntry
	s.mu.Lock()
	for _, it := range s.st.items {
		if it.account == acct {
			mine = append(mine, deltaEntry{ItemID: it.ItemID, StackID: it.StackID, Stack: it.Stack,
				Metadata: deltaMetadata{Title: it.Title, ArtistComments: it.ArtistComments, Tags: slices.Clone(it.Tags)}})
		}
	}
	s.mu.Unlock()
	slices.SortFunc(mine, func(a, b deltaEntry) int { return cmp.Compare(a.ItemID, b.ItemID) })
	offset = min(offset, len(mine))
	end := offset + min(limit, len(mine)-offset)
	ans := deltaAnswer{Entries: mine[offset:end]}
	if ans.Entries == nil {
		ans.Entries = []deltaEntry{}
	}
	if end < len(mine) {
		ans.HasMore, ans.NextOffset = true, &end
	}
	writeJSON(w, http.StatusOK, ans)
}
