// Package accounts connects users' external accounts and hands out valid
// access tokens for them. Tokens are sealed with KMS envelope encryption
// before they reach the table and are never returned or logged. Refreshing
// an expired token is serialised per account across all instances with a
// conditional lease, because the external API rotates refresh tokens: two
// concurrent refreshes would invalidate each other.
package accounts

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/conveyor/conveyor/internal/deviantart"
	"github.com/conveyor/conveyor/internal/envelope"
	"github.com/conveyor/conveyor/internal/fault"
	"github.com/conveyor/conveyor/internal/ids"
	"github.com/conveyor/conveyor/internal/invalid"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/retry"
)

// Provider is the one external provider.
const Provider = "deviantart"

// Defaults.
const (
	// ExpiryMarginDefault: a token expiring sooner than this is refreshed.
	ExpiryMarginDefault = time.Minute
	// RefreshLeaseDefault bounds one refresh; a crashed refresher's lease
	// expires after it.
	RefreshLeaseDefault = 30 * time.Second
	// WaitPollDefault is how often a waiter re-reads while another refreshes.
	WaitPollDefault = 100 * time.Millisecond
	// PersistTimeoutDefault bounds how long a refresher keeps trying to
	// store a rotated token pair (KMS and DynamoDB retries), whatever the
	// caller's context says: the old refresh token is dead by then, the new
	// one must not be lost to a cancelled request.
	PersistTimeoutDefault = 20 * time.Second
	// PersistBackoffDefault is the first wait between two attempts to store
	// a rotated token pair; it doubles up to a second.
	PersistBackoffDefault = 50 * time.Millisecond
)

// ErrNotConnected means the user has no connected account.
var ErrNotConnected = errors.New("no connected account")

// Job error codes of the failures AccessToken reports, each telling who
// must act. The errors carry them through a JobErrorCode() string method.
const (
	// CodeNotConnected: the user has not connected an account.
	CodeNotConnected = "account_not_connected"
	// CodeReconnect: the API refused the user's refresh token (used,
	// revoked, expired); the user must connect the account again.
	CodeReconnect = "account_reconnect_required"
	// CodeClientRejected: the API refused Conveyor's own OAuth client
	// credentials; an operator must fix the configuration
	// (CONVEYOR_DEVIANTART_CLIENT_ID / _SECRET, in AWS the environment's
	// OAuth client secret). The user's connection is not at fault.
	CodeClientRejected = "oauth_client_rejected"
)

// codedError is a failure with the job error code it is reported under.
type codedError struct {
	code string
	err  error
}

func (e *codedError) Error() string { return e.err.Error() }
func (e *codedError) Unwrap() error { return e.err }

// JobErrorCode is the code a job that failed with this error reports.
func (e *codedError) JobErrorCode() string { return e.code }

// Refresher exchanges a refresh token for new tokens (deviantart.Client).
type Refresher interface {
	Refresh(ctx context.Context, refreshToken string) (deviantart.Token, error)
}

// Sealer encrypts and opens the tokens (sealer.Sealer, KMS envelope
// encryption): declared here so that this package, and every function that
// serves its routes, links no KMS client.
type Sealer interface {
	Seal(ctx context.Context, plaintext []byte, aad map[string]string) (envelope.Envelope, error)
	Open(ctx context.Context, e envelope.Envelope, aad map[string]string) ([]byte, error)
}

// Account is a user's connected external account. Its tokens are stored
// only as KMS envelopes; the plaintext never reaches the table. The
// dynamodbav tags are the store's attribute names.
type Account struct {
	Owner    string `dynamodbav:"accountOwner"`
	Provider string `dynamodbav:"provider"`
	// Refresh is the sealed refresh token.
	Refresh envelope.Envelope `dynamodbav:"refresh"`
	// Access is the sealed access token, when one is known.
	Access *envelope.Envelope `dynamodbav:"access,omitempty"`
	// AccessExpiresAt is when Access stops working.
	AccessExpiresAt *time.Time `dynamodbav:"accessExpiresAt,omitempty"`
	// Version increases with every token change.
	Version int64 `dynamodbav:"version"`
	// LeaseOwner / LeaseUntil serialise refreshes of this account.
	// LeaseUntilMs is epoch milliseconds (a number, so conditions compare
	// it correctly).
	LeaseOwner   string    `dynamodbav:"leaseOwner,omitempty"`
	LeaseUntilMs int64     `dynamodbav:"leaseUntilMs,omitempty"`
	ConnectedAt  time.Time `dynamodbav:"connectedAt"`
	UpdatedAt    time.Time `dynamodbav:"updatedAt"`
}

// Store keeps the accounts (store.Store, on DynamoDB): declared here so
// that this package links no DynamoDB client.
type Store interface {
	// GetAccount returns owner's account for provider, or fault.ErrNotFound.
	GetAccount(ctx context.Context, owner, provider string) (Account, error)
	// PutAccount stores a (re)connected account, replacing any earlier one.
	PutAccount(ctx context.Context, a Account) error
	// LeaseAccount takes the refresh lease of an account for worker until
	// until, if nobody holds an unexpired one (fault.ErrConflict when
	// another worker holds it).
	LeaseAccount(ctx context.Context, owner, provider, worker string, now, until time.Time) error
	// SaveRotated stores a's rotated tokens and releases any refresh lease,
	// if the stored account still holds version spentVersion of the
	// connection made at connectedAt (fault.ErrConflict otherwise).
	SaveRotated(ctx context.Context, a Account, spentVersion int64, connectedAt time.Time) error
	// ReleaseAccount gives up worker's refresh lease.
	ReleaseAccount(ctx context.Context, owner, provider, worker string) error
}

// Config configures a Service.
type Config struct {
	Store     Store
	Sealer    Sealer
	Refresher Refresher
	// Ready, when set, says whether a refresh can be made now (the OAuth
	// client's credentials are there); its error is returned before any
	// lease is taken or token opened, so a refresh that cannot happen
	// costs nothing but the account's read.
	Ready func(ctx context.Context) error
	// Worker names this instance in refresh leases.
	Worker string
	// Now defaults to time.Now.
	Now func() time.Time
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// ExpiryMargin, RefreshLease and WaitPoll default to the constants above.
	ExpiryMargin, RefreshLease, WaitPoll time.Duration
	// PersistTimeout and PersistBackoff bound and space the attempts to
	// store a rotated token pair (defaults PersistTimeoutDefault,
	// PersistBackoffDefault).
	PersistTimeout, PersistBackoff time.Duration
}

// Service connects accounts and provides access tokens.
type Service struct {
	cfg   Config
	mu    sync.Mutex
	cache map[string]cached // owner → decrypted access token, per warm instance
}

// cached is a decrypted access token, valid only for the connection and
// token version it came from: a reconnect (another connectedAt) or a
// refresh by another instance (another version) makes it stale even on an
// instance that never saw the change.
type cached struct {
	token       string
	expires     time.Time
	connectedAt time.Time
	version     int64
}

// New returns a Service.
func New(cfg Config) *Service {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.ExpiryMargin == 0 {
		cfg.ExpiryMargin = ExpiryMarginDefault
	}
	if cfg.RefreshLease == 0 {
		cfg.RefreshLease = RefreshLeaseDefault
	}
	if cfg.WaitPoll == 0 {
		cfg.WaitPoll = WaitPollDefault
	}
	if cfg.PersistTimeout == 0 {
		cfg.PersistTimeout = PersistTimeoutDefault
	}
	if cfg.PersistBackoff == 0 {
		cfg.PersistBackoff = PersistBackoffDefault
	}
	if cfg.Worker == "" {
		cfg.Worker = fmt.Sprintf("acct-%d", time.Now().UnixNano())
	}
	return &Service{cfg: cfg, cache: map[string]cached{}}
}

// ConnectRequest is the body of PUT /v1/account/connection.
type ConnectRequest struct {
	Provider     string     `json:"provider"`
	RefreshToken string     `json:"refreshToken"`
	AccessToken  string     `json:"accessToken"`
	ExpiresAt    *time.Time `json:"expiresAt"`
}

func aad(owner, kind string) map[string]string {
	return map[string]string{"user": owner, "provider": Provider, "token": kind, envelope.ContextPurpose: envelope.PurposeAccountToken}
}

// Connect stores owner's tokens, sealed, replacing an earlier connection.
func (s *Service) Connect(ctx context.Context, owner string, req ConnectRequest) error {
	switch {
	case req.Provider != Provider:
		return invalid.Field("provider", `must be "deviantart"`)
	case req.RefreshToken == "":
		return invalid.Field("refreshToken", "is required")
	case len(req.RefreshToken) > 4096 || len(req.AccessToken) > 4096:
		return invalid.Field("refreshToken", "is too long")
	case req.AccessToken != "" && req.ExpiresAt == nil:
		return invalid.Field("expiresAt", "is required with accessToken")
	}
	now := s.cfg.Now().UTC()
	a := Account{Owner: owner, Provider: Provider, ConnectedAt: now, UpdatedAt: now}
	var err error
	if a.Refresh, err = s.cfg.Sealer.Seal(ctx, []byte(req.RefreshToken), aad(owner, "refresh")); err != nil {
		return fmt.Errorf("sealing the refresh token: %w", err)
	}
	if req.AccessToken != "" {
		env, err := s.cfg.Sealer.Seal(ctx, []byte(req.AccessToken), aad(owner, "access"))
		if err != nil {
			return fmt.Errorf("sealing the access token: %w", err)
		}
		exp := req.ExpiresAt.UTC()
		a.Access, a.AccessExpiresAt = &env, &exp
	}
	if err := s.cfg.Store.PutAccount(ctx, a); err != nil {
		return err
	}
	s.forget(owner)
	s.cfg.Logger.InfoContext(ctx, "account connected", "user", owner, "provider", Provider)
	return nil
}

// Connection is a user's connection as the user sees it: which provider,
// since when, and until when the access token held for it works — never a
// token.
type Connection struct {
	Provider string `json:"provider"`
	// Connected is true: a connection that exists is connected (a refresh
	// token the provider refuses shows on the jobs that need it, as
	// account_reconnect_required; reconnecting replaces it).
	Connected bool `json:"connected"`
	// ExpiresAt is when the access token held for the account expires;
	// null when none is held yet. Jobs refresh it as they need it.
	ExpiresAt *time.Time `json:"expiresAt"`
	// ConnectedAt is when the tokens were given (PUT), UpdatedAt when they
	// last changed (a connection or a refresh).
	ConnectedAt time.Time `json:"connectedAt"`
	UpdatedAt   time.Time `json:"updatedAt"`
}

// Connection returns owner's connection, or fault.ErrNotFound when owner
// has connected no account.
func (s *Service) Connection(ctx context.Context, owner string) (Connection, error) {
	a, err := s.cfg.Store.GetAccount(ctx, owner, Provider)
	if err != nil {
		return Connection{}, err
	}
	c := Connection{Provider: a.Provider, Connected: true, ConnectedAt: a.ConnectedAt.UTC(), UpdatedAt: a.UpdatedAt.UTC()}
	if a.AccessExpiresAt != nil {
		exp := a.AccessExpiresAt.UTC()
		c.ExpiresAt = &exp
	}
	return c, nil
}

// Connected reports whether owner has connected an account.
func (s *Service) Connected(ctx context.Context, owner string) (bool, error) {
	_, err := s.cfg.Store.GetAccount(ctx, owner, Provider)
	if errors.Is(err, fault.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

func (s *Service) forget(owner string) {
	s.mu.Lock()
	delete(s.cache, owner)
	s.mu.Unlock()
}

// Invalidate drops the cached token of owner (after the API refused it).
func (s *Service) Invalidate(owner string) { s.forget(owner) }

// AccessToken returns a valid access token for owner's account, refreshing
// it when it expired. Only one instance refreshes an account at a time; the
// others wait for its result.
//
// Each call reads the account (one consistent GetItem): the instance's
// cache saves the KMS decrypt, not the read, so a reconnect made through
// another function is seen at once.
func (s *Service) AccessToken(ctx context.Context, owner string) (string, error) {
	return s.token(ctx, owner, "", nil)
}

// AccessTokenFrom is AccessToken for a caller that has just read the
// account a with a strongly consistent read (a worker reads it with the
// job, in one request): a stands in for the first read, so a token that
// is cached or stored and unexpired costs no request. A reconnect or
// refresh made before that read is seen, exactly as with AccessToken.
func (s *Service) AccessTokenFrom(ctx context.Context, a Account) (string, error) {
	return s.token(ctx, a.Owner, "", &a)
}

// ForceRefresh returns an access token for owner other than rejected, the
// one the API just answered 401 to: the stored one if another instance has
// already replaced it, else a refreshed one. The cache entry is dropped.
func (s *Service) ForceRefresh(ctx context.Context, owner, rejected string) (string, error) {
	s.forget(owner)
	return s.token(ctx, owner, rejected, nil)
}

// token is AccessToken, treating rejected (if not "") as unusable. When
// read is set, it is the account as just read, used instead of the first
// read.
func (s *Service) token(ctx context.Context, owner, rejected string, read *Account) (string, error) {
	deadline := s.cfg.Now().Add(s.cfg.RefreshLease + 5*time.Second)
	for {
		var (
			a   Account
			err error
		)
		if read != nil && read.Provider == Provider {
			a, read = *read, nil
		} else {
			read = nil
			a, err = s.cfg.Store.GetAccount(ctx, owner, Provider)
		}
		if errors.Is(err, fault.ErrNotFound) {
			s.forget(owner)
			return "", retry.Permanent(&codedError{CodeNotConnected, ErrNotConnected})
		}
		if err != nil {
			return "", err
		}
		now := s.cfg.Now()
		if tok, ok := s.cachedFor(a, now); ok && tok != rejected {
			return tok, nil
		}
		if a.Access != nil && a.AccessExpiresAt != nil && a.AccessExpiresAt.After(now.Add(s.cfg.ExpiryMargin)) {
			tok, err := s.cfg.Sealer.Open(ctx, *a.Access, aad(owner, "access"))
			if err != nil {
				return "", fmt.Errorf("opening the access token: %w", err)
			}
			if string(tok) != rejected {
				s.remember(a, string(tok), *a.AccessExpiresAt)
				return string(tok), nil
			}
		}
		if s.cfg.Ready != nil {
			if err := s.cfg.Ready(ctx); err != nil {
				return "", err
			}
		}
		// Each attempt leases under a name of its own: concurrent requests
		// of one instance contend exactly like separate instances.
		holder := s.cfg.Worker + "/" + ids.New("lease")
		switch err := s.cfg.Store.LeaseAccount(ctx, owner, Provider, holder, now, now.Add(s.cfg.RefreshLease)); {
		case err == nil:
			return s.refresh(ctx, a, holder, rejected)
		case !errors.Is(err, fault.ErrConflict):
			return "", err
		}
		// Another instance is refreshing: wait for its result.
		if now.After(deadline) {
			return "", retry.Temporary(errors.New("waiting for another instance to refresh the token"), 0)
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(s.cfg.WaitPoll):
		}
	}
}

// cachedFor returns the cached token of a's owner when it belongs to a's
// connection and token version and has not expired.
func (s *Service) cachedFor(a Account, now time.Time) (string, bool) {
	s.mu.Lock()
	c, ok := s.cache[a.Owner]
	s.mu.Unlock()
	if !ok || !c.connectedAt.Equal(a.ConnectedAt) || c.version != a.Version || !c.expires.After(now.Add(s.cfg.ExpiryMargin)) {
		return "", false
	}
	return c.token, true
}

func (s *Service) remember(a Account, token string, expires time.Time) {
	s.mu.Lock()
	s.cache[a.Owner] = cached{token: token, expires: expires, connectedAt: a.ConnectedAt, version: a.Version}
	s.mu.Unlock()
}

// refresh runs under the account's lease: it exchanges the refresh token,
// seals the rotated pair and stores it, releasing the lease.
func (s *Service) refresh(ctx context.Context, a Account, holder, rejected string) (string, error) {
	owner := a.Owner
	release := func() {
		if err := s.cfg.Store.ReleaseAccount(context.WithoutCancel(ctx), owner, Provider, holder); err != nil {
			s.cfg.Logger.WarnContext(ctx, "releasing the refresh lease failed", "user", owner, "error", err)
		}
	}
	// The lease may have been taken right after another instance stored a
	// fresh token: re-read under the lease before spending the refresh token.
	fresh, err := s.cfg.Store.GetAccount(ctx, owner, Provider)
	if err != nil {
		release()
		return "", err
	}
	if fresh.Version != a.Version || !fresh.ConnectedAt.Equal(a.ConnectedAt) {
		// Refreshed or reconnected since we looked: use that.
		release()
		return s.token(ctx, owner, rejected, nil)
	}
	a = fresh
	rt, err := s.cfg.Sealer.Open(ctx, a.Refresh, aad(owner, "refresh"))
	if err != nil {
		release()
		return "", fmt.Errorf("opening the refresh token: %w", err)
	}
	// The call must end well inside the lease, or another instance could
	// refresh with the same (then rotated-away) refresh token.
	rctx, cancel := context.WithTimeout(ctx, s.cfg.RefreshLease/2)
	tok, err := s.cfg.Refresher.Refresh(rctx, string(rt))
	cancel()
	clear(rt)
	if err != nil {
		release()
		var apiErr *deviantart.APIError
		switch {
		case deviantart.IsClientRejected(err):
			// Not the user's fault and not transient: every refresh of
			// every account fails the same way until the configuration
			// is fixed. The refresh token was not spent.
			s.cfg.Logger.ErrorContext(ctx, "the external API rejected the OAuth client credentials; "+
				"check CONVEYOR_DEVIANTART_CLIENT_ID / CONVEYOR_DEVIANTART_CLIENT_SECRET (in AWS: the environment's OAuth client secret)",
				"user", owner, "error", err)
			return "", retry.Permanent(&codedError{CodeClientRejected, fmt.Errorf(
				"the external API rejected Conveyor's OAuth client credentials (a configuration error an operator must fix; the account is fine): %w", err)})
		case errors.As(err, &apiErr) && !apiErr.Temporary():
			// Our lease may have lapsed while another instance spent the
			// same token and stored its successor: that one is good.
			if cur, err2 := s.cfg.Store.GetAccount(ctx, owner, Provider); err2 == nil &&
				(cur.Version != a.Version || !cur.ConnectedAt.Equal(a.ConnectedAt)) {
				return s.token(ctx, owner, rejected, nil)
			}
			return "", retry.Permanent(&codedError{CodeReconnect, fmt.Errorf("the account must be reconnected: %w", err)})
		}
		return "", err
	}
	// The old refresh token is dead now: the new pair must reach the table
	// whatever happens to the caller's context, KMS or the lease.
	saved, err := s.persist(ctx, a, tok)
	if err != nil {
		release()
		s.cfg.Logger.ErrorContext(ctx, "the rotated refresh token could not be stored; the account may need reconnecting",
			"user", owner, "error", err)
		return "", retry.Temporary(fmt.Errorf("storing refreshed tokens: %w", err), 0)
	}
	s.remember(saved, tok.AccessToken, *saved.AccessExpiresAt)
	s.cfg.Logger.InfoContext(ctx, "access token refreshed", "user", owner)
	return tok.AccessToken, nil
}

// persist seals the rotated pair and stores it in place of spent, the
// account as it was when its refresh token was spent. It runs under a
// context detached from the caller's cancellation (bounded by
// PersistTimeout) and retries KMS and DynamoDB failures with backoff. The
// write is conditional on the account still holding the spent token (same
// version and connection), not on the lease: a lapsed lease does not lose
// the only valid refresh token, and a reconnect made meanwhile wins.
func (s *Service) persist(ctx context.Context, spent Account, tok deviantart.Token) (Account, error) {
	owner := spent.Owner
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.PersistTimeout)
	defer cancel()
	a := spent
	exp := tok.ExpiresAt.UTC()
	a.AccessExpiresAt = &exp
	a.Version = spent.Version + 1
	a.UpdatedAt = s.cfg.Now().UTC()
	var refreshEnv, accessEnv *envelope.Envelope
	wait := s.cfg.PersistBackoff
	for attempt := 1; ; attempt++ {
		err := func() error {
			if refreshEnv == nil {
				env, err := s.cfg.Sealer.Seal(pctx, []byte(tok.RefreshToken), aad(owner, "refresh"))
				if err != nil {
					return fmt.Errorf("sealing the refresh token: %w", err)
				}
				refreshEnv = &env
			}
			if accessEnv == nil {
				env, err := s.cfg.Sealer.Seal(pctx, []byte(tok.AccessToken), aad(owner, "access"))
				if err != nil {
					return fmt.Errorf("sealing the access token: %w", err)
				}
				accessEnv = &env
			}
			a.Refresh, a.Access = *refreshEnv, accessEnv
			return s.cfg.Store.SaveRotated(pctx, a, spent.Version, spent.ConnectedAt)
		}()
		if err == nil {
			return a, nil
		}
		if errors.Is(err, fault.ErrConflict) {
			// Reconnected meanwhile: the user's new grant supersedes ours.
			return Account{}, fmt.Errorf("the account changed while its token was refreshed: %w", err)
		}
		s.cfg.Logger.WarnContext(ctx, "storing the rotated tokens failed; retrying", "user", owner, "attempt", attempt, "error", err)
		select {
		case <-pctx.Done():
			return Account{}, fmt.Errorf("after %d attempts: %w", attempt, err)
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Second)
	}
}

// JobRead is one job the store's GetJobsAndAccounts reads: its id, the owner whose
// account is read with it (none when empty) and the uploads its message
// names.
type JobRead struct {
	ID, Owner string
	Uploads   []string
}

// JobAndAccount is what the store's GetJobsAndAccounts read for one JobRead: the job
// with its items described and its owner's account (nil when the owner has
// none, or the job is not the owner's), or Err (fault.ErrNotFound when the job
// does not exist).
type JobAndAccount struct {
	Job     job.Job
	Account *Account
	Err     error
}
