// Package storetest is the one test of every auth.IdentityStore: the SQLite
// store (auth/robotdb) and the PostgreSQL one (auth/authpg) join it with one
// call, on two handles of one store as two replicas hold them.
package storetest

import (
	"context"
	"crypto/sha256"
	"errors"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/berth-registry/berth/auth"
	"github.com/berth-registry/berth/config"
)

// Run tests a and b, two handles on one store: its robots, its revocations,
// and that what one replica creates or revokes the other honours or refuses
// at its next request.
func Run(t *testing.T, a, b auth.IdentityStore) {
	t.Run("Robots", func(t *testing.T) { Robots(t, a, b) })
	t.Run("Revocations", func(t *testing.T) { Revocations(t, a, b) })
	t.Run("Replicas", func(t *testing.T) { Replicas(t, a, b) })
}

// t0 has microseconds, the precision every store keeps.
var t0 = time.Date(2030, 1, 2, 3, 4, 5, 6000, time.UTC)

func robot(ns, name string) *auth.Robot {
	sum := sha256.Sum256([]byte("berth_secret-of-" + ns + name))
	return &auth.Robot{
		Namespace: ns, Name: name, Description: "CI of " + ns,
		Scopes:    []auth.RobotScope{{Repositories: []string{ns + "/*"}, Actions: []auth.Action{auth.Pull, auth.Push}}},
		CreatedBy: "user:alice", CreatedAt: t0, ExpiresAt: t0.Add(24 * time.Hour), SecretHash: sum[:],
	}
}

// Robots tests the robots of a and b, which must hold none of namespaces a,
// b and zz: what one writes, the other reads.
func Robots(t *testing.T, a, b auth.RobotStore) {
	ctx := context.Background()
	for _, r := range []*auth.Robot{robot("b", "ci"), robot("a", "deploy"), robot("a", "ci"), robot("a", "c-i")} {
		if err := a.Create(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Create(ctx, robot("a", "ci")); !errors.Is(err, auth.ErrRobotExists) {
		t.Errorf("duplicate through the other handle: %v, want ErrRobotExists", err)
	}
	bad := robot("a", "nohash")
	bad.SecretHash = []byte("secret")
	if err := a.Create(ctx, bad); err == nil {
		t.Error("a robot with a secret rather than its hash was stored")
	}
	got, err := b.Get(ctx, "a", "ci")
	if err != nil || !reflect.DeepEqual(got, robot("a", "ci")) {
		t.Errorf("Get = %+v, %v; want %+v", got, err, robot("a", "ci"))
	}
	if _, err := b.Get(ctx, "a", "nobody"); !errors.Is(err, auth.ErrRobotNotFound) {
		t.Errorf("Get of none: %v", err)
	}
	if err := a.Revoke(ctx, "a", "ci", t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := b.Revoke(ctx, "a", "ci", t0.Add(2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := b.Create(ctx, robot("a", "ci")); !errors.Is(err, auth.ErrRobotExists) {
		t.Errorf("the name of a revoked robot was taken again: %v", err)
	}
	for _, at := range []time.Duration{3 * time.Hour, time.Hour} {
		if err := a.Touch(ctx, "a", "deploy", t0.Add(at)); err != nil {
			t.Fatal(err)
		}
	}
	for _, err := range []error{a.Revoke(ctx, "a", "nobody", t0), b.Touch(ctx, "a", "nobody", t0)} {
		if !errors.Is(err, auth.ErrRobotNotFound) {
			t.Errorf("Revoke or Touch of none: %v", err)
		}
	}
	all, err := b.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range all {
		names = append(names, r.Username())
	}
	if want := []string{"robot+a+c-i", "robot+a+ci", "robot+a+deploy", "robot+b+ci"}; !reflect.DeepEqual(names, want) {
		t.Fatalf("List = %v, want %v", names, want)
	}
	if !all[1].RevokedAt.Equal(t0.Add(time.Hour)) || !all[2].LastUsed.Equal(t0.Add(3*time.Hour)) || !all[3].RevokedAt.IsZero() || !all[3].LastUsed.IsZero() {
		t.Errorf("revoked %v, last used %v, then %v %v", all[1].RevokedAt, all[2].LastUsed, all[3].RevokedAt, all[3].LastUsed)
	}
	if err := all[1].Active(t0.Add(2 * time.Hour)); !errors.Is(err, auth.ErrRobotInactive) {
		t.Errorf("revoked robot active: %v", err)
	}
	if ns, err := a.List(ctx, "a"); err != nil || len(ns) != 3 {
		t.Errorf("List(a) = %d robots, %v; want 3", len(ns), err)
	}
	if none, err := a.List(ctx, "zz"); err != nil || none == nil || len(none) != 0 {
		t.Errorf("List(zz) = %v, %v; want an empty list", none, err)
	}
}

// Revocations tests the revocations a and b: what one revokes, the other
// refuses, and records whose time has passed are dropped.
func Revocations(t *testing.T, a, b auth.Revocations) {
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

// Replicas runs two Authn with one key file, replica A on store a and B on
// b: a robot created through A logs in through B at once, a token A minted
// for it is honoured by B, and once A revokes the robot, B refuses its
// secret and its token at the next request. a and b must hold no robot of
// namespace rep.
func Replicas(t *testing.T, a, b auth.IdentityStore) {
	ctx := context.Background()
	cfg := &config.Auth{
		Service: "berth", TokenTTL: 5 * time.Minute, KeyFile: filepath.Join(t.TempDir(), "token-key.pem"),
		Robots: config.Robots{MaxExpiry: time.Hour}, Login: config.Login{MaxFailures: 5, Window: time.Minute},
	}
	policy, err := auth.NewPolicy(cfg)
	if err != nil {
		t.Fatal(err)
	}
	replica := func(s auth.IdentityStore) *auth.Authn {
		t.Helper()
		authn, err := auth.NewAuthn(cfg, auth.AuthnOptions{Policy: policy, Robots: s, Revocations: s})
		if err != nil {
			t.Fatal(err)
		}
		return authn
	}
	ra, rb := replica(a), replica(b)
	secret := "berth_replicated-secret"
	sum := sha256.Sum256([]byte(secret))
	now := time.Now()
	r := &auth.Robot{Namespace: "rep", Name: "ci", Scopes: []auth.RobotScope{{Repositories: []string{"rep/*"}, Actions: []auth.Action{auth.Pull}}},
		CreatedBy: "user:alice", CreatedAt: now, ExpiresAt: now.Add(time.Hour), SecretHash: sum[:]}
	login := func(authn *auth.Authn) (auth.Identity, error) {
		req := httptest.NewRequest("GET", "/v2/", nil)
		req.SetBasicAuth(r.Username(), secret)
		return authn.Authenticate(req)
	}
	bearer := func(authn *auth.Authn, token string) (auth.Identity, error) {
		req := httptest.NewRequest("GET", "/v2/", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		return authn.Authenticate(req)
	}
	if _, err := login(rb); !errors.Is(err, auth.ErrBadCredentials) {
		t.Fatalf("B: a robot not yet created logs in: %v", err)
	}
	if err := a.Create(ctx, r); err != nil {
		t.Fatal(err)
	}
	id, err := login(rb)
	if err != nil || id.Subject != r.Subject() {
		t.Fatalf("B: the robot A created: %+v, %v; want it logged in", id, err)
	}
	token, _, err := ra.Issue(id, []auth.Grant{{Type: "repository", Name: "rep/app", Actions: []string{"pull"}}})
	if err != nil {
		t.Fatal(err)
	}
	if id, err := bearer(rb, token); err != nil || id.Subject != r.Subject() {
		t.Fatalf("B: A's token of the robot: %+v, %v", id, err)
	}
	if err := a.Revoke(ctx, r.Namespace, r.Name, time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := login(rb); !errors.Is(err, auth.ErrRobotInactive) {
		t.Errorf("B: the robot A revoked logs in: %v, want ErrRobotInactive", err)
	}
	if _, err := bearer(rb, token); !errors.Is(err, auth.ErrRobotInactive) {
		t.Errorf("B: a token of the robot A revoked: %v, want ErrRobotInactive", err)
	}
}
