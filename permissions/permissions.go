// Package permissions reviews the RBAC a package version asks for
// (pkgformat.Permissions: OLM's permissions and clusterPermissions, the
// Roles and ClusterRoles of KUDO and plain packages): a plain-language
// summary of each rule, the findings a cluster admin should weigh (wildcards,
// Secrets, writes in every namespace, bind/escalate/impersonate, RBAC
// writes, exec), and a worst-case rating, as Flathub rates an app's
// permissions. Diff compares two versions' rules, so that an upgrade that
// widens what an operator may do can be told before it is installed.
//
// The work is bounded by the rules, not by what they expand to: a rule's
// grants (scope × group × resource × name × verb) are only expanded up to
// MaxGrants, beyond which a version is rated as too broad to itemise.
package permissions

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/berth-registry/berth/pkgformat"
)

// Rating is how much a version's permissions allow, worst case.
type Rating int

// Ratings, in increasing order.
const (
	// None: no RBAC rules.
	None Rating = iota
	// Low: reads of ordinary resources.
	Low
	// Medium: writes in the operator's own namespace, or reads in every
	// namespace.
	Medium
	// High: Secrets, wildcards, writes in every namespace, exec into pods.
	High
	// Critical: ways to gain more permissions than granted (bind,
	// escalate, impersonate, writes to RBAC itself), or everything on
	// everything.
	Critical
)

// DefaultMaxUnapproved is the highest rating a namespace that refuses
// widening permissions admits, by default, for the first version of a
// package without an approval: what an operator confined to its own
// namespace, or reading across the cluster, asks for (docs/permissions.md).
const DefaultMaxUnapproved = Medium

var ratingNames = [...]string{"none", "low", "medium", "high", "critical"}

func (r Rating) String() string { return ratingNames[r] }

// MarshalText writes the rating's name.
func (r Rating) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

// UnmarshalText reads a rating's name.
func (r *Rating) UnmarshalText(b []byte) error {
	i := slices.Index(ratingNames[:], string(b))
	if i < 0 {
		return fmt.Errorf("unknown permissions rating %q: want one of %s", b, strings.Join(ratingNames[:], ", "))
	}
	*r = Rating(i)
	return nil
}

// Scopes of a rule.
const (
	// Namespace: a Role's rule, or an OLM permission: the operator's own
	// namespace (or the namespaces it is installed to watch).
	Namespace = "namespace"
	// Cluster: a ClusterRole's rule, or an OLM clusterPermission: across
	// the cluster, every namespace and cluster-scoped resources.
	Cluster = "cluster"
)

// Finding is one thing about a rule that raises the rating.
type Finding struct {
	Rating Rating `json:"rating"`
	// Text says it in plain language.
	Text string `json:"text"`
	// Rule is the index of the rule in Review.Rules.
	Rule int `json:"rule"`
}

// Rule is one RBAC rule with its scope and its plain-language summary.
type Rule struct {
	Scope string               `json:"scope"`
	Rule  pkgformat.PolicyRule `json:"rule"`
	Text  string               `json:"text"`
}

// Review is what a version's permissions allow.
type Review struct {
	Rating   Rating    `json:"rating"`
	Rules    []Rule    `json:"rules"`
	Findings []Finding `json:"findings"`
}

// Of reviews p; nil p is no permissions.
func Of(p *pkgformat.Permissions) *Review {
	r := &Review{Rules: []Rule{}, Findings: []Finding{}}
	if p == nil {
		return r
	}
	add := func(scope string, rules []pkgformat.PolicyRule) {
		for _, rule := range rules {
			i := len(r.Rules)
			r.Rules = append(r.Rules, Rule{Scope: scope, Rule: rule, Text: describe(scope, rule)})
			for _, f := range judge(scope, rule) {
				f.Rule = i
				r.Findings = append(r.Findings, f)
			}
		}
	}
	add(Namespace, p.Namespaced)
	add(Cluster, p.Cluster)
	if len(r.Rules) > 0 {
		r.Rating = Low
	}
	for _, f := range r.Findings {
		r.Rating = max(r.Rating, f.Rating)
	}
	slices.SortStableFunc(r.Findings, func(a, b Finding) int { return cmp.Compare(b.Rating, a.Rating) })
	return r
}

// verbs that change what they are granted on.
var writeVerbs = []string{"create", "update", "patch", "delete", "deletecollection", "*"}

// readVerbs that reveal what they are granted on.
var readVerbs = []string{"get", "list", "watch", "*"}

// judge returns what in rule raises the rating.
func judge(scope string, rule pkgformat.PolicyRule) []Finding {
	if len(rule.Verbs) == 0 {
		return nil // grants nothing
	}
	var out []Finding
	where := "in its namespace"
	if scope == Cluster {
		where = "across the cluster"
	}
	anyVerb, anyResource, anyGroup := has(rule.Verbs, "*"), has(rule.Resources, "*"), has(rule.APIGroups, "*")
	writes := hasAny(rule.Verbs, writeVerbs)
	switch {
	case anyVerb && anyResource && (anyGroup || len(rule.APIGroups) == 0 && len(rule.Resources) > 0):
		return []Finding{{Rating: Critical, Text: "may do anything to any resource " + where}} // says it all
	case anyVerb:
		out = append(out, Finding{Rating: High, Text: "wildcard verb: may do anything to " + resources(rule.Resources) + ofGroups(rule) + " " + where})
	case anyResource || anyGroup:
		out = append(out, Finding{Rating: High, Text: "wildcard resource: may " + list(rule.Verbs) + " any resource of " + groups(rule.APIGroups) + " " + where})
	}
	for _, v := range []string{"bind", "escalate", "impersonate"} {
		if has(rule.Verbs, v) {
			out = append(out, Finding{Rating: Critical, Text: fmt.Sprintf("may %s: can gain permissions beyond these rules", v)})
		}
	}
	if writes && inGroup(rule, "rbac.authorization.k8s.io") && hasAny(rule.Resources, []string{"roles", "clusterroles", "rolebindings", "clusterrolebindings", "*"}) {
		out = append(out, Finding{Rating: Critical, Text: "may write RBAC roles or bindings " + where + ": can grant itself more"})
	}
	if inGroup(rule, "") && hasAny(rule.Resources, []string{"secrets", "*"}) && hasAny(rule.Verbs, readVerbs) {
		out = append(out, Finding{Rating: High, Text: "may read Secrets " + where})
	}
	if inGroup(rule, "") && hasAny(rule.Resources, []string{"pods/exec", "pods/attach", "nodes/proxy", "*"}) && hasAny(rule.Verbs, []string{"create", "get", "*"}) {
		out = append(out, Finding{Rating: High, Text: "may run commands in pods or reach nodes " + where})
	}
	if hasAny(rule.Verbs, []string{"use", "*"}) && hasAny(rule.Resources, []string{"securitycontextconstraints", "podsecuritypolicies"}) {
		what := list(rule.ResourceNames)
		if len(rule.ResourceNames) == 0 {
			what = "any"
		}
		out = append(out, Finding{Rating: High, Text: "may run pods under the security policies " + what + " (securitycontextconstraints, podsecuritypolicies): with a privileged one, as root on the node"})
	}
	// What the rule does in its scope, unless a finding above already
	// rates it as high or higher.
	var general Finding
	switch {
	case anyVerb: // said above
	case scope == Cluster && writes:
		general = Finding{Rating: High, Text: "may " + list(rule.Verbs) + " " + resources(rule.Resources) + " across the cluster"}
	case writes:
		general = Finding{Rating: Medium, Text: "may " + list(rule.Verbs) + " " + resources(rule.Resources) + " in its namespace"}
	case scope == Cluster && len(rule.NonResourceURLs) == 0 && hasAny(rule.Verbs, readVerbs):
		general = Finding{Rating: Medium, Text: "may read " + resources(rule.Resources) + " across the cluster"}
	}
	if general.Text != "" && !slices.ContainsFunc(out, func(f Finding) bool { return f.Rating >= general.Rating }) {
		out = append(out, general)
	}
	return out
}

// describe says what rule grants, in plain language.
func describe(scope string, rule pkgformat.PolicyRule) string {
	var b strings.Builder
	switch {
	case len(rule.Verbs) == 0:
		b.WriteString("no verb (grants nothing) on")
	case has(rule.Verbs, "*"):
		b.WriteString("anything on")
	default:
		b.WriteString(list(rule.Verbs))
	}
	if len(rule.NonResourceURLs) > 0 {
		b.WriteString(" the URLs " + list(rule.NonResourceURLs))
	} else {
		b.WriteString(" " + resources(rule.Resources) + ofGroups(rule))
		if len(rule.ResourceNames) > 0 {
			b.WriteString(" named " + list(rule.ResourceNames))
		}
	}
	if scope == Cluster {
		b.WriteString(", across the cluster")
	} else {
		b.WriteString(", in its namespace")
	}
	return b.String()
}

// maxListed bounds the items list prints of one field.
const maxListed = 8

// list prints items, "*" as "any", shortened after maxListed.
func list(items []string) string {
	if len(items) == 0 {
		return "nothing"
	}
	shown := make([]string, 0, min(len(items), maxListed))
	for _, it := range items[:min(len(items), maxListed)] {
		if it == "*" {
			it = "any"
		}
		shown = append(shown, it)
	}
	s := strings.Join(shown, ", ")
	if len(items) > maxListed {
		s += fmt.Sprintf(" and %d more", len(items)-maxListed)
	}
	return s
}

// resources prints resources: "every resource" when one is "*", which
// covers the others.
func resources(items []string) string {
	if has(items, "*") {
		return "every resource"
	}
	return list(items)
}

// ofGroups says which API groups a rule's resources are of, "" for the
// core group alone.
func ofGroups(rule pkgformat.PolicyRule) string {
	if len(rule.APIGroups) == 0 || len(rule.APIGroups) == 1 && rule.APIGroups[0] == "" {
		return ""
	}
	return " of " + groups(rule.APIGroups)
}

// groups prints API groups, "" as "the core group".
func groups(gs []string) string {
	out := make([]string, len(gs))
	for i, g := range gs {
		if g == "" {
			g = "the core group"
		}
		out[i] = g
	}
	return list(out)
}

func has(items []string, s string) bool { return slices.Contains(items, s) }

func hasAny(items, any []string) bool {
	for _, s := range any {
		if has(items, s) {
			return true
		}
	}
	return false
}

// inGroup reports whether rule applies to API group g (an OLM or RBAC rule
// with no apiGroups is of the core group).
func inGroup(rule pkgformat.PolicyRule, g string) bool {
	if len(rule.APIGroups) == 0 {
		return g == ""
	}
	return has(rule.APIGroups, g) || has(rule.APIGroups, "*")
}
