package auth

import (
	"context"
	"fmt"
	"time"
)

// Revocations keep the IDs (jti) of the tokens berth issued that were
// revoked before they expired: UI sessions signed out and refresh tokens
// given back. Every replica must read the same ones, so they live in an
// IdentityStore, never in a process's memory. Implementations are
// safe for concurrent use.
type Revocations interface {
	// RevokeToken records that the token id is revoked. The record may be
	// dropped after until, when the token is refused as expired anyway.
	RevokeToken(ctx context.Context, id string, until time.Time) error
	// TokenRevoked reports whether the token id was revoked.
	TokenRevoked(ctx context.Context, id string) (bool, error)
}

// revoke records that the token of c is revoked, until its expiry (and the
// leeway it is accepted within) has passed.
func (a *Authn) revoke(ctx context.Context, c *tokenClaims) error {
	if a.revocations == nil {
		return nil
	}
	if err := a.revocations.RevokeToken(ctx, c.ID, c.Expiry.Time().Add(tokenLeeway)); err != nil {
		return fmt.Errorf("auth: revoke a %s token: %w", c.Use, err)
	}
	return nil
}

// checkRevoked returns an error wrapping ErrBadCredentials when the token of
// c was revoked, and the store's error when it cannot be read.
func (a *Authn) checkRevoked(ctx context.Context, c *tokenClaims) error {
	if a.revocations == nil {
		return nil
	}
	revoked, err := a.revocations.TokenRevoked(ctx, c.ID)
	if err != nil {
		return fmt.Errorf("auth: read the revocations of %s tokens: %w", c.Use, err)
	}
	if revoked {
		return fmt.Errorf("%w: the %s token was revoked", ErrBadCredentials, c.Use)
	}
	return nil
}

// IdentityStore keeps the identity state every replica must share: robot
// accounts and revocations. auth/robotdb keeps it in a SQLite file for one
// process, auth/authpg in the catalog's PostgreSQL for replicas.
type IdentityStore interface {
	RobotStore
	Revocations
}
