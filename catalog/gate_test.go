package catalog_test

import (
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/berth-registry/berth/catalog"
	"github.com/berth-registry/berth/permissions"
	"github.com/berth-registry/berth/pkgformat"
)

// TestPermissionGate pushes a real operator whose 5.3.0 asks for more than
// its predecessor in its channel, 1.0.1: refused in the gated namespace until exactly its
// permissions are approved, admitted in another.
func TestPermissionGate(t *testing.T) {
	e := newEnv(t, envOptions{gated: "gated"})
	versions := loadRepository(t, "olm-community/aqua")
	var wider *pkgformat.Package
	for _, p := range versions {
		if p.Metadata.Version == "5.3.0" {
			wider = p
			break
		}
		e.pushPackage("gated", p) // 0.0.1 to 1.0.2 ask for the same
	}
	if wider == nil {
		t.Fatal("no aqua 5.3.0 in the fixtures")
	}
	e.waitFor("the versions before 5.3.0", func() bool {
		p, err := e.cat.Package(e.ctx, all, "gated", "aqua")
		return err == nil && p.LatestVersion == "1.0.2"
	})

	_, err := e.tryPushPackage("gated", wider)
	if err == nil {
		t.Fatal("5.3.0, which widens the permissions of 1.0.2, was tagged without an approval")
	}
	fp := permissions.Fingerprint(wider.Metadata.Permissions)
	for _, want := range []string{
		"403: denied: gated/aqua:5.3.0 asks for permissions that 1.0.1, its predecessor in channel 5.3.0, does not have",
		"(adds * *.route.openshift.io (cluster), ", "use securitycontextconstraints.security.openshift.io/privileged (cluster))",
		"namespace gated refuses that without an approval",
		"berth approve gated/aqua:5.3.0 --permissions " + fp,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal %q does not say %q", err, want)
		}
	}
	if got := regexp.MustCompile(`sha256:[0-9a-f]{64}`).FindString(err.Error()); got != fp {
		t.Errorf("refusal names permissions %s, want %s", got, fp)
	}
	if _, err := e.cat.Version(e.ctx, all, "gated", "aqua", "5.3.0"); !errors.Is(err, catalog.ErrNotFound) {
		t.Errorf("the refused version is served: %v", err)
	}

	// An approval of other permissions (1.0.2's) admits nothing.
	if _, err := e.cat.Approve(e.ctx, "gated", "aqua", "5.3.0", permissions.Fingerprint(versions[0].Metadata.Permissions), "alice"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.tryPushPackage("gated", wider); err == nil {
		t.Fatal("an approval of other permissions admitted 5.3.0")
	}
	for _, bad := range []struct{ ns, name, version, fp, says string }{
		{"gated", "aqua", "5.3.0", "sha256:abc", "want sha256: and 64"},
		{"gated", "aqua", "5.3.0", strings.ToUpper(fp), "want sha256: and 64"},
		{"gated", "aqua", "../../x", fp, "version"},
		{"../gated", "aqua", "5.3.0", fp, "namespace"},
		{"gated", "aqua/../x", "5.3.0", fp, "name"},
	} {
		if _, err := e.cat.Approve(e.ctx, bad.ns, bad.name, bad.version, bad.fp, "alice"); !errors.Is(err, catalog.ErrInvalid) || !strings.Contains(err.Error(), bad.says) {
			t.Errorf("Approve(%q, %q, %q, %q): %v, want ErrInvalid saying %q", bad.ns, bad.name, bad.version, bad.fp, err, bad.says)
		}
	}

	a, err := e.cat.Approve(e.ctx, "gated", "aqua", "5.3.0", fp, "alice")
	if err != nil || a.By != "alice" || a.Permissions != fp || a.Version != "5.3.0" {
		t.Fatalf("Approve = %+v, %v", a, err)
	}
	e.pushPackage("gated", wider)
	e.waitFor("5.3.0 approved and indexed", func() bool {
		_, err := e.cat.Version(e.ctx, all, "gated", "aqua", "5.3.0")
		return err == nil
	})

	// Elsewhere, no gate.
	for _, p := range versions {
		e.pushPackage("open", p)
		if p == wider {
			break
		}
	}
}
