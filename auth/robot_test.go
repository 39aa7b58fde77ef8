package auth_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/berth-registry/berth/auth"
)

func TestRobotValidate(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	good := func() *auth.Robot {
		return &auth.Robot{Namespace: "a", Name: "ci", ExpiresAt: now.Add(time.Hour),
			Scopes: []auth.RobotScope{{Repositories: []string{"a/*"}, Actions: []auth.Action{auth.Pull, auth.Push}}}}
	}
	if err := good().Validate(now, 2*time.Hour); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		mutate func(*auth.Robot)
		want   string
	}{
		{"no name", func(r *auth.Robot) { r.Name = "" }, "name:"},
		{"upper case", func(r *auth.Robot) { r.Name = "CI" }, "lowercase"},
		{"plus in name", func(r *auth.Robot) { r.Name = "c+i" }, "name:"},
		{"no scopes", func(r *auth.Robot) { r.Scopes = nil }, "scopes: at least one"},
		{"glob outside namespace", func(r *auth.Robot) { r.Scopes[0].Repositories = []string{"b/*"} }, `namespace "a"`},
		{"glob over namespaces", func(r *auth.Robot) { r.Scopes[0].Repositories = []string{"*/*"} }, "scopes[0].repositories[0]"},
		{"namespace only", func(r *auth.Robot) { r.Scopes[0].Repositories = []string{"a"} }, "scopes[0].repositories[0]"},
		{"admin", func(r *auth.Robot) { r.Scopes[0].Actions = []auth.Action{auth.Admin} }, "pull, push, delete or sign"},
		{"no actions", func(r *auth.Robot) { r.Scopes[0].Actions = nil }, "scopes[0].actions: required"},
		{"never expires", func(r *auth.Robot) { r.ExpiresAt = time.Time{} }, "robots always expire"},
		{"expired", func(r *auth.Robot) { r.ExpiresAt = now }, "not in the future"},
		{"too long", func(r *auth.Robot) { r.ExpiresAt = now.Add(3 * time.Hour) }, "at most 2h0m0s"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := good()
			tc.mutate(r)
			if err := r.Validate(now, 2*time.Hour); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestRobotActive(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	r := &auth.Robot{Namespace: "a", Name: "ci", ExpiresAt: now.Add(time.Minute)}
	if err := r.Active(now); err != nil {
		t.Fatal(err)
	}
	if err := r.Active(now.Add(time.Minute)); !errors.Is(err, auth.ErrRobotInactive) || !strings.Contains(err.Error(), "expired") {
		t.Fatalf("at expiry: %v", err)
	}
	r.RevokedAt = now.Add(-time.Second)
	if err := r.Active(now); !errors.Is(err, auth.ErrRobotInactive) || !strings.Contains(err.Error(), "revoked") {
		t.Fatalf("revoked: %v", err)
	}
}

func TestParseRobotUsername(t *testing.T) {
	for _, tc := range []struct {
		user, ns, name string
		ok             bool
	}{
		{"robot+a+ci", "a", "ci", true},
		{"robot+a", "", "", false},
		{"robot++ci", "", "", false},
		{"robot+a+", "", "", false},
		{"alice", "", "", false},
	} {
		ns, name, ok := auth.ParseRobotUsername(tc.user)
		if ns != tc.ns || name != tc.name || ok != tc.ok {
			t.Errorf("ParseRobotUsername(%q) = %q, %q, %v", tc.user, ns, name, ok)
		}
	}
}
