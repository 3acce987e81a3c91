package job

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/conveyor/conveyor/internal/invalid"
)

// Spec is what a submission asks of a kind: its items and its params, as
// the user sent them (Normalize) or as the kind normalised them (the
// canonical form that is hashed and stored).
type Spec struct {
	// Items name the job's inputs (for publish: confirmed uploads).
	Items []SpecItem `json:"items"`
	// Params is the kind's own JSON object.
	Params json.RawMessage `json:"params"`
}

// SpecItem is one input a submission names.
type SpecItem struct {
	UploadID string `json:"uploadId"`
}

// ValidationEnv is what validation may depend on.
type ValidationEnv struct {
	// Local is the local environment: plain http and private targets are
	// allowed there only.
	Local bool
	// Resolver checks host names (nil: net.DefaultResolver).
	Resolver Resolver
}

// Resolver looks names up (*net.Resolver and netguard's resolvers satisfy
// it): the outbound URL policy (netguard.For) resolves a URL's host with
// it to judge where the URL leads.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Front is the half of a kind of job that submission needs: what the job's
// "type" is, how a request is normalised (and so hashed), validated and
// turned into a  A Front may also be an Explainer.
type Front interface {
	// Name is the job's "type" in the API ("publish", "http"): lower case,
	// stable, unique in a registry.
	Name() string
	// Normalize returns the canonical form of s: two submissions that mean
	// the same job normalise to the same Spec (and so the same idempotency
	// hash). It reads no clock and does no I/O. Input it cannot read is
	// returned as an *invalid.FieldError.
	Normalize(s Spec) (Spec, error)
	// Validate checks a normalised Spec: shape and limits, and whatever
	// needs the environment (a URL's policy). Errors are *invalid.FieldError (400).
	Validate(ctx context.Context, env ValidationEnv, s Spec) error
	// Prepare fills a new job from a valid Spec, before it is stored: its
	// items (j.Items), anything the kind looks up (I/O allowed, though a
	// check the creating transaction can make costs no request: the uploads
	// items name are checked by their references, an account by
	// j.NeedsAccount, and an Explainer says why it failed). Input that is
	// well-formed but unusable (an upload not confirmed, no connected
	// account) is an *UnusableError (422).
	Prepare(ctx context.Context, owner string, s Spec, j *Job) error
	// Phases are the names of the job's phases, in order.
	Phases() []string
}

// A SecretsFront is a Front whose Spec can hold secrets (an http job's
// header values). What keeps a Spec beyond its job, such as a recurring
// schedule's template, keeps it split: the Spec with every secret value
// redacted, which is stored and shown as it is, and the values, which the
// keeper seals apart (internal/envelope). Both methods are pure: no I/O,
// no clock.
type SecretsFront interface {
	Front
	// SplitSecrets returns s with its secret values redacted and the
	// values as one document only JoinSecrets reads (nil: s holds none).
	SplitSecrets(s Spec) (Spec, []byte, error)
	// JoinSecrets returns s with the values SplitSecrets took put back.
	JoinSecrets(s Spec, secrets []byte) (Spec, error)
}

// Kind is one kind of job: its Front and the Work the run loop calls.
type Kind interface {
	Front
	// Work runs the job's unfinished phases for one attempt, resuming after
	// what earlier attempts recorded (Run.Job, Run.Tried), and ends
	// the job with Succeed when done. An error ends the attempt and is
	// classified by internal/retry: mark it with retry.Permanent,
	// retry.Temporary (optionally with a delay) or retry.Snooze, or return
	// an error that says Temporary()/StatusCode()/RetryAfter(). Wrap it in
	// a *StepError to name the phase (and item) that failed.
	Work(ctx context.Context, a Run) error
}

// Explainer is what a kind whose jobs' creation checks their uploads or
// account in the creating transaction also does: when the store refuses the
// job (UploadUnavailableError, ErrNoAccount), Explain reads what
// the Spec names and returns the *UnusableError the submitter should see,
// or nil when nothing is wrong any more.
type Explainer interface {
	Explain(ctx context.Context, owner string, s Spec) error
}

// Run is one claimed run of a job, as the run loop hands it to Work.
// The loop keeps the lease (heartbeat) and records the failure; the kind
// records its progress through Save.
type Run interface {
	// Job returns a copy of the job as last saved.
	Job() Job
	// Tried reports whether an earlier attempt may have done item i's
	// external call without recording it (ask before repeating).
	Tried(item int) bool
	// Save applies mutate to the job and stores it (a conditional write;
	// on a race with the heartbeat mutate is applied again to the fresh
	// copy). It fails when the job stopped being this attempt's
	// (cancelled, taken over): Work must then return that error.
	Save(ctx context.Context, mutate func(*Job)) error
	// Hold must precede every call with a side effect outside the table
	// (an upload, a publication, an outbound request): it checks, cheaply,
	// that this attempt still holds the job's lease, and that the lease and
	// the invocation's time left both cover need (the call's own deadline),
	// extending the lease when it would lapse first. What the attempt saw
	// of its job shortly before (its claim, heartbeat or last write) is
	// the check, with no request: a call that starts more than the run
	// loop's cancel notice after a cancel or a stop is refused; one that
	// starts sooner may go out, as a call in flight when the cancel landed
	// would, its outcome recorded (docs/leases.md). It returns an error
	// wrapping ErrLostJob when the job stopped being this attempt's
	// (cancelled, stopped, taken over) — the attempt must then make no
	// further call and return that error — and ErrOutOfTime when the
	// invocation ends too soon for the call: the loop hands the job back
	// without spending an attempt.
	Hold(ctx context.Context, need time.Duration) error
	// Record saves facts about the outside world (what a call did for an
	// item) with mutate, as Save does; when that save fails (the job
	// stopped being this attempt's, or the table failed) the facts are
	// still written on the job as it is now, so what happened outside is
	// never dropped. It returns the save's error.
	Record(ctx context.Context, facts, mutate func(*Job)) error
	// Defer applies facts and mutate (either may be nil) to the job as the
	// attempt holds it, without a write: the next Save carries them. Facts
	// are also carried by whatever the loop writes when the attempt ends
	// without a save (a failure, a release), so a fact learnt and not yet
	// saved is not lost.
	Defer(facts, mutate func(*Job))
	// Loaded is what the job's kind read with it (Loader), or nil.
	Loaded() any
	// Crash is a test's crash point: a non-nil return (wrapping ErrCrash)
	// means the run must stop at once, with no further write, as if the
	// process died there; Work returns it.
	Crash(point string) error
	// Logger carries the job id, tier and attempt.
	Logger() *slog.Logger
	// Now is the run loop's clock.
	Now() time.Time
}

// ErrCrash is what Run.Crash returns when a test's crash hook stops
// the run at a point.
var ErrCrash = errors.New("injected crash")

// Delivery is one message for a job, as the queue handed it over.
type Delivery struct {
	// JobID is the job the message names.
	JobID string
	// Receives is the message's ApproximateReceiveCount (0 if unknown).
	Receives int
	// Owner is the job's owner as the message names it (queue.Message's
	// owner; empty in messages sent before it was added).
	Owner string
	// Uploads are the uploads the message names (queue.Message.Uploads):
	// read with the job, they describe its items.
	Uploads []string
	// Waits: the message waits in a group of its own, moved out of its
	// owner's slot (queue.Message.Waits). A job due when such a message
	// comes is not run from it: the message goes back to the slot first.
	Waits bool
	// Preload is what a batch read for this delivery just before its run
	// (BatchLoader, through the run loop's Preload): the run reads nothing
	// more. Nil: the run reads the job itself.
	Preload *Preload
}

// Preload is one delivery's job as a BatchLoader read it, its items
// described, with what the kind reads beside it (Loader's loaded), or why
// it could not be read (Err: the store's ErrNotFound when the job does not
// exist).
type Preload struct {
	Job    Job
	Loaded any
	Err    error
}

// Loader is what a kind whose Work needs a record beside its job also
// does: reads the job a delivery names, its items described, together
// with that record in the same request (the publish kind: the owner's
// connected account). A delivery does not name its job's kind, so the run
// loop reads every delivery through its registry's Loader (the first by
// name); Work finds the record in Run.Loaded when the job is of the
// Loader's kind.
type Loader interface {
	Load(ctx context.Context, d Delivery) (j Job, loaded any, err error)
}

// BatchLoader is a Loader that also reads the jobs of several deliveries,
// and what it reads beside each, in as few requests as it can: the jobs of
// a batch whose runs start side by side, read before they start, so that a
// batch of ten costs one read request instead of ten. It returns one
// Preload per delivery, in order; an error means none was read (each run
// then reads its own).
type BatchLoader interface {
	Loader
	LoadBatch(ctx context.Context, ds []Delivery) ([]Preload, error)
}

// ErrLostJob is what Hold and Save return once the job stopped being the
// attempt's: Work returns it (wrapped or not) and makes no further call.
var ErrLostJob = errors.New("the job stopped being this attempt's (cancelled, stopped or taken over)")

// ErrOutOfTime is what Hold returns when the invocation's deadline, less
// the loop's margin, comes before the call could end: Work returns it and
// the loop hands the job back without spending an attempt.
var ErrOutOfTime = errors.New("not enough time left in this invocation")

// Budgeter is what a kind may also say: how long the next call of a job's
// run may take at most (its deadline). The run loop does not claim a job
// whose next call cannot end before the invocation does; it hands the
// delivery back without spending an attempt. A kind that is not a
// Budgeter is started whatever the time left.
type Budgeter interface {
	NextCall(j Job) time.Duration
}

// Reconciler is what a kind whose calls may have an unknown outcome also
// does: asks the outside world what became of a job's items a run marked
// tried, and records it on them, whatever the job's status. The run loop
// calls it for a finished job whose last run may have been cut mid-call.
type Reconciler interface {
	Reconcile(ctx context.Context, j Job) error
}

// UnusableError is well-formed input that cannot be used (422).
type UnusableError = invalid.UnusableError

// StepError says which phase (and item, or -1) an attempt failed in; the
// run loop marks them failed or pending again.
type StepError struct {
	Phase string
	Item  int
	Err   error
}

// Step wraps err as failing phase (item -1 for the whole job). Step(…, nil)
// is nil.
func Step(phase string, item int, err error) error {
	if err == nil {
		return nil
	}
	return &StepError{Phase: phase, Item: item, Err: err}
}

func (e *StepError) Error() string { return e.Err.Error() }

// Unwrap makes the cause visible to errors.Is/As (and to internal/retry).
func (e *StepError) Unwrap() error { return e.Err }

// Registry is the set of kinds a run loop knows (Work included). The zero
// value is empty; it is safe for concurrent use.
type Registry struct{ set set[Kind] }

// NewRegistry returns a registry holding kinds.
func NewRegistry(kinds ...Kind) *Registry {
	r := &Registry{}
	for _, k := range kinds {
		r.MustRegister(k)
	}
	return r
}

// ErrDuplicateKind is returned when a kind's name is already taken.
var ErrDuplicateKind = errors.New("kind already registered")

// Register adds k; a second kind with the same name is refused.
func (r *Registry) Register(k Kind) error { return r.set.register(k) }

// MustRegister is Register for wiring code, where a duplicate is a bug.
func (r *Registry) MustRegister(k Kind) { must(r.Register(k)) }

// Get returns the kind named name.
func (r *Registry) Get(name string) (Kind, bool) {
	if r == nil {
		return nil, false
	}
	return r.set.get(name)
}

// Names lists the registered kinds, sorted.
func (r *Registry) Names() []string {
	if r == nil {
		return nil
	}
	return r.set.names()
}

// Fronts returns a new Fronts registry holding the front halves of r's
// kinds (the kinds themselves, seen as Fronts: an Explainer stays one).
func (r *Registry) Fronts() *Fronts {
	f := &Fronts{}
	for _, n := range r.Names() {
		k, _ := r.Get(n)
		f.MustRegister(k)
	}
	return f
}

// Fronts is the set of kinds submission knows: their front halves only.
// The zero value is empty; it is safe for concurrent use.
type Fronts struct{ set set[Front] }

// NewFronts returns a registry holding fronts.
func NewFronts(fronts ...Front) *Fronts {
	r := &Fronts{}
	for _, f := range fronts {
		r.MustRegister(f)
	}
	return r
}

// Register adds f; a second front with the same name is refused.
func (r *Fronts) Register(f Front) error { return r.set.register(f) }

// MustRegister is Register for wiring code, where a duplicate is a bug.
func (r *Fronts) MustRegister(f Front) { must(r.Register(f)) }

// Get returns the front named name.
func (r *Fronts) Get(name string) (Front, bool) {
	if r == nil {
		return nil, false
	}
	return r.set.get(name)
}

// Names lists the registered fronts, sorted.
func (r *Fronts) Names() []string {
	if r == nil {
		return nil
	}
	return r.set.names()
}

func must(err error) {
	if err != nil {
		panic(err)
	}
}

// set is a registry's content: K by name.
type set[K Front] struct {
	mu    sync.RWMutex
	kinds map[string]K
}

func (s *set[K]) register(k K) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.kinds == nil {
		s.kinds = map[string]K{}
	}
	if _, ok := s.kinds[k.Name()]; ok {
		return fmt.Errorf("%w: %q", ErrDuplicateKind, k.Name())
	}
	s.kinds[k.Name()] = k
	return nil
}

func (s *set[K]) get(name string) (K, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	k, ok := s.kinds[name]
	return k, ok
}

func (s *set[K]) names() []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	names := make([]string, 0, len(s.kinds))
	for n := range s.kinds {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}
