package auth_test

import (
	"strings"
	"testing"
	"time"

	"github.com/berth-registry/berth/auth"
	"github.com/berth-registry/berth/config"
)

func mustPolicy(t *testing.T, cfg *config.Auth) *auth.Policy {
	t.Helper()
	cfg.TokenTTL, cfg.Robots.MaxExpiry, cfg.Metrics = time.Minute, time.Hour, "admin"
	if err := cfg.Validate(""); err != nil {
		t.Fatal(err)
	}
	p, err := auth.NewPolicy(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestDecide(t *testing.T) {
	p := mustPolicy(t, &config.Auth{
		Public: []string{"pub"},
		Rules: []config.AuthRule{
			{Subjects: []string{"group:team-a"}, Repositories: []string{"a/*"}, Actions: []string{"admin"}},
			{Subjects: []string{"user:bob"}, Repositories: []string{"b/*"}, Actions: []string{"pull", "push"}},
			{Subjects: []string{"user:bob"}, Repositories: []string{"b/secret"}, Actions: []string{"pull"}, Effect: "deny"},
			{Subjects: []string{"authenticated"}, Repositories: []string{"shared/*"}, Actions: []string{"pull"}},
			{Subjects: []string{"user:signer"}, Repositories: []string{"a/*"}, Actions: []string{"pull", "sign"}},
			{Subjects: []string{"anonymous"}, Repositories: []string{"pub/private"}, Actions: []string{"pull"}, Effect: "deny"},
			{Subjects: []string{"user:root"}, Repositories: []string{"*/*"}, Actions: []string{"admin"}},
		},
	})
	alice := auth.Identity{Subject: "user:alice", Groups: []string{"team-a"}}
	bob := auth.Identity{Subject: "user:bob"}
	signer := auth.Identity{Subject: "user:signer"}
	root := auth.Identity{Subject: "user:root"}
	anon := auth.AnonymousIdentity()
	robot := auth.Identity{Subject: "robot:a+ci", Robot: &auth.Robot{Namespace: "a", Name: "ci",
		Scopes: []auth.RobotScope{{Repositories: []string{"a/app"}, Actions: []auth.Action{auth.Pull}}}}}
	token := auth.Identity{Subject: "user:alice", Groups: []string{"team-a"}, Limited: true,
		Grants: []auth.Grant{{Type: "repository", Name: "a/x", Actions: []string{"pull"}}}}
	catalogToken := auth.Identity{Subject: "user:bob", Limited: true,
		Grants: []auth.Grant{{Type: "registry", Name: "catalog", Actions: []string{"*"}}}}

	tests := []struct {
		name   string
		id     auth.Identity
		repo   string
		action auth.Action
		want   bool
		rule   string
	}{
		{"group admin pulls", alice, "a/x", auth.Pull, true, "auth.rules[0]"},
		{"group admin deletes", alice, "a/x", auth.Delete, true, "auth.rules[0]"},
		{"group admin manages namespace", alice, auth.NamespaceResource("a"), auth.Admin, true, "auth.rules[0]"},
		{"other namespace hidden", alice, "b/x", auth.Pull, false, ""},
		{"push implies sign", bob, "b/x", auth.Sign, true, "auth.rules[1]"},
		{"push does not imply delete", bob, "b/x", auth.Delete, false, ""},
		{"deny beats allow", bob, "b/secret", auth.Pull, false, "auth.rules[2]"},
		{"deny is per action", bob, "b/secret", auth.Push, true, "auth.rules[1]"},
		{"authenticated rule", bob, "shared/x", auth.Pull, true, "auth.rules[3]"},
		{"authenticated excludes anonymous", anon, "shared/x", auth.Pull, false, ""},
		{"public namespace", anon, "pub/x", auth.Pull, true, "auth.public[0] (pub)"},
		{"public is pull only", anon, "pub/x", auth.Push, false, ""},
		{"anonymous rules apply to users", bob, "pub/x", auth.Pull, true, "auth.public[0] (pub)"},
		{"anonymous deny applies to users", root, "pub/private", auth.Pull, false, "auth.rules[5]"},
		{"signer signs", signer, "a/x", auth.Sign, true, "auth.rules[4]"},
		{"signer may not push", signer, "a/x", auth.Push, false, ""},
		{"namespace admin is not global", alice, auth.Everything, auth.Admin, false, ""},
		{"global admin", root, auth.Everything, auth.Admin, true, "auth.rules[6]"},
		{"glob stays in one segment", root, "a/b/c", auth.Pull, false, ""},
		{"robot scope", robot, "a/app", auth.Pull, true, "robot a+ci scopes[0]"},
		{"robot outside scope", robot, "a/other", auth.Pull, false, ""},
		{"robot gets no authenticated rules", robot, "shared/x", auth.Pull, false, ""},
		{"robot gets anonymous rules", robot, "pub/x", auth.Pull, true, "auth.public[0] (pub)"},
		{"token grant and policy", token, "a/x", auth.Pull, true, "auth.rules[0]"},
		{"token limits the policy", token, "a/x", auth.Push, false, ""},
		{"token for another repo", token, "a/y", auth.Pull, false, ""},
		{"catalog token lists", catalogToken, "b/x", auth.Pull, true, "auth.rules[1]"},
		{"catalog token does not push", catalogToken, "b/x", auth.Push, false, ""},
		{"catalog token still filtered", catalogToken, "b/secret", auth.Pull, false, "auth.rules[2]"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := p.Decide(tc.id, tc.repo, tc.action)
			if d.Allowed != tc.want || d.Rule != tc.rule {
				t.Fatalf("Decide(%s, %s, %s) = %+v, want allowed=%v rule=%q", tc.id.Subject, tc.repo, tc.action, d, tc.want, tc.rule)
			}
			if d.Reason == "" {
				t.Fatal("no reason given")
			}
		})
	}
}

func TestDecideWithoutAuthAllowsEverything(t *testing.T) {
	var p *auth.Policy
	if d := p.Decide(auth.AnonymousIdentity(), "a/x", auth.Delete); !d.Allowed || !strings.Contains(d.Reason, "auth is off") {
		t.Fatalf("nil policy: %+v", d)
	}
}

func TestEmptyPolicyDeniesEverything(t *testing.T) {
	p := mustPolicy(t, &config.Auth{})
	for _, a := range auth.Actions {
		if p.Allowed(auth.Identity{Subject: "user:x"}, "a/x", a) {
			t.Fatalf("%s allowed by an empty policy", a)
		}
	}
}

func TestAuthConfigValidate(t *testing.T) {
	good := func() *config.Auth {
		return &config.Auth{TokenTTL: time.Minute, Metrics: "admin", Robots: config.Robots{MaxExpiry: time.Hour},
			Rules: []config.AuthRule{{Subjects: []string{"user:a"}, Repositories: []string{"a/*"}, Actions: []string{"pull"}}}}
	}
	if err := good().Validate("auth"); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		mutate func(*config.Auth)
		want   string
	}{
		{"no subjects", func(c *config.Auth) { c.Rules[0].Subjects = nil }, "auth.rules[0].subjects: required"},
		{"bad subject kind", func(c *config.Auth) { c.Rules[0].Subjects = []string{"team:a"} }, `unknown subject kind "team"`},
		{"bare name", func(c *config.Auth) { c.Rules[0].Subjects = []string{"alice"} }, "auth.rules[0].subjects[0]"},
		{"robot without namespace", func(c *config.Auth) { c.Rules[0].Subjects = []string{"robot:ci"} }, "robot:NAMESPACE+NAME"},
		{"glob without slash", func(c *config.Auth) { c.Rules[0].Repositories = []string{"a*"} }, "auth.rules[0].repositories[0]"},
		{"bad glob", func(c *config.Auth) { c.Rules[0].Repositories = []string{"a/["} }, "bad glob"},
		{"unknown action", func(c *config.Auth) { c.Rules[0].Actions = []string{"write"} }, `auth.rules[0].actions[0]: want one of pull, push, delete, sign, admin (got "write")`},
		{"bad effect", func(c *config.Auth) { c.Rules[0].Effect = "maybe" }, "auth.rules[0].effect"},
		{"public with slash", func(c *config.Auth) { c.Public = []string{"a/b"} }, "auth.public[0]"},
		{"metrics", func(c *config.Auth) { c.Metrics = "users" }, "auth.metrics"},
		{"ttl", func(c *config.Auth) { c.TokenTTL = -time.Second }, "auth.tokenTTL"},
		{"audit size below 1MiB", func(c *config.Auth) { c.AuditMaxSize = 64 << 10 }, "auth.auditMaxSize: want at least 1MiB (got 65536 bytes)"},
		{"negative audit files", func(c *config.Auth) { c.AuditMaxFiles = -1 }, "auth.auditMaxFiles: must not be negative (got -1)"},
		{"oidc no keys", func(c *config.Auth) { c.OIDC = []config.OIDCIssuer{{Issuer: "https://x", Audience: "b"}} }, "auth.oidc[0].jwksFile"},
		{"oidc both keys", func(c *config.Auth) {
			c.OIDC = []config.OIDCIssuer{{Issuer: "https://x", JWKSFile: "f", JWKSURL: "https://x/k", Audience: "b"}}
		}, "exactly one"},
		{"oidc no audience", func(c *config.Auth) { c.OIDC = []config.OIDCIssuer{{Issuer: "https://x", JWKSFile: "f"}} }, "auth.oidc[0].audience"},
		{"oidc no subjects", func(c *config.Auth) {
			c.OIDC = []config.OIDCIssuer{{Issuer: "https://x", JWKSFile: "f", Audience: "b"}}
		}, "auth.oidc[0].subjects"},
		{"oidc subject without claims", func(c *config.Auth) {
			c.OIDC = []config.OIDCIssuer{{Issuer: "https://x", JWKSFile: "f", Audience: "b", Subjects: []config.OIDCSubject{{Name: "ci"}}}}
		}, "auth.oidc[0].subjects[0].claims"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := good()
			tc.mutate(c)
			err := c.Validate("auth")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// TestDecideOLMCatalog decides on namespaces' OLM catalog repositories,
// whose images name every package of their namespace: a pull needs pull on
// every package (and a token's grant of the repository), and nothing else
// is allowed to anyone.
func TestDecideOLMCatalog(t *testing.T) {
	p := mustPolicy(t, &config.Auth{
		Public: []string{"pub", "pub2"},
		Rules: []config.AuthRule{
			{Subjects: []string{"group:all"}, Repositories: []string{"ns/*"}, Actions: []string{"pull"}},
			{Subjects: []string{"user:one"}, Repositories: []string{"ns/a"}, Actions: []string{"pull", "push"}},
			{Subjects: []string{"user:partial"}, Repositories: []string{"ns/*"}, Actions: []string{"pull"}},
			{Subjects: []string{"user:partial"}, Repositories: []string{"ns/secret"}, Actions: []string{"pull"}, Effect: "deny"},
			{Subjects: []string{"user:pusher"}, Repositories: []string{"ns/*"}, Actions: []string{"push", "delete"}},
			{Subjects: []string{"anonymous"}, Repositories: []string{"pub2/private"}, Actions: []string{"pull"}, Effect: "deny"},
			{Subjects: []string{"user:root"}, Repositories: []string{"*/*"}, Actions: []string{"admin"}},
		},
	})
	all := auth.Identity{Subject: "user:all", Groups: []string{"all"}}
	one := auth.Identity{Subject: "user:one"}
	partial := auth.Identity{Subject: "user:partial"}
	pusher := auth.Identity{Subject: "user:pusher"}
	root := auth.Identity{Subject: "user:root"}
	anon := auth.AnonymousIdentity()
	robot := func(glob string, actions ...auth.Action) auth.Identity {
		return auth.Identity{Subject: "robot:ns+ci", Robot: &auth.Robot{Namespace: "ns", Name: "ci",
			Scopes: []auth.RobotScope{{Repositories: []string{glob}, Actions: actions}}}}
	}
	token := func(id auth.Identity, grants ...auth.Grant) auth.Identity {
		id.Limited, id.Grants = true, grants
		return id
	}
	catalogPull := auth.Grant{Type: "repository", Name: "ns/olm/catalog", Actions: []string{"pull"}}
	listing := auth.Grant{Type: "registry", Name: "catalog", Actions: []string{"*"}}

	for _, tc := range []struct {
		name   string
		p      *auth.Policy
		id     auth.Identity
		repo   string
		action auth.Action
		want   bool
		reason string // the end of the reason, after the rule
	}{
		{"pull on every package", p, all, "ns/olm/catalog", auth.Pull, true, "the rules let user:all (groups all) pull every package of ns"},
		{"pull on one package only", p, one, "ns/olm/catalog", auth.Pull, false, "the rules do not let user:one pull every package of ns"},
		{"a deny on one package", p, partial, "ns/olm/catalog", auth.Pull, false, "the rules do not let user:partial pull every package of ns"},
		{"push on every package is no pull", p, pusher, "ns/olm/catalog", auth.Pull, false, "the rules do not let user:pusher pull every package of ns"},
		{"global admin pulls", p, root, "ns/olm/catalog", auth.Pull, true, "the rules let user:root pull every package of ns"},
		{"another namespace", p, all, "pub/olm/catalog", auth.Pull, true, "the rules let user:all (groups all) pull every package of pub"},
		{"no pull anywhere in it", p, one, "other/olm/catalog", auth.Pull, false, "the rules do not let user:one pull every package of other"},
		{"robot scoped to the namespace", p, robot("ns/*", auth.Pull), "ns/olm/catalog", auth.Pull, true, "the rules let robot:ns+ci pull every package of ns"},
		{"robot scoped to one package", p, robot("ns/a", auth.Pull), "ns/olm/catalog", auth.Pull, false, "the rules do not let robot:ns+ci pull every package of ns"},
		{"robot pushing the namespace", p, robot("ns/*", auth.Push), "ns/olm/catalog", auth.Pull, false, "the rules do not let robot:ns+ci pull every package of ns"},
		{"robot gets no user rules", p, robot("ns/a", auth.Pull), "pub/olm/catalog", auth.Pull, true, "the rules let robot:ns+ci pull every package of pub"},
		{"robot pushes nothing", p, robot("ns/*", auth.Pull, auth.Push), "ns/olm/catalog", auth.Push, false, "push is denied to everyone, as berth generates it (docs/olm.md)"},
		{"token granting it", p, token(all, catalogPull), "ns/olm/catalog", auth.Pull, true, "the rules let user:all (groups all) pull every package of ns"},
		{"token without the grant", p, token(all, auth.Grant{Type: "repository", Name: "ns/a", Actions: []string{"pull"}}), "ns/olm/catalog", auth.Pull, false, "the token does not grant pull on ns/olm/catalog"},
		{"token granting it to one who may not", p, token(one, catalogPull), "ns/olm/catalog", auth.Pull, false, "the rules do not let user:one pull every package of ns"},
		{"catalog token lists it", p, token(all, listing), "ns/olm/catalog", auth.Pull, true, "the rules let user:all (groups all) pull every package of ns"},
		{"catalog token still filtered", p, token(partial, listing), "ns/olm/catalog", auth.Pull, false, "the rules do not let user:partial pull every package of ns"},
		{"public namespace", p, anon, "pub/olm/catalog", auth.Pull, true, "the rules let anonymous pull every package of pub"},
		{"public namespace with a hidden package", p, anon, "pub2/olm/catalog", auth.Pull, false, "the rules do not let anonymous pull every package of pub2"},
		{"anonymous denies bind users", p, root, "pub2/olm/catalog", auth.Pull, false, "the rules do not let user:root pull every package of pub2"},
		{"anonymous elsewhere", p, anon, "ns/olm/catalog", auth.Pull, false, "the rules do not let anonymous pull every package of ns"},
		{"admin may not push", p, root, "ns/olm/catalog", auth.Push, false, "push is denied to everyone, as berth generates it (docs/olm.md)"},
		{"admin may not delete", p, root, "ns/olm/catalog", auth.Delete, false, "delete is denied to everyone, as berth generates it (docs/olm.md)"},
		{"admin may not sign", p, root, "ns/olm/catalog", auth.Sign, false, "sign is denied to everyone, as berth generates it (docs/olm.md)"},
		{"admin may not administer", p, root, "ns/olm/catalog", auth.Admin, false, "admin is denied to everyone, as berth generates it (docs/olm.md)"},
		{"pusher may not push", p, pusher, "ns/olm/catalog", auth.Push, false, "push is denied to everyone, as berth generates it (docs/olm.md)"},
		{"auth off: pull", nil, anon, "ns/olm/catalog", auth.Pull, true, "auth is off: everyone may"},
		{"auth off: no push", nil, anon, "ns/olm/catalog", auth.Push, false, "push is denied to everyone, as berth generates it (docs/olm.md)"},
		{"auth off: no delete", nil, root, "ns/olm/catalog", auth.Delete, false, "delete is denied to everyone, as berth generates it (docs/olm.md)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := tc.p.Decide(tc.id, tc.repo, tc.action)
			ns, _, _ := strings.Cut(tc.repo, "/")
			reason := tc.repo + " is namespace " + ns + "'s OLM catalog: pull needs pull on every package of " + ns + "; " + tc.reason
			if d.Allowed != tc.want || d.Rule != "" || d.Reason != reason {
				t.Fatalf("Decide(%s, %s, %s) = %+v, want allowed=%v, no rule, reason %q", tc.id.Subject, tc.repo, tc.action, d, tc.want, reason)
			}
		})
	}
	// Beside the catalog, the rules decide as ever.
	for _, tc := range []struct {
		id   auth.Identity
		repo string
		want bool
	}{
		{one, "ns/olm", false}, {all, "ns/olm", true}, {root, "ns/olm/catalogs", false}, {root, "ns/catalog", true},
	} {
		if d := p.Decide(tc.id, tc.repo, auth.Pull); d.Allowed != tc.want || strings.Contains(d.Reason, "OLM") {
			t.Errorf("Decide(%s, %s, pull) = %+v, want allowed=%v by the rules", tc.id.Subject, tc.repo, d, tc.want)
		}
	}
}
