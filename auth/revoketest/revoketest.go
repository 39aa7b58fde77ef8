// Package revoketest is the one test of every auth.Revocations: the SQLite
// store (auth/robotdb) and the PostgreSQL one (auth/revokepg) join it with
// one call.
package revoketest

import (
	"context"
	"testing"
	"time"

	"github.com/berth-registry/berth/auth"
)

// Run tests the revocations a and b, two handles on one store as two
// replicas hold them: what one revokes, the other refuses, and records whose
// time has passed are dropped.
func Run(t *testing.T, a, b auth.Revocations) {
	ctx := context.Background()
	now := time.Now()
	revoked := func(s auth.Revocations, id string) bool {
		t.Helper()
		ok, err := s.TokenRevoked(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if revoked(a, "jti-1") || revoked(b, "jti-1") {
		t.Fatal("a token never revoked reads as revoked")
	}
	if err := a.RevokeToken(ctx, "jti-1", now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if !revoked(a, "jti-1") || !revoked(b, "jti-1") {
		t.Fatal("a revoked token reads as not revoked on one of the replicas")
	}
	// Revoking again keeps the later time.
	if err := b.RevokeToken(ctx, "jti-1", now.Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := a.RevokeToken(ctx, "jti-old", now.Add(-time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := b.RevokeToken(ctx, "jti-2", now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if !revoked(a, "jti-1") || !revoked(a, "jti-2") {
		t.Error("a revocation was lost")
	}
	if revoked(a, "jti-old") {
		t.Error("a revocation kept past its time is not dropped: the store grows without bound")
	}
}
