package job

import "time"

// Wait reasons: why a job that has work ahead is not running now.
const (
	// WaitScheduled: the job runs at its scheduleAt.
	WaitScheduled = "scheduled"
	// WaitCircuitOpen: a circuit breaker the job's calls go through is
	// open (Wait.Breaker names it); no attempt is spent.
	WaitCircuitOpen = "circuit_open"
	// WaitRateLimited: the external API answered 429; Until honours its
	// Retry-After. No attempt is spent.
	WaitRateLimited = "rate_limited"
	// WaitPaused: the job's tier is paused by an operator; it runs once
	// the tier is resumed.
	WaitPaused = "paused"
	// WaitBackoff: the last attempt failed with a temporary error; the
	// next one is due at Until (the attempt is spent).
	WaitBackoff = "backoff"
	// WaitDeadline: the invocation had no time left for the job's next
	// call; it was handed back, no attempt spent.
	WaitDeadline = "deadline"
)

// Wait says why a job that has work ahead is not running, and when it is
// next tried. A job that runs, or waits only for a worker to receive its
// message, has none.
type Wait struct {
	// Reason is one of the Wait* reasons, or the code of what the job
	// waits for (e.g. oauth_client_not_set).
	Reason string `json:"reason" dynamodbav:"reason"`
	// Until is when the job is next tried (null: when an operator acts,
	// e.g. resumes a paused tier).
	Until *time.Time `json:"until" dynamodbav:"until,omitempty"`
	// Detail is a human explanation (the breaker's key and state, the
	// error that caused a backoff, the Retry-After the API sent).
	Detail string `json:"detail,omitempty" dynamodbav:"detail,omitempty"`
	// Breaker is the key of the open circuit breaker (circuit_open and
	// rate_limited waits), as GET /v1/admin/breakers lists it.
	Breaker string `json:"breaker,omitempty" dynamodbav:"breaker,omitempty"`
}

// SetWait records why the job waits and until when. A nil until means
// "until an operator acts". Detail and breaker may be empty.
func (j *Job) SetWait(reason string, until *time.Time, detail, breaker string) {
	w := &Wait{Reason: reason, Detail: detail, Breaker: breaker}
	if until != nil {
		u := until.UTC()
		w.Until = &u
	}
	j.Wait = w
}
