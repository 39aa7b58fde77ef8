package pkgformat

import (
	"slices"
	"strings"
)

// escalationVerbs are the RBAC verbs that let a subject grant itself more
// than it has: bind and escalate on roles, impersonate on users, groups and
// service accounts.
var escalationVerbs = []string{"bind", "escalate", "impersonate"}

// PermissionWarning judges one RBAC rule a package asks for, cluster-wide
// (cluster) or in its namespace, and returns why a reviewer should look at
// it as one line ("wildcard verbs; access to secrets"), or "" when nothing
// stands out. It flags:
//   - wildcard verbs ("*");
//   - wildcard resources ("*", "*/subresource") or non-resource URLs ("*");
//   - access to secrets, whatever the verbs;
//   - the escalation verbs bind, escalate and impersonate in a cluster rule.
//
// It is the one judgement of permissions, shared by every surface that
// shows them.
func PermissionWarning(rule PolicyRule, cluster bool) string {
	var why []string
	if slices.Contains(rule.Verbs, "*") {
		why = append(why, "wildcard verbs")
	}
	if slices.ContainsFunc(rule.Resources, func(r string) bool { return r == "*" || strings.HasPrefix(r, "*/") }) {
		why = append(why, "wildcard resources")
	}
	if slices.Contains(rule.NonResourceURLs, "*") {
		why = append(why, "wildcard non-resource URLs")
	}
	if slices.ContainsFunc(rule.Resources, func(r string) bool { return r == "secrets" || strings.HasPrefix(r, "secrets/") }) {
		why = append(why, "access to secrets")
	}
	if cluster {
		var esc []string
		for _, v := range escalationVerbs {
			if slices.Contains(rule.Verbs, v) {
				esc = append(esc, v)
			}
		}
		if len(esc) > 0 {
			why = append(why, "cluster-wide privilege escalation ("+strings.Join(esc, ", ")+")")
		}
	}
	return strings.Join(why, "; ")
}
