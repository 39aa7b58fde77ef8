package main

import (
	"context"
	"crypto/sha256"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-registry/berth/auth"
	"github.com/berth-registry/berth/auth/robotdb"
)

const authConfig = `data: DATA
auth:
  groups:
    team-a: [alice]
  public: [pub]
  rules:
    - subjects: [group:team-a]
      repositories: ["a/*"]
      actions: [push, delete]
    - subjects: [user:alice]
      repositories: ["a/secret"]
      actions: [delete]
      effect: deny
    - subjects: [group:deployers]
      repositories: ["a/*"]
      actions: [pull]
`

// writeAuthConfig writes a configuration file with authConfig's auth
// section, or none when auth is false, and returns its path.
func writeAuthConfig(t *testing.T, withAuth bool) string {
	t.Helper()
	dir := setup(t)
	t.Setenv("BERTH_CONFIG", "")
	text := "data: " + dir + "\n"
	if withAuth {
		text = strings.Replace(authConfig, "DATA", dir, 1)
	}
	path := filepath.Join(dir, "berth.yaml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestAuthCheckCmd(t *testing.T) {
	cfg := writeAuthConfig(t, true)
	scopes := []auth.RobotScope{{Repositories: []string{"a/*"}, Actions: []auth.Action{auth.Pull}}}
	store, err := robotdb.Open(context.Background(), filepath.Join(filepath.Dir(cfg), "auth.db"))
	if err != nil {
		t.Fatal(err)
	}
	hash := make([]byte, sha256.Size)
	for _, r := range []*auth.Robot{
		{Namespace: "a", Name: "ci", Scopes: scopes, ExpiresAt: time.Now().Add(time.Hour), SecretHash: hash},
		{Namespace: "a", Name: "old", Scopes: scopes, ExpiresAt: time.Now().Add(time.Hour), SecretHash: hash},
	} {
		if err := store.Create(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
	if err := store.Revoke(context.Background(), "a", "old", time.Date(2025, 3, 2, 0, 0, 0, 0, time.UTC)); err != nil {
		t.Fatal(err)
	}
	store.Close()

	tests := []struct {
		args []string
		code int
		out  string
	}{
		{[]string{"user:alice", "a/kafka", "push"}, 0, "allowed: auth.rules[0] allows user:alice (groups team-a) push on a/kafka\nrule: auth.rules[0]\n"},
		{[]string{"user:alice", "a/kafka", "sign"}, 0, "allowed: auth.rules[0] allows user:alice (groups team-a) sign on a/kafka\nrule: auth.rules[0]\n"},
		{[]string{"user:alice", "a/secret", "delete"}, 1, "denied: auth.rules[1] denies user:alice (groups team-a) delete on a/secret\nrule: auth.rules[1]\n"},
		{[]string{"user:bob", "a/kafka", "pull"}, 1, "denied: no rule allows user:bob pull on a/kafka\n"},
		{[]string{"anonymous", "pub/etcd", "pull"}, 0, "allowed: auth.public[0] (pub) allows anonymous pull on pub/etcd\nrule: auth.public[0] (pub)\n"},
		{[]string{"anonymous", "pub/etcd", "push"}, 1, "denied: no rule allows anonymous push on pub/etcd\n"},
		{[]string{"oidc:ci", "a/kafka", "pull", "--group", "deployers"}, 0, "allowed: auth.rules[2] allows oidc:ci (groups deployers) pull on a/kafka\nrule: auth.rules[2]\n"},
		{[]string{"oidc:ci", "a/kafka", "pull"}, 1, "denied: no rule allows oidc:ci pull on a/kafka\n"},
		{[]string{"robot:a+ci", "a/kafka", "pull"}, 0, "allowed: robot a+ci scopes[0] allows pull on a/kafka\nrule: robot a+ci scopes[0]\n"},
		{[]string{"robot:a+ci", "a/kafka", "push"}, 1, "denied: no rule allows robot:a+ci push on a/kafka\n"},
		{[]string{"robot:a+old", "a/kafka", "pull"}, 1, "denied: robot+a+old was revoked at 2025-03-02T00:00:00Z: robot is revoked or expired\n"},
		{[]string{"user:alice", "a/*", "admin"}, 1, "denied: no rule allows user:alice (groups team-a) admin on a/*\n"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			code, stdout, stderr := berth(t, append([]string{"auth", "check", "--config", cfg}, tt.args...)...)
			if code != tt.code || stdout != tt.out || stderr != "" {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit %d, stdout %q", code, stdout, stderr, tt.code, tt.out)
			}
		})
	}
}

// TestAuthCheckCmdJSON: --format json prints the decision as one JSON
// document, with the exit status of the text form.
func TestAuthCheckCmdJSON(t *testing.T) {
	cfg := writeAuthConfig(t, true)
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"user:alice", "a/kafka", "push"}, 0, `{"subject":"user:alice","repository":"a/kafka","action":"push","allowed":true,"reason":"auth.rules[0] allows user:alice (groups team-a) push on a/kafka","rule":"auth.rules[0]"}`},
		{[]string{"user:bob", "a/kafka", "pull"}, 1, `{"subject":"user:bob","repository":"a/kafka","action":"pull","allowed":false,"reason":"no rule allows user:bob pull on a/kafka"}`},
	} {
		code, stdout, stderr := berth(t, append([]string{"auth", "check", "--config", cfg, "--format", "json"}, tc.args...)...)
		if code != tc.code || stderr != "" || compactJSON(t, stdout) != tc.want {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit %d and %s", tc.args, code, stdout, stderr, tc.code, tc.want)
		}
	}
}

func TestAuthCheckCmdOff(t *testing.T) {
	cfg := writeAuthConfig(t, false)
	out := mustBerth(t, "auth", "check", "--config", cfg, "anonymous", "a/kafka", "delete")
	if want := "allowed: auth is off: everything is allowed\n"; out != want {
		t.Errorf("output %q, want %q", out, want)
	}
	// berth writes a namespace's OLM catalog itself, auth or not.
	code, stdout, _ := berth(t, "auth", "check", "--config", cfg, "anonymous", "a/olm/catalog", "push")
	if code != 1 || !strings.HasPrefix(stdout, "denied: a/olm/catalog is namespace a's OLM catalog") {
		t.Errorf("push to the OLM catalog with auth off: exit %d, %q; want denied", code, stdout)
	}
	if out := mustBerth(t, "auth", "check", "--config", cfg, "anonymous", "a/olm/catalog", "pull"); !strings.HasPrefix(out, "allowed: ") {
		t.Errorf("pull of the OLM catalog with auth off: %q; want allowed", out)
	}
}

func TestAuthCheckCmdErrors(t *testing.T) {
	cfg := writeAuthConfig(t, true)
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"alice", "a/kafka", "pull"}, `SUBJECT: want user:NAME, group:NAME, robot:NAMESPACE+NAME, oidc:NAME, anonymous or authenticated (got "alice")`},
		{[]string{"team:a", "a/kafka", "pull"}, `SUBJECT: unknown subject kind "team" in "team:a": want user, group, robot, oidc, anonymous or authenticated`},
		{[]string{"robot:ci", "a/kafka", "pull"}, `SUBJECT: a robot subject is robot:NAMESPACE+NAME (got "robot:ci")`},
		{[]string{"group:team-a", "a/kafka", "pull"}, `SUBJECT "group:team-a" names no one caller: want anonymous, user:NAME, oidc:NAME or robot:NAMESPACE+NAME (give an oidc subject's groups with --group)`},
		{[]string{"authenticated", "a/kafka", "pull"}, `SUBJECT "authenticated" names no one caller: want anonymous, user:NAME, oidc:NAME or robot:NAMESPACE+NAME (give an oidc subject's groups with --group)`},
		{[]string{"user:alice", "a/kafka", "pull", "--group", "x"}, "--group is for oidc subjects; user:alice takes its groups from the configuration"},
		{[]string{"user:alice", "a/kafka", "write"}, `unknown action "write": want one of pull, push, delete, sign, admin`},
		{[]string{"user:alice", "kafka", "pull"}, `REPOSITORY "kafka": want namespace/name, namespace/*, */* or namespace/olm/catalog`},
		{[]string{"user:alice", "a/b/c", "pull"}, `REPOSITORY "a/b/c": want namespace/name, namespace/*, */* or namespace/olm/catalog`},
		{[]string{"user:alice", "*/kafka", "pull"}, `REPOSITORY "*/kafka": want namespace/name, namespace/*, */* or namespace/olm/catalog`},
		{[]string{"robot:a+nobody", "a/kafka", "pull"}, "robot+a+nobody: robot not found"},
		{[]string{"user:alice", "a/kafka"}, "accepts 3 arg(s), received 2"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			code, stdout, stderr := berth(t, append([]string{"auth", "check", "--config", cfg}, tt.args...)...)
			if code != 1 || stdout != "" || stderr != "Error: "+tt.want+"\n" {
				t.Errorf("exit %d, stdout %q, stderr %q; want %q", code, stdout, stderr, tt.want)
			}
		})
	}
	code, _, stderr := berth(t, "auth", "check", "--config", filepath.Join(t.TempDir(), "missing.yaml"), "anonymous", "a/b", "pull")
	if code != 1 || !strings.Contains(stderr, "missing.yaml") {
		t.Errorf("missing config: exit %d, stderr %q", code, stderr)
	}
}
