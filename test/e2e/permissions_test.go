package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/berth-registry/berth/catalog/apiv1"
)

// TestPermissionGateWithTheCLI runs berth serve with a namespace that
// refuses versions widening their predecessor's permissions, and goes
// through what a publisher and an administrator do: the push refused with
// the rules named, berth permissions --from, berth approve, the push again.
func TestPermissionGateWithTheCLI(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "berth.yaml")
	if err := os.WriteFile(cfg, []byte("namespaces:\n  - name: gated\n    refuseWideningPermissions: true\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, "", "--config", cfg)
	aqua := func(v string) string { return filepath.Join(fixtures, "olm-community", "aqua", v) }
	berth(t, "", "push", aqua("1.0.1"), s.addr+"/gated/aqua")
	berth(t, "", "push", aqua("1.0.1"), s.addr+"/open/aqua")
	berth(t, "", "push", aqua("5.3.0"), s.addr+"/open/aqua") // no gate there

	refused := run(t, "", berthBin, "push", aqua("5.3.0"), s.addr+"/gated/aqua")
	if refused.code == 0 {
		t.Fatalf("a push widening the permissions was admitted:\n%s", refused.stdout)
	}
	for _, want := range []string{"gated/aqua:5.3.0 asks for permissions that 1.0.1", "use securitycontextconstraints.security.openshift.io/privileged (cluster)", "berth approve gated/aqua:5.3.0 --permissions sha256:"} {
		if !strings.Contains(refused.stderr, want) {
			t.Errorf("the refusal does not say %q:\n%s", want, refused.stderr)
		}
	}
	fp := regexp.MustCompile(`sha256:[0-9a-f]{64}`).FindString(refused.stderr[strings.Index(refused.stderr, "--permissions"):])

	waitUntil(t, s, "open/aqua 5.3.0 indexed", func() bool {
		var v apiv1.Version
		return getJSON(t, s, "/api/v1/packages/open/aqua/versions/5.3.0", &v) == 200
	})
	review := berth(t, "", "permissions", "open/aqua:5.3.0", "--from", "1.0.1", "--server", s.addr).stdout
	for _, want := range []string{"Rating:  critical", "From 1.0.1: the upgrade WIDENS the permissions", "Added (7):", "use securitycontextconstraints.security.openshift.io/privileged (cluster)"} {
		if !strings.Contains(review, want) {
			t.Errorf("berth permissions --from does not say %q:\n%s", want, review)
		}
	}

	approved := berth(t, "", "approve", "gated/aqua:5.3.0", "--permissions", fp, "--server", s.addr).stdout
	if !strings.Contains(approved, "Approved gated/aqua:5.3.0 with permissions "+fp) {
		t.Errorf("approve said %q", approved)
	}
	berth(t, "", "push", aqua("5.3.0"), s.addr+"/gated/aqua")
	waitUntil(t, s, "gated/aqua 5.3.0 indexed", func() bool {
		var v apiv1.Version
		return getJSON(t, s, "/api/v1/packages/gated/aqua/versions/5.3.0", &v) == 200
	})
}
