package pipeline

import "testing"

// TestAPIHostKeysTheBreaker: the external API's breaker is keyed by host,
// whatever the base URL's path; a value that is no URL keys itself.
func TestAPIHostKeysTheBreaker(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"https://www.deviantart.com/api/v1/oauth2": "www.deviantart.com",
		"http://127.0.0.1:8081":                    "127.0.0.1:8081",
		"deviantart":                               "deviantart",
	} {
		if got := APIHost(in); got != want {
			t.Errorf("APIHost(%q) = %q, want %q", in, got, want)
		}
	}
}
