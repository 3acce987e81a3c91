package breaker

import (
	"context"

	"github.com/conveyor/conveyor/internal/deviantart"
)

// API is the external API's surface the publisher uses.
type API interface {
	Submit(ctx context.Context, accessToken string, s deviantart.Submission) (int64, error)
	Publish(ctx context.Context, accessToken string, itemID int64) (deviantart.Deviation, error)
	Item(ctx context.Context, accessToken string, itemID int64) (deviantart.StashItem, error)
	FindByStack(ctx context.Context, accessToken, stack string) (deviantart.StashItem, bool, error)
}

// GuardedAPI wraps every call of API in the breakers of its host and of
// the access token it uses: the token's 429 flags the token only, and the
// host's circuit opens only on failures of several owners (OnHostResult;
// the owner is the one breaker.WithOwner names on the call's context, else
// the token).
type GuardedAPI struct {
	API     API
	Breaker *Breaker
	// HostKey is Key("host", <the API's host>).
	HostKey string
}

// Submit is API.Submit behind the breakers.
func (g GuardedAPI) Submit(ctx context.Context, tok string, s deviantart.Submission) (id int64, err error) {
	err = g.Breaker.Do(ctx, func(ctx context.Context) error {
		var e error
		id, e = g.API.Submit(ctx, tok, s)
		return e
	}, TokenKey(tok), g.HostKey)
	return id, err
}

// Publish is API.Publish behind the breakers.
func (g GuardedAPI) Publish(ctx context.Context, tok string, itemID int64) (d deviantart.Deviation, err error) {
	err = g.Breaker.Do(ctx, func(ctx context.Context) error {
		var e error
		d, e = g.API.Publish(ctx, tok, itemID)
		return e
	}, TokenKey(tok), g.HostKey)
	return d, err
}

// Item is API.Item behind the breakers.
func (g GuardedAPI) Item(ctx context.Context, tok string, itemID int64) (it deviantart.StashItem, err error) {
	err = g.Breaker.Do(ctx, func(ctx context.Context) error {
		var e error
		it, e = g.API.Item(ctx, tok, itemID)
		return e
	}, TokenKey(tok), g.HostKey)
	return it, err
}

// FindByStack is API.FindByStack behind the breakers.
func (g GuardedAPI) FindByStack(ctx context.Context, tok, stack string) (it deviantart.StashItem, found bool, err error) {
	err = g.Breaker.Do(ctx, func(ctx context.Context) error {
		var e error
		it, found, e = g.API.FindByStack(ctx, tok, stack)
		return e
	}, TokenKey(tok), g.HostKey)
	return it, found, err
}

// Refresher exchanges refresh tokens.
type Refresher interface {
	Refresh(ctx context.Context, refreshToken string) (deviantart.Token, error)
}

// GuardedRefresher wraps token refreshes in the breakers of the host and
// of the refresh token: a refresh's 429 flags that refresh token only, and
// its failures count for the host as its owner's (WithOwner), else that
// token's, once per window.
type GuardedRefresher struct {
	Refresher Refresher
	Breaker   *Breaker
	HostKey   string
}

// Refresh is Refresher.Refresh behind the breakers.
func (g GuardedRefresher) Refresh(ctx context.Context, rt string) (t deviantart.Token, err error) {
	err = g.Breaker.Do(ctx, func(ctx context.Context) error {
		var e error
		t, e = g.Refresher.Refresh(ctx, rt)
		return e
	}, TokenKey(rt), g.HostKey)
	return t, err
}
