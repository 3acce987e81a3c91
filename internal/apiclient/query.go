package apiclient

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
)

func set(v url.Values, name, value string) {
	if value != "" {
		v.Set(name, value)
	}
}

func withQuery(path string, v url.Values) string {
	if len(v) == 0 {
		return path
	}
	return path + "?" + v.Encode()
}

// total reads X-Total-Count, -1 when absent or unreadable.
func total(h http.Header) int {
	n, err := strconv.Atoi(h.Get("X-Total-Count"))
	if err != nil {
		return -1
	}
	return n
}

func nonNil(ids []string) []string {
	if ids == nil {
		return []string{}
	}
	return ids
}

func decode(method, path string, raw []byte, out any) error {
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("%s %s: the answer is not what the client expects: %w", method, path, err)
	}
	return nil
}

func readSome(r io.Reader, n int64) ([]byte, error) { return io.ReadAll(io.LimitReader(r, n)) }
