package httpapi

import (
	"net/http"
	"testing"
)

func TestJobsPage(t *testing.T) {
	for _, tc := range []struct {
		name, cursor, body string
		total              int
	}{
		{"last page", "", `{"jobs":[1,2],"nextCursor":null}` + "\n", 2},
		{"more to come", "abc", `{"jobs":[1,2],"nextCursor":"abc"}` + "\n", 7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := JobsPage([]int{1, 2}, tc.cursor, tc.total)
			if r.StatusCode != http.StatusOK || r.Body != tc.body {
				t.Errorf("got %d %q, want 200 %q", r.StatusCode, r.Body, tc.body)
			}
			if got, want := r.Headers["X-Total-Count"], map[int]string{2: "2", 7: "7"}[tc.total]; got != want {
				t.Errorf("X-Total-Count = %q, want %q", got, want)
			}
			if r.Headers["Content-Type"] != ContentTypeJSON {
				t.Errorf("Content-Type = %q", r.Headers["Content-Type"])
			}
		})
	}
}
