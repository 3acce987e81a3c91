package admin

import (
	"fmt"
	"slices"
)

// CodeOAuthClientNotSet is the reason jobs wait while the environment's
// OAuth client secret holds no credentials (secretref.CodeOAuthClientNotSet,
// the same string: this package links no Secrets Manager client).
const CodeOAuthClientNotSet = "oauth_client_not_set"

// Blocked is work that waits for an operator: a reason jobs are parked that
// no time will cure.
type Blocked struct {
	// Reason is the code the jobs wait with (their waiting reason).
	Reason string `json:"reason"`
	// Jobs is how many wait for it.
	Jobs int `json:"jobs"`
	// Message says what is wrong and what to do.
	Message string `json:"message"`
}

// blockers are the waiting reasons an operator must act on, with what to
// say about them.
var blockers = map[string]string{
	CodeOAuthClientNotSet: `the OAuth client secret is not set: put the registered application's {"clientId","clientSecret"} in the environment's OAuth client secret; the jobs that need a token refresh wait (no attempt spent) and run once it is set`,
}

// blockedOf lists, from the parked jobs' counts by reason, those an
// operator must unblock, by reason.
func blockedOf(parked map[string]int) []Blocked {
	out := []Blocked{}
	for reason, n := range parked {
		if msg, ok := blockers[reason]; ok && n > 0 {
			out = append(out, Blocked{Reason: reason, Jobs: n, Message: msg})
		}
	}
	slices.SortFunc(out, func(a, b Blocked) int { return cmpString(a.Reason, b.Reason) })
	return out
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// String is the line the CLI prints.
func (b Blocked) String() string {
	return fmt.Sprintf("blocked: %d job(s) wait (%s): %s", b.Jobs, b.Reason, b.Message)
}
