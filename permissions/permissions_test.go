package permissions

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/berth-registry/berth/pkgformat"
)

var update = flag.Bool("update", false, "rewrite testdata/fixtures.golden")

func rule(groups, resources, verbs []string) pkgformat.PolicyRule {
	return pkgformat.PolicyRule{APIGroups: groups, Resources: resources, Verbs: verbs}
}

func strs(s ...string) []string { return s }

func TestRatings(t *testing.T) {
	for _, tc := range []struct {
		name    string
		perms   *pkgformat.Permissions
		want    Rating
		finding string // a finding that must be there, "" for none
	}{
		{"nothing", nil, None, ""},
		{"empty", &pkgformat.Permissions{}, None, ""},
		{"read pods", &pkgformat.Permissions{Namespaced: []pkgformat.PolicyRule{rule(strs(""), strs("pods"), strs("get", "list"))}}, Low, ""},
		{"write deployments here", &pkgformat.Permissions{Namespaced: []pkgformat.PolicyRule{rule(strs("apps"), strs("deployments"), strs("create", "delete"))}}, Medium, "in its namespace"},
		{"read everywhere", &pkgformat.Permissions{Cluster: []pkgformat.PolicyRule{rule(strs(""), strs("pods"), strs("list"))}}, Medium, "may read pods across the cluster"},
		{"write everywhere", &pkgformat.Permissions{Cluster: []pkgformat.PolicyRule{rule(strs("apps"), strs("deployments"), strs("patch"))}}, High, "deployments across the cluster"},
		{"secrets", &pkgformat.Permissions{Namespaced: []pkgformat.PolicyRule{rule(strs(""), strs("secrets"), strs("get"))}}, High, "may read Secrets in its namespace"},
		{"secrets, no apiGroups", &pkgformat.Permissions{Namespaced: []pkgformat.PolicyRule{{Resources: strs("secrets"), Verbs: strs("watch")}}}, High, "may read Secrets"},
		{"secrets of another group", &pkgformat.Permissions{Namespaced: []pkgformat.PolicyRule{rule(strs("example.com"), strs("secrets"), strs("get"))}}, Low, ""},
		{"wildcard verb", &pkgformat.Permissions{Namespaced: []pkgformat.PolicyRule{rule(strs("apps"), strs("deployments"), strs("*"))}}, High, "wildcard verb"},
		{"wildcard resource", &pkgformat.Permissions{Namespaced: []pkgformat.PolicyRule{rule(strs("apps"), strs("*"), strs("get"))}}, High, "wildcard resource"},
		{"everything", &pkgformat.Permissions{Cluster: []pkgformat.PolicyRule{rule(strs("*"), strs("*"), strs("*"))}}, Critical, "may do anything to any resource across the cluster"},
		{"bind", &pkgformat.Permissions{Namespaced: []pkgformat.PolicyRule{rule(strs("rbac.authorization.k8s.io"), strs("roles"), strs("bind"))}}, Critical, "may bind"},
		{"escalate", &pkgformat.Permissions{Cluster: []pkgformat.PolicyRule{rule(strs("rbac.authorization.k8s.io"), strs("clusterroles"), strs("escalate"))}}, Critical, "may escalate"},
		{"impersonate", &pkgformat.Permissions{Cluster: []pkgformat.PolicyRule{rule(strs(""), strs("users", "groups"), strs("impersonate"))}}, Critical, "may impersonate"},
		{"rbac writes", &pkgformat.Permissions{Namespaced: []pkgformat.PolicyRule{rule(strs("rbac.authorization.k8s.io"), strs("rolebindings"), strs("create"))}}, Critical, "may write RBAC roles or bindings"},
		{"exec", &pkgformat.Permissions{Namespaced: []pkgformat.PolicyRule{rule(strs(""), strs("pods/exec"), strs("create"))}}, High, "may run commands in pods"},
		{"no verbs", &pkgformat.Permissions{Cluster: []pkgformat.PolicyRule{rule(strs("*"), strs("*"), nil)}}, Low, ""},
		{"use a privileged SCC", &pkgformat.Permissions{Cluster: []pkgformat.PolicyRule{{APIGroups: strs("security.openshift.io"), Resources: strs("securitycontextconstraints"), ResourceNames: strs("privileged"), Verbs: strs("use")}}}, High, "may run pods under the security policies privileged"},
		{"use a PSP", &pkgformat.Permissions{Namespaced: []pkgformat.PolicyRule{rule(strs("policy"), strs("podsecuritypolicies"), strs("use"))}}, High, "security policies any"},
		{"non-resource URL", &pkgformat.Permissions{Cluster: []pkgformat.PolicyRule{{NonResourceURLs: strs("/metrics"), Verbs: strs("get")}}}, Low, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := Of(tc.perms)
			if r.Rating != tc.want {
				t.Errorf("rating %s, want %s (findings %+v)", r.Rating, tc.want, r.Findings)
			}
			if tc.finding != "" && !slices.ContainsFunc(r.Findings, func(f Finding) bool { return strings.Contains(f.Text, tc.finding) }) {
				t.Errorf("no finding says %q: %+v", tc.finding, r.Findings)
			}
			if tc.finding == "" && r.Rating <= Low && len(r.Findings) > 0 {
				t.Errorf("findings %+v for a %s rating", r.Findings, r.Rating)
			}
			if tc.perms != nil && len(r.Rules) != len(tc.perms.Namespaced)+len(tc.perms.Cluster) {
				t.Errorf("%d rules reviewed", len(r.Rules))
			}
		})
	}
}

func TestHostileRulesAreSummarisedShort(t *testing.T) {
	many := make([]string, 10_000)
	for i := range many {
		many[i] = fmt.Sprintf("r%d", i)
	}
	r := Of(&pkgformat.Permissions{Cluster: []pkgformat.PolicyRule{rule(strs("<script>"), many, strs("get"))}})
	if text := r.Rules[0].Text; len(text) > 300 || !strings.Contains(text, "and 9992 more") {
		t.Errorf("summary of 10,000 resources: %d bytes: %.100s", len(text), text)
	}
}

func TestDiff(t *testing.T) {
	base := &pkgformat.Permissions{
		Namespaced: []pkgformat.PolicyRule{rule(strs("apps"), strs("deployments"), strs("get", "list"))},
		Cluster:    []pkgformat.PolicyRule{rule(strs(""), strs("configmaps"), strs("*"))},
	}
	for _, tc := range []struct {
		name           string
		to             *pkgformat.Permissions
		added, removed []string
		widens, rating bool
	}{
		{"same", base, nil, nil, false, false},
		{"a verb more", &pkgformat.Permissions{
			Namespaced: []pkgformat.PolicyRule{rule(strs("apps"), strs("deployments"), strs("get", "list", "delete"))},
			Cluster:    base.Cluster,
		}, []string{"delete deployments.apps (namespace)"}, nil, true, false},
		{"covered by the old wildcard and scope", &pkgformat.Permissions{
			Namespaced: append(slices.Clone(base.Namespaced), rule(strs(""), strs("configmaps"), strs("update"))),
			Cluster:    base.Cluster,
		}, nil, nil, false, false},
		{"secrets added", &pkgformat.Permissions{
			Namespaced: append(slices.Clone(base.Namespaced), rule(strs(""), strs("secrets"), strs("get"))),
			Cluster:    base.Cluster,
		}, []string{"get secrets (namespace)"}, nil, true, false},
		{"narrowed", &pkgformat.Permissions{Namespaced: base.Namespaced}, nil, []string{"* configmaps (cluster)"}, false, false},
		{"rating widens", &pkgformat.Permissions{
			Namespaced: base.Namespaced,
			Cluster:    append(slices.Clone(base.Cluster), rule(strs("rbac.authorization.k8s.io"), strs("clusterrolebindings"), strs("create"))),
		}, []string{"create clusterrolebindings.rbac.authorization.k8s.io (cluster)"}, nil, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Diff(base, tc.to)
			if err != nil {
				t.Fatal(err)
			}
			if got := names(c.Added); !slices.Equal(got, tc.added) {
				t.Errorf("added %v, want %v", got, tc.added)
			}
			if got := names(c.Removed); !slices.Equal(got, tc.removed) {
				t.Errorf("removed %v, want %v", got, tc.removed)
			}
			if c.Widens != tc.widens {
				t.Errorf("widens %v, want %v", c.Widens, tc.widens)
			}
			if c.RatingWidens != tc.rating {
				t.Errorf("rating %s -> %s: widens %v, want %v", c.From, c.To, c.RatingWidens, tc.rating)
			}
		})
	}
}

func TestDiffRefusesWhatIsTooBroad(t *testing.T) {
	many := make([]string, 400)
	for i := range many {
		many[i] = fmt.Sprintf("x%d", i)
	}
	huge := &pkgformat.Permissions{Cluster: []pkgformat.PolicyRule{{APIGroups: many, Resources: many, Verbs: strs("get")}}}
	if _, err := Diff(nil, huge); !errors.Is(err, ErrTooBroad) {
		t.Fatalf("Diff of 160,000 grants: %v, want ErrTooBroad", err)
	}
	// Just under the bound it compares, in linear work.
	wide := &pkgformat.Permissions{Cluster: []pkgformat.PolicyRule{{APIGroups: many[:250], Resources: many, Verbs: strs("get")}}}
	c, err := Diff(wide, wide)
	if err != nil || len(c.Added) != 0 || len(c.Removed) != 0 {
		t.Fatalf("Diff of 100,000 grants with itself: %v, %d added", err, len(c.Added))
	}
}

func names(gs []Grant) []string {
	var out []string
	for _, g := range gs {
		out = append(out, g.String())
	}
	return out
}

// TestFixtures reviews every version of every fixture, and each upgrade of
// an OLM package to its next version, against testdata/fixtures.golden
// (go test ./permissions -update rewrites it).
func TestFixtures(t *testing.T) {
	root := filepath.Join("..", "..", "shared", "fixtures")
	var b strings.Builder
	for _, format := range []string{"kudo", "olm-community"} {
		pkgs, err := os.ReadDir(filepath.Join(root, format))
		if err != nil {
			t.Fatal(err)
		}
		for _, pkg := range pkgs {
			if !pkg.IsDir() {
				continue
			}
			dirs, err := os.ReadDir(filepath.Join(root, format, pkg.Name()))
			if err != nil {
				t.Fatal(err)
			}
			type version struct {
				name string
				perm *pkgformat.Permissions
			}
			var versions []version
			for _, d := range dirs {
				if !d.IsDir() {
					continue
				}
				p, err := pkgformat.Load(filepath.Join(root, format, pkg.Name(), d.Name()), pkgformat.Options{Name: pkg.Name()})
				if err != nil {
					t.Fatalf("%s/%s/%s: %v", format, pkg.Name(), d.Name(), err)
				}
				versions = append(versions, version{p.Metadata.Version, p.Metadata.Permissions})
			}
			slices.SortFunc(versions, func(a, b version) int {
				return strings.Compare(pkgformat.VersionKey(a.name), pkgformat.VersionKey(b.name))
			})
			previous := ""
			for i, v := range versions {
				r := Of(v.perm)
				var findings strings.Builder
				for _, f := range r.Findings {
					fmt.Fprintf(&findings, "\t%s: %s\n", f.Rating, f.Text)
				}
				fmt.Fprintf(&b, "%s/%s:%s %s, %d rules\n", format, pkg.Name(), v.name, r.Rating, len(r.Rules))
				if findings.String() == previous && previous != "" {
					fmt.Fprintf(&b, "\tthe findings of %s\n", versions[i-1].name)
				} else {
					b.WriteString(findings.String())
				}
				previous = findings.String()
				if i == 0 {
					continue
				}
				c, err := Diff(versions[i-1].perm, v.perm)
				if err != nil {
					fmt.Fprintf(&b, "\tfrom %s: %v\n", versions[i-1].name, err)
					continue
				}
				if len(c.Added)+len(c.Removed) > 0 {
					fmt.Fprintf(&b, "\tfrom %s: %d added, %d removed, widens %v, rating %s -> %s\n",
						versions[i-1].name, len(c.Added), len(c.Removed), c.Widens, c.From, c.To)
				}
			}
		}
	}
	golden := filepath.Join("testdata", "fixtures.golden")
	if *update {
		if err := os.WriteFile(golden, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if b.String() != string(want) {
		t.Errorf("the review of the fixtures differs from %s (go test ./permissions -update rewrites it)", golden)
	}
}

func TestComparerWidens(t *testing.T) {
	readPods := &pkgformat.Permissions{Namespaced: []pkgformat.PolicyRule{rule(strs(""), strs("pods"), strs("get", "list"))}}
	readAll := &pkgformat.Permissions{Cluster: []pkgformat.PolicyRule{rule(strs("*"), strs("*"), strs("get", "list"))}}
	huge := &pkgformat.Permissions{Cluster: []pkgformat.PolicyRule{rule(strs(""), manyStrs("r", 400), manyStrs("v", 400))}}
	for _, tc := range []struct {
		name     string
		from, to *pkgformat.Permissions
		budget   int
		want     bool
	}{
		{"same", readPods, readPods, MaxGrants, false},
		{"none to none", nil, &pkgformat.Permissions{}, MaxGrants, false},
		{"adds", nil, readPods, MaxGrants, true},
		{"removes", readPods, nil, MaxGrants, false},
		{"covered by a wildcard across the cluster", readAll, readPods, MaxGrants, false},
		{"wider", readPods, readAll, MaxGrants, true},
		{"too broad to tell is widening", readPods, huge, MaxGrants, true},
		{"the same too broad set is not", huge, huge, MaxGrants, false},
		{"past the budget is widening", readAll, readPods, 3, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := NewComparer(tc.budget).Widens(tc.from, tc.to); got != tc.want {
				t.Errorf("Widens = %v, want %v", got, tc.want)
			}
			if tc.budget == MaxGrants && tc.to != huge {
				c, err := Diff(tc.from, tc.to)
				if err != nil || c.Widens != tc.want {
					t.Errorf("Diff says widens %v (%v); the Comparer %v", c.Widens, err, tc.want)
				}
			}
		})
	}
}

func manyStrs(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%d", prefix, i)
	}
	return out
}
