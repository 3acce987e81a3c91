package apiclient

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// Event is one Server-Sent Events message of a stream: a snapshot, a job
// event or a ping.
type Event struct {
	// ID is the event's id (resume after it with Last-Event-ID); empty on
	// pings.
	ID string
	// Type is the event's name: snapshot, ping, job.succeeded …
	Type string
	// Data is the event's data, its lines joined by "\n" (JSON).
	Data string
}

// StreamRequest names one of the event streams.
type StreamRequest struct {
	// JobID: one job's events (/v1/jobs/{id}/events); empty: every job of
	// the caller (/v1/events).
	JobID string
	// Admin: the operators' streams (/v1/admin/events,
	// /v1/admin/jobs/{id}/events), for an admin or service token.
	Admin bool
	// LastEventID resumes after that event.
	LastEventID string
}

// Path is the stream's route.
func (r StreamRequest) Path() string {
	prefix := "/v1"
	if r.Admin {
		prefix = "/v1/admin"
	}
	if r.JobID == "" {
		return prefix + "/events"
	}
	return prefix + "/jobs/" + url.PathEscape(r.JobID) + "/events"
}

// Stream is an open event stream. Next reads it; Close (or the end of the
// context Events was given) ends it.
type Stream struct {
	body io.ReadCloser
	sc   *bufio.Scanner
}

// Events opens an event stream (at the WithStreamURL origin). An answer
// other than 200 text/event-stream is an *APIError (429 too_many_streams
// with its RetryAfter when the caller has too many open).
func (c *Client) Events(ctx context.Context, r StreamRequest) (*Stream, error) {
	path := r.Path()
	h := http.Header{"Accept": {"text/event-stream"}}
	if r.LastEventID != "" {
		h.Set("Last-Event-ID", r.LastEventID)
	}
	req, err := c.request(ctx, c.streams, http.MethodGet, path, nil, h)
	if err != nil {
		return nil, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		defer resp.Body.Close()
		raw, _ := readSome(resp.Body, MaxAnswerBytes)
		return nil, apiError(http.MethodGet, path, &Response{Status: resp.StatusCode, Header: resp.Header, Body: raw}, c.now())
	}
	return NewStream(resp.Body), nil
}

// NewStream reads Server-Sent Events from body (an answer opened some
// other way).
func NewStream(body io.ReadCloser) *Stream {
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 0, 64<<10), MaxAnswerBytes)
	return &Stream{body: body, sc: sc}
}

// Next returns the next event; io.EOF when the stream ended cleanly. Lines
// starting with ":" are comments and skipped, as are blocks with no field.
func (s *Stream) Next() (Event, error) {
	var (
		e       Event
		data    []string
		anyLine bool
	)
	for s.sc.Scan() {
		line := s.sc.Text()
		if line == "" {
			if !anyLine {
				continue
			}
			e.Data = strings.Join(data, "\n")
			return e, nil
		}
		if strings.HasPrefix(line, ":") {
			continue
		}
		name, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		anyLine = true
		switch name {
		case "id":
			e.ID = value
		case "event":
			e.Type = value
		case "data":
			data = append(data, value)
		}
	}
	if err := s.sc.Err(); err != nil {
		return Event{}, err
	}
	return Event{}, io.EOF
}

// Close ends the stream.
func (s *Stream) Close() error { return s.body.Close() }

// Chan delivers the stream's events on a channel, closed (and the stream
// with it) when the stream ends: for tests that select on events and a
// deadline.
func (s *Stream) Chan() <-chan Event {
	ch := make(chan Event, 100)
	go func() {
		defer close(ch)
		defer s.Close()
		for {
			e, err := s.Next()
			if err != nil {
				return
			}
			ch <- e
		}
	}()
	return ch
}
