package auth

import (
	"math/rand/v2"
	"testing"

	"github.com/berth-registry/berth/catalog"
	"github.com/berth-registry/berth/config"
)

// TestCoverageAgreesWithDecide checks, over random policies and identities,
// that whenever coverage answers a namespace whole, Decide gives that answer
// for every repository of the namespace: coverage is a shortcut of Decide,
// never a second decision.
func TestCoverageAgreesWithDecide(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	namespaces := []string{"a", "ab", "b", "team-a"}
	names := []string{"x", "xy", "app", "secret", "a"}
	globs := []string{"a/*", "*/*", "a*/*", "a/x", "a/x*", "?/*", "b/[a-s]*", "*/secret", "a/*/*", "team-*/*", `a/\x`, "a"}
	subjects := []string{"anonymous", "authenticated", "user:u", "group:g", "robot:a+r", "user:other"}
	pick := func(s []string) []string {
		var out []string
		for range 1 + rng.IntN(2) {
			out = append(out, s[rng.IntN(len(s))])
		}
		return out
	}
	identities := []Identity{
		AnonymousIdentity(),
		{Subject: "user:u", Groups: []string{"g"}},
		{Subject: "robot:a+r", Robot: &Robot{Namespace: "a", Name: "r", Scopes: []RobotScope{{Repositories: []string{"a/x*"}, Actions: []Action{Pull}}}}},
		{Subject: "robot:a+r", Robot: &Robot{Namespace: "a", Name: "r", Scopes: []RobotScope{{Repositories: []string{"a/*"}, Actions: []Action{Push}}}}},
		{Subject: "user:u", Limited: true, Grants: []Grant{{Type: "repository", Name: "a/x", Actions: []string{"pull"}}}},
		{Subject: "user:u", Limited: true, Grants: []Grant{{Type: "registry", Name: "catalog", Actions: []string{"*"}}}},
	}
	checked := 0
	for range 400 {
		cfg := &config.Auth{}
		for range 1 + rng.IntN(4) {
			r := config.AuthRule{Subjects: pick(subjects), Repositories: pick(globs), Actions: pick(config.AuthActions)}
			if rng.IntN(4) == 0 {
				r.Effect = "deny"
			}
			cfg.Rules = append(cfg.Rules, r)
		}
		p, err := NewPolicy(cfg)
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range identities {
			every := p.coverage(id, "")
			for _, ns := range namespaces {
				c := p.coverage(id, ns)
				for _, name := range names {
					allowed := p.Allowed(id, ns+"/"+name, Pull)
					if (c == catalog.CoversAll || every == catalog.CoversAll) && !allowed || c == catalog.CoversNone && allowed {
						t.Fatalf("rules %+v, %+v: coverage of %s is %d (everything %d), but Decide(%s/%s) = %v",
							cfg.Rules, id, ns, c, every, ns, name, allowed)
					}
					checked++
				}
			}
		}
	}
	t.Logf("%d decisions checked", checked)
}

func TestGlobCoverage(t *testing.T) {
	for _, tc := range []struct {
		glob, ns string
		want     catalog.Coverage
	}{
		{"a/*", "a", catalog.CoversAll},
		{"a/*", "b", catalog.CoversNone},
		{"a/*", "ab", catalog.CoversNone},
		{"a*/*", "ab", catalog.CoversAll},
		{"a/x*", "a", catalog.CoversSome},
		{"*/*", "", catalog.CoversAll},
		{"a/*", "", catalog.CoversSome},
		{"a/*/*", "a", catalog.CoversNone},
		{"a", "a", catalog.CoversNone},
		{"[ab]/*", "c", catalog.CoversSome},
		{`a/\x`, "a", catalog.CoversSome},
	} {
		if got := globCoverage(tc.glob, tc.ns); got != tc.want {
			t.Errorf("globCoverage(%q, %q) = %d, want %d", tc.glob, tc.ns, got, tc.want)
		}
	}
}
