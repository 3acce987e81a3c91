package accounts_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"

	"github.com/conveyor/conveyor/internal/accounts"
	"github.com/conveyor/conveyor/internal/aws/sealer"
	"github.com/conveyor/conveyor/internal/aws/store"
	"github.com/conveyor/conveyor/internal/deviantart"
	"github.com/conveyor/conveyor/internal/envelope"
	"github.com/conveyor/conveyor/localstack/awstest"
	"github.com/conveyor/conveyor/localstack/simulator"
)

type testBundle struct {
	store   *store.Store
	sealer  *sealer.Sealer
	sim     *simulator.Server
	api     *deviantart.Client
	kmsFail *atomic.Int32 // KMS calls still to fail
}

// failKMS makes the next n.Load() KMS calls fail with a throttling error,
// before they leave the SDK: the emulator's KMS stands in for AWS, the
// middleware for an outage.
func failKMS(n *atomic.Int32) func(*middleware.Stack) error {
	return func(st *middleware.Stack) error {
		return st.Initialize.Add(middleware.InitializeMiddlewareFunc("injectKMSFailure",
			func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
				if n.Add(-1) >= 0 {
					return middleware.InitializeOutput{}, middleware.Metadata{}, &smithy.GenericAPIError{Code: "ThrottlingException", Message: "injected"}
				}
				n.Store(0)
				return next.HandleInitialize(ctx, in)
			}), middleware.Before)
	}
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	env := awstest.Provision(t)
	b := &testBundle{kmsFail: &atomic.Int32{}}
	kc := kms.NewFromConfig(env.Config, func(o *kms.Options) { o.APIOptions = append(o.APIOptions, failKMS(b.kmsFail)) })
	b.store = store.New(env.Clients.DynamoDB, env.Res.Definition.Table.Name, nil)
	b.sealer = sealer.New(kc, env.Res.KMSKeyID)
	sim, url, stop, err := simulator.Start("127.0.0.1:0", simulator.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	b.sim = sim
	b.api = mustClient(t, deviantart.Config{BaseURL: url, ClientID: simulator.ClientIDDefault, ClientSecret: simulator.ClientSecretDefault, CallTimeout: 20 * time.Second, UploadRateMin: 1 << 20})
	return b
}

func (b *testBundle) service(r accounts.Refresher) *accounts.Service {
	if r == nil {
		r = b.api
	}
	return accounts.New(accounts.Config{Store: b.store, Sealer: b.sealer, Refresher: r, PersistBackoff: time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
}

// hook is a Refresher that calls the real API and then runs after: the
// moment between a successful refresh (the old refresh token is dead) and
// the store of its successor.
type hook struct {
	api   *deviantart.Client
	after func(deviantart.Token)
}

func (h hook) Refresh(ctx context.Context, rt string) (deviantart.Token, error) {
	tok, err := h.api.Refresh(ctx, rt)
	if err == nil {
		h.after(tok)
	}
	return tok, err
}

// storedRefresh opens the refresh token stored for owner.
func (b *testBundle) storedRefresh(t *testing.T, owner string) (string, accounts.Account) {
	t.Helper()
	a, err := b.store.GetAccount(context.Background(), owner, accounts.Provider)
	if err != nil {
		t.Fatal(err)
	}
	rt, err := b.sealer.Open(context.Background(), a.Refresh, map[string]string{"user": owner, "provider": accounts.Provider, "token": "refresh", envelope.ContextPurpose: envelope.PurposeAccountToken})
	if err != nil {
		t.Fatal(err)
	}
	return string(rt), a
}

func (b *testBundle) connect(t *testing.T, svc *accounts.Service, owner string) {
	t.Helper()
	if err := svc.Connect(context.Background(), owner, accounts.ConnectRequest{Provider: accounts.Provider, RefreshToken: b.sim.MintRefreshToken()}); err != nil {
		t.Fatal(err)
	}
}

// TestRotatedTokenSurvivesKMSFailureAndCancellation: right after the API
// rotated the refresh token, KMS fails three times and the caller's context
// is cancelled; the new refresh token is stored anyway, and it works.
func TestRotatedTokenSurvivesKMSFailureAndCancellation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var got deviantart.Token
	svc := b.service(hook{api: b.api, after: func(tok deviantart.Token) {
		got = tok
		b.kmsFail.Store(3)
		cancel()
	}})
	b.connect(t, svc, "u-kms")
	_, before := b.storedRefresh(t, "u-kms")
	access, err := svc.AccessToken(ctx, "u-kms")
	if err != nil {
		t.Fatalf("AccessToken: %v", err)
	}
	if access != got.AccessToken {
		t.Errorf("AccessToken returned another token than the refresh gave")
	}
	rt, after := b.storedRefresh(t, "u-kms")
	if rt != got.RefreshToken {
		t.Fatalf("the stored refresh token is not the rotated one")
	}
	if after.Version != before.Version+1 || after.LeaseOwner != "" {
		t.Errorf("version %d → %d, lease %q; want +1 and released", before.Version, after.Version, after.LeaseOwner)
	}
	if _, err := b.api.Refresh(context.Background(), rt); err != nil {
		t.Errorf("the stored refresh token does not work: %v", err)
	}
}

// TestRotatedTokenIsStoredAfterTheLeaseWasLost: the refresher's lease is
// taken by another instance while it refreshes (a slow call outlived it);
// the rotated token, the only valid one, is stored all the same, because
// the account still holds the token that was spent.
func TestRotatedTokenIsStoredAfterTheLeaseWasLost(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var got deviantart.Token
	svc := b.service(hook{api: b.api, after: func(tok deviantart.Token) {
		got = tok
		far := time.Now().Add(time.Hour)
		if err := b.store.LeaseAccount(context.Background(), "u-lease", accounts.Provider, "thief", far, far.Add(time.Minute)); err != nil {
			t.Errorf("stealing the lease: %v", err)
		}
	}})
	b.connect(t, svc, "u-lease")
	if _, err := svc.AccessToken(context.Background(), "u-lease"); err != nil {
		t.Fatalf("AccessToken: %v", err)
	}
	if rt, _ := b.storedRefresh(t, "u-lease"); rt != got.RefreshToken {
		t.Fatalf("the rotated refresh token was lost with the lease")
	}
}

// TestReconnectInvalidatesAnotherInstancesCache: the publisher's instance
// cached the first connection's token; the user reconnects through the API
// function's instance; the publisher's next AccessToken uses the new
// connection.
func TestReconnectInvalidatesAnotherInstancesCache(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	api, pub := b.service(nil), b.service(nil)
	b.connect(t, api, "u-re")
	first, err := pub.AccessToken(ctx, "u-re")
	if err != nil {
		t.Fatal(err)
	}
	second := b.sim.MintRefreshToken()
	if err := api.Connect(ctx, "u-re", accounts.ConnectRequest{Provider: accounts.Provider, RefreshToken: second}); err != nil {
		t.Fatal(err)
	}
	tok, err := pub.AccessToken(ctx, "u-re")
	if err != nil {
		t.Fatal(err)
	}
	if tok == first {
		t.Fatal("the publisher kept the old connection's access token after a reconnect")
	}
	if acct := b.sim.AccountOf(tok); acct != b.sim.AccountOf(second) {
		t.Errorf("the token belongs to account %q, want the new connection's %q", acct, b.sim.AccountOf(second))
	}
}

// TestForceRefreshReplacesARejectedToken: a token the API refused is
// replaced by one refresh; a second instance asking with the same rejected
// token gets the replacement without another refresh.
func TestForceRefreshReplacesARejectedToken(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	one, two := b.service(nil), b.service(nil)
	exp := time.Now().Add(time.Hour)
	if err := one.Connect(ctx, "u-401", accounts.ConnectRequest{Provider: accounts.Provider, RefreshToken: b.sim.MintRefreshToken(),
		AccessToken: "revoked", ExpiresAt: &exp}); err != nil {
		t.Fatal(err)
	}
	if tok, err := one.AccessToken(ctx, "u-401"); err != nil || tok != "revoked" {
		t.Fatalf("AccessToken = %q, %v; want the connected one", tok, err)
	}
	fresh, err := one.ForceRefresh(ctx, "u-401", "revoked")
	if err != nil || fresh == "revoked" {
		t.Fatalf("ForceRefresh = %q, %v", fresh, err)
	}
	again, err := two.ForceRefresh(ctx, "u-401", "revoked")
	if err != nil || again != fresh {
		t.Errorf("the second instance got %q, %v; want the first's replacement", again, err)
	}
	if n := b.sim.Stats().Refreshes; n != 1 {
		t.Errorf("refreshes = %d, want 1", n)
	}
}

// TestConnectionShowsTheStateNeverAToken: a user reads their
// connection — provider, since when, until when its access token works —
// and no token; none connected is store.ErrNotFound.
func TestConnectionShowsTheStateNeverAToken(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	svc := b.service(nil)
	if _, err := svc.Connection(ctx, "u-none"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("no connection: %v, want store.ErrNotFound", err)
	}
	rt := b.sim.MintRefreshToken()
	if err := svc.Connect(ctx, "u-conn", accounts.ConnectRequest{Provider: accounts.Provider, RefreshToken: rt}); err != nil {
		t.Fatal(err)
	}
	c, err := svc.Connection(ctx, "u-conn")
	if err != nil || c.Provider != accounts.Provider || !c.Connected || c.ExpiresAt != nil || c.ConnectedAt.IsZero() {
		t.Fatalf("before a refresh: %+v, %v", c, err)
	}
	tok, err := svc.AccessToken(ctx, "u-conn") // refreshes: an access token is now held
	if err != nil {
		t.Fatal(err)
	}
	c, err = svc.Connection(ctx, "u-conn")
	if err != nil || c.ExpiresAt == nil || !c.ExpiresAt.After(time.Now()) || c.UpdatedAt.Before(c.ConnectedAt) {
		t.Fatalf("after a refresh: %+v, %v", c, err)
	}
	raw, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), tok) || strings.Contains(string(raw), rt) || strings.Contains(strings.ToLower(string(raw)), "token") {
		t.Errorf("the connection shows a token: %s", raw)
	}
}

func mustClient(t testing.TB, cfg deviantart.Config) *deviantart.Client {
	t.Helper()
	c, err := deviantart.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
