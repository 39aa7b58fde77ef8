package robotdb_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/berth-registry/berth/auth"
	"github.com/berth-registry/berth/auth/revoketest"
	"github.com/berth-registry/berth/auth/robotdb"
)

var t0 = time.Date(2030, 1, 2, 3, 4, 5, 6, time.UTC)

func robot(ns, name string) *auth.Robot {
	sum := sha256.Sum256([]byte("berth_secret-of-" + ns + name))
	return &auth.Robot{
		Namespace: ns, Name: name, Description: "CI of " + ns,
		Scopes:    []auth.RobotScope{{Repositories: []string{ns + "/*"}, Actions: []auth.Action{auth.Pull, auth.Push}}},
		CreatedBy: "user:alice", CreatedAt: t0, ExpiresAt: t0.Add(24 * time.Hour), SecretHash: sum[:],
	}
}

func open(t *testing.T, file string) *robotdb.Store {
	t.Helper()
	s, err := robotdb.Open(context.Background(), file)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestStore(t *testing.T) {
	ctx := context.Background()
	file := filepath.Join(t.TempDir(), "auth", "auth.db")
	s := open(t, file)
	for _, r := range []*auth.Robot{robot("b", "ci"), robot("a", "deploy"), robot("a", "ci")} {
		if err := s.Create(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Create(ctx, robot("a", "ci")); !errors.Is(err, auth.ErrRobotExists) {
		t.Errorf("duplicate: %v, want ErrRobotExists", err)
	}
	bad := robot("a", "nohash")
	bad.SecretHash = []byte("secret")
	if err := s.Create(ctx, bad); err == nil {
		t.Error("a robot with a secret rather than its hash was stored")
	}
	got, err := s.Get(ctx, "a", "ci")
	if err != nil || !reflect.DeepEqual(got, robot("a", "ci")) {
		t.Errorf("Get = %+v, %v; want %+v", got, err, robot("a", "ci"))
	}
	if _, err := s.Get(ctx, "a", "nobody"); !errors.Is(err, auth.ErrRobotNotFound) {
		t.Errorf("Get of none: %v", err)
	}
	if err := s.Revoke(ctx, "a", "ci", t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := s.Revoke(ctx, "a", "ci", t0.Add(2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := s.Create(ctx, robot("a", "ci")); !errors.Is(err, auth.ErrRobotExists) {
		t.Errorf("the name of a revoked robot was taken again: %v", err)
	}
	for _, at := range []time.Duration{3 * time.Hour, time.Hour} {
		if err := s.Touch(ctx, "a", "deploy", t0.Add(at)); err != nil {
			t.Fatal(err)
		}
	}
	for _, err := range []error{s.Revoke(ctx, "a", "nobody", t0), s.Touch(ctx, "a", "nobody", t0)} {
		if !errors.Is(err, auth.ErrRobotNotFound) {
			t.Errorf("Revoke or Touch of none: %v", err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = open(t, file)
	defer s.Close()
	if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("file mode %v, %v; want 0600", fi.Mode(), err)
	}
	all, err := s.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range all {
		names = append(names, r.Username())
	}
	if want := []string{"robot+a+ci", "robot+a+deploy", "robot+b+ci"}; !reflect.DeepEqual(names, want) {
		t.Errorf("List = %v, want %v", names, want)
	}
	if !all[0].RevokedAt.Equal(t0.Add(time.Hour)) || !all[1].LastUsed.Equal(t0.Add(3*time.Hour)) || !all[2].RevokedAt.IsZero() || !all[2].LastUsed.IsZero() {
		t.Errorf("after reopening: revoked %v, last used %v, then %v %v", all[0].RevokedAt, all[1].LastUsed, all[2].RevokedAt, all[2].LastUsed)
	}
	if err := all[0].Active(t0.Add(2 * time.Hour)); !errors.Is(err, auth.ErrRobotInactive) {
		t.Errorf("revoked robot active: %v", err)
	}
	a, err := s.List(ctx, "a")
	if err != nil || len(a) != 2 {
		t.Errorf("List(a) = %d robots, %v", len(a), err)
	}
	if none, err := s.List(ctx, "zz"); err != nil || none == nil || len(none) != 0 {
		t.Errorf("List(zz) = %v, %v; want an empty list", none, err)
	}
}

func TestOpenRefuses(t *testing.T) {
	dir := t.TempDir()
	notDB := filepath.Join(dir, "not.db")
	if err := os.WriteFile(notDB, []byte("this is not a database, not at all, no"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := robotdb.Open(context.Background(), notDB); err == nil {
		t.Error("opened a file that is not a database")
	}
}

// TestRevocations: the revocations of one file, through two handles as two
// processes would hold them.
func TestRevocations(t *testing.T) {
	file := filepath.Join(t.TempDir(), "auth.db")
	a, b := open(t, file), open(t, file)
	defer a.Close()
	defer b.Close()
	revoketest.Run(t, a, b)
}
