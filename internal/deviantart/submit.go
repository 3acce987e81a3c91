package deviantart

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"strings"
)

// errSubmitEnded stops the body writer once the call is over.
var errSubmitEnded = errors.New("the submit call ended")

// Submit uploads s to stash/submit and returns the new item's id. The file
// is streamed: s.Body is copied into the request through a pipe as the
// connection takes it, so memory use does not grow with the file. Body is
// not touched after Submit returns.
//
// A failed call may still have created the item (the answer can be lost);
// FindByStack with s.Stack finds it.
func (c *Client) Submit(ctx context.Context, accessToken string, s Submission) (int64, error) {
	const op = "stash submit"
	if s.Body == nil {
		return 0, fmt.Errorf("%s: no file body", op)
	}
	if s.Size < 0 {
		return 0, fmt.Errorf("%s: negative size %d", op, s.Size)
	}
	// The whole call, file included, ends within Timeout(s.Size).
	ctx, cancel := context.WithTimeout(ctx, c.Timeout(s.Size))
	defer cancel()
	head, tail, contentType, err := envelope(s)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", op, err)
	}
	pr, pw := io.Pipe()
	req, err := c.newRequest(ctx, http.MethodPost, "/api/v1/oauth2/stash/submit", accessToken, pr)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", op, err)
	}
	req.Header.Set("Content-Type", contentType)
	// Let the server refuse (say, a dead token) before the file is sent.
	req.Header.Set("Expect", "100-continue")
	req.ContentLength = -1 // chunked unless the size is known
	if s.Size > 0 {
		req.ContentLength = int64(len(head)) + s.Size + int64(len(tail))
	}

	written := make(chan error, 1)
	go func() {
		err := writeBody(pw, head, s.Body, s.Size, tail)
		pw.CloseWithError(err) // nil: the reader sees EOF
		written <- err
	}()
	var out struct {
		ItemID int64 `json:"itemid"`
	}
	err = c.do(req, op, &out, accessToken)
	// The transport may stop reading early (an error answer, a cancelled
	// context); closing the reader ends a writer blocked on the pipe, and
	// waiting for it hands Body back to the caller.
	pr.CloseWithError(errSubmitEnded)
	if werr := <-written; errors.As(werr, new(*fileError)) {
		return 0, fmt.Errorf("%s: %w", op, werr)
	}
	if err != nil {
		return 0, err
	}
	if out.ItemID == 0 {
		return 0, fmt.Errorf("%s: the answer has no itemid", op)
	}
	return out.ItemID, nil
}

// envelope renders the multipart form around the file: head is every field
// and the file part's header, tail closes the form.
func envelope(s Submission) (head, tail []byte, contentType string, err error) {
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	fields := [][2]string{{"title", s.Title}}
	if s.Description != "" {
		fields = append(fields, [2]string{"artist_comments", s.Description})
	}
	for _, t := range s.Tags {
		fields = append(fields, [2]string{"tags[]", t})
	}
	if s.Stack != "" {
		fields = append(fields, [2]string{"stack", s.Stack})
	}
	for _, f := range fields {
		if err := mw.WriteField(f[0], f[1]); err != nil {
			return nil, nil, "", err
		}
	}
	filename := clean(s.Filename)
	if filename == "" {
		filename = "file"
	}
	ct := s.ContentType
	if _, _, perr := mime.ParseMediaType(ct); perr != nil || clean(ct) != ct {
		ct = "application/octet-stream"
	}
	h := textproto.MIMEHeader{}
	h.Set("Content-Disposition", mime.FormatMediaType("form-data", map[string]string{"name": "file", "filename": filename}))
	h.Set("Content-Type", ct)
	if _, err := mw.CreatePart(h); err != nil {
		return nil, nil, "", err
	}
	head = bytes.Clone(buf.Bytes())
	buf.Reset()
	if err := mw.Close(); err != nil {
		return nil, nil, "", err
	}
	return head, bytes.Clone(buf.Bytes()), mw.FormDataContentType(), nil
}

// clean drops control characters, which have no place in a header.
func clean(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return -1
		}
		return r
	}, s)
}

// fileError is a failure of the file itself (as opposed to the request
// ending while it was being sent).
type fileError struct{ err error }

func (e *fileError) Error() string { return e.err.Error() }
func (e *fileError) Unwrap() error { return e.err }

// fileReader marks the errors of the file's reader.
type fileReader struct{ r io.Reader }

func (f fileReader) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	if err != nil && err != io.EOF {
		err = &fileError{fmt.Errorf("reading the file: %w", err)}
	}
	return n, err
}

// writeBody writes the form: head, the file, tail. With a known size, a
// file of another length is a *fileError, as is a failure to read it; an
// error writing means the request ended.
func writeBody(w io.Writer, head []byte, body io.Reader, size int64, tail []byte) error {
	if _, err := w.Write(head); err != nil {
		return err
	}
	var src io.Reader = fileReader{body}
	if size > 0 {
		src = io.LimitReader(src, size+1)
	}
	n, err := io.Copy(w, src)
	if err != nil {
		return err
	}
	switch {
	case size > 0 && n > size:
		return &fileError{fmt.Errorf("the file is longer than its size of %d bytes", size)}
	case size > 0 && n < size:
		return &fileError{fmt.Errorf("the file ended after %d of %d bytes", n, size)}
	}
	_, err = w.Write(tail)
	return err
}
