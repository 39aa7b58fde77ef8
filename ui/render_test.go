package ui

import (
	"testing"

	"github.com/berth-registry/berth/auth"
)

// TestViewerName: the header names a viewer as a person reads it, never by
// the subject the policy matches.
func TestViewerName(t *testing.T) {
	for _, tc := range []struct {
		id   auth.Identity
		want string
	}{
		{auth.Identity{Subject: "user:alice"}, "alice"},
		{auth.Identity{Subject: "oidc:bob@example.com"}, "bob@example.com"},
		{auth.Identity{Subject: "robot:team-a+ci", Robot: &auth.Robot{Namespace: "team-a", Name: "ci"}}, "robot team-a/ci"},
		{auth.Identity{Subject: "robot:team-a+ci"}, "robot team-a/ci"},
	} {
		if got := viewerName(tc.id); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.id.Subject, got, tc.want)
		}
	}
}
