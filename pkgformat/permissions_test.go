package pkgformat

import "testing"

func TestPermissionWarning(t *testing.T) {
	rule := func(groups, resources, verbs []string) PolicyRule {
		return PolicyRule{APIGroups: groups, Resources: resources, Verbs: verbs}
	}
	core := []string{""}
	for _, tc := range []struct {
		name    string
		rule    PolicyRule
		cluster bool
		want    string
	}{
		{"read config maps", rule(core, []string{"configmaps"}, []string{"get", "list", "watch"}), true, ""},
		{"manage deployments", rule([]string{"apps"}, []string{"deployments"}, []string{"create", "update", "delete"}), false, ""},
		{"wildcard verbs", rule([]string{"apps"}, []string{"deployments"}, []string{"*"}), false, "wildcard verbs"},
		{"wildcard resources", rule([]string{"apps"}, []string{"*"}, []string{"get"}), false, "wildcard resources"},
		{"wildcard subresource owner", rule(core, []string{"*/scale"}, []string{"update"}), false, "wildcard resources"},
		{"a subresource is no wildcard", rule(core, []string{"pods/*"}, []string{"get"}), false, ""},
		{"everything", rule([]string{"*"}, []string{"*"}, []string{"*"}), true, "wildcard verbs; wildcard resources"},
		{"wildcard non-resource URLs", PolicyRule{NonResourceURLs: []string{"*"}, Verbs: []string{"get"}}, true, "wildcard non-resource URLs"},
		{"health URL", PolicyRule{NonResourceURLs: []string{"/healthz"}, Verbs: []string{"get"}}, true, ""},
		{"read secrets", rule(core, []string{"secrets"}, []string{"get"}), false, "access to secrets"},
		{"one named secret", PolicyRule{APIGroups: core, Resources: []string{"secrets"}, ResourceNames: []string{"tls"}, Verbs: []string{"get"}}, false, "access to secrets"},
		{"bind cluster-wide", rule([]string{"rbac.authorization.k8s.io"}, []string{"clusterroles"}, []string{"bind", "escalate"}), true, "cluster-wide privilege escalation (bind, escalate)"},
		{"impersonate cluster-wide", rule(core, []string{"users", "groups", "serviceaccounts"}, []string{"impersonate"}), true, "cluster-wide privilege escalation (impersonate)"},
		{"bind in a namespace", rule([]string{"rbac.authorization.k8s.io"}, []string{"roles"}, []string{"bind"}), false, ""},
		{"all at once", rule([]string{"*"}, []string{"secrets", "*"}, []string{"*", "impersonate"}), true, "wildcard verbs; wildcard resources; access to secrets; cluster-wide privilege escalation (impersonate)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := PermissionWarning(tc.rule, tc.cluster); got != tc.want {
				t.Errorf("PermissionWarning(%+v, %v) = %q, want %q", tc.rule, tc.cluster, got, tc.want)
			}
		})
	}
}
