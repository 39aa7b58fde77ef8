package main

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/berth-registry/berth/auth"
	"github.com/berth-registry/berth/client"
)

var cliRobot = auth.Robot{
	Namespace: "a", Name: "ci", Description: "CI pushes",
	Scopes:    []auth.RobotScope{{Repositories: []string{"a/*"}, Actions: []auth.Action{auth.Pull, auth.Push}}},
	CreatedBy: "user:alice",
	CreatedAt: time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC),
	ExpiresAt: time.Date(2999, 3, 31, 12, 0, 0, 0, time.UTC),
}

func TestRobotCmd(t *testing.T) {
	var body string
	revoked := cliRobot
	revoked.Name, revoked.RevokedAt = "old", time.Date(2025, 3, 2, 0, 0, 0, 0, time.UTC)
	f := serveCatalog(t, map[string]any{
		"/robots": http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodPost {
				data, _ := io.ReadAll(r.Body)
				body = string(data)
				w.WriteHeader(http.StatusCreated)
				json.NewEncoder(w).Encode(client.NewRobot{Robot: cliRobot, Username: "robot+a+ci", Secret: "berth_s3cret"})
				return
			}
			json.NewEncoder(w).Encode(map[string]any{"robots": []auth.Robot{cliRobot, revoked}})
		}),
		"/robots/a/ci": http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusNoContent)
		}),
	})

	out := mustBerth(t, "robot", "create", "a/ci", "--server", f.host, "--scope", "a/*:pull,push", "--expires", "720h", "--description", "CI pushes")
	want := `Robot:    a/ci
Scopes:   a/*:pull,push
Expires:  2999-03-31T12:00:00Z
Username: robot+a+ci
Secret:   berth_s3cret

The secret is shown only now and cannot be shown again: keep it in your CI's
secret store. Log in with it:
  echo "$SECRET" | berth login ` + f.host + ` -u robot+a+ci --password-stdin
`
	if out != want {
		t.Errorf("create output:\n%s\nwant:\n%s", out, want)
	}
	if want := `{"namespace":"a","name":"ci","description":"CI pushes","scopes":[{"repositories":["a/*"],"actions":["pull","push"]}],"expiresIn":"720h0m0s"}`; body != want {
		t.Errorf("create body %s, want %s", body, want)
	}
	var created client.NewRobot
	decode(t, mustBerth(t, "robot", "create", "a/ci", "--server", f.host, "--scope", "a/*:pull", "--expires", "1h", "--format", "json"), &created)
	if created.Secret != "berth_s3cret" || created.Username != "robot+a+ci" {
		t.Errorf("create --format json: %+v", created)
	}

	out = mustBerth(t, "robot", "list", "a", "--server", f.host)
	want = `ROBOT   SCOPES          STATE     EXPIRES                LAST USED   DESCRIPTION
a/ci    a/*:pull,push   active    2999-03-31T12:00:00Z   -           CI pushes
a/old   a/*:pull,push   revoked   2999-03-31T12:00:00Z   -           CI pushes
`
	if out != want {
		t.Errorf("list output:\n%s\nwant:\n%s", out, want)
	}
	if out := mustBerth(t, "robot", "revoke", "a/ci", "--server", f.host); out != "Revoked robot a/ci\n" {
		t.Errorf("revoke output %q", out)
	}
	reqs := f.requests()
	if want := []string{"/api/v1/robots", "/api/v1/robots", "/api/v1/robots?namespace=a", "/api/v1/robots/a/ci"}; strings.Join(reqs, " ") != strings.Join(want, " ") {
		t.Errorf("requests %q, want %q", reqs, want)
	}
	if out := mustBerth(t, "robot", "revoke", "a/ci", "--server", f.host, "--format", "json"); compactJSON(t, out) != `{"namespace":"a","name":"ci","revoked":true}` {
		t.Errorf("revoke --format json output %q", out)
	}
}

func TestRobotCmdErrors(t *testing.T) {
	f := serveCatalog(t, nil)
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"create", "a/ci", "--scope", "a/*:pull"}, "--expires is required: robots always expire (e.g. --expires 720h)"},
		{[]string{"create", "a/ci", "--scope", "a/*:pull", "--expires", "-1h"}, "--expires -1h0m0s: want a positive duration, like 720h"},
		{[]string{"create", "a/ci", "--expires", "1h"}, "--scope is required: at least one 'GLOB:ACTION,...', like 'team-a/*:pull'"},
		{[]string{"create", "a/ci", "--scope", "a/*", "--expires", "1h"}, `--scope "a/*": want GLOB:ACTION,..., like 'team-a/*:pull,push'`},
		{[]string{"create", "a/ci", "--scope", ":pull", "--expires", "1h"}, `--scope ":pull": want GLOB:ACTION,..., like 'team-a/*:pull,push'`},
		{[]string{"create", "a/ci", "--scope", "a/*:", "--expires", "1h"}, `--scope "a/*:": want GLOB:ACTION,..., like 'team-a/*:pull,push'`},
		{[]string{"create", "a/ci", "--scope", "a/*:pull,fly", "--expires", "1h"}, `--scope "a/*:pull,fly": unknown action "fly": want one of pull, push, delete, sign, admin`},
		{[]string{"create", "a/ci", "--scope", "b/*:pull", "--expires", "1h"}, `create robot a/ci: invalid: scopes[0].repositories[0]: want a glob over repositories of namespace "a", like "a/*" (got "b/*")`},
		{[]string{"create", "a/ci", "--scope", "a/*:admin", "--expires", "1h"}, `create robot a/ci: invalid: scopes[0].actions[0]: a robot may be given pull, push, delete or sign (got "admin")`},
		{[]string{"create", "a", "--scope", "a/*:pull", "--expires", "1h"}, `robot "a": want NAMESPACE/NAME, like team-a/ci`},
		{[]string{"revoke", "a/b/c"}, `robot "a/b/c": want NAMESPACE/NAME, like team-a/ci`},
		{[]string{"revoke", "a/gone"}, "revoke robot a/gone: not found: no such thing: /api/v1/robots/a/gone"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			code, _, stderr := berth(t, append(append([]string{"robot"}, tt.args...), "--server", f.host)...)
			if code != 1 || stderr != "Error: "+tt.want+"\n" {
				t.Errorf("exit %d, stderr %q, want %q", code, stderr, tt.want)
			}
		})
	}
	if got := f.requests(); len(got) != 1 {
		t.Errorf("requests %q, want only the revoke of a/gone", got)
	}
}
