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
// refuses versions asking for more than it admitted for their package
// name, and goes through what a publisher and an administrator do: the
// first version, rated critical, refused until approved; a wider version
// refused with the rules named, berth permissions --from, berth approve,
// the push again. Deleting the package first, a low version and one
// replacing it, berth promote, berth mirror sync and berth mirror import
// do not get around it.
func TestPermissionGateWithTheCLI(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "berth.yaml")
	if err := os.WriteFile(cfg, []byte("namespaces:\n  - name: gated\n    refuseWideningPermissions: true\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, "", "--config", cfg)
	aqua := func(v string) string { return filepath.Join(fixtures, "olm-community", "aqua", v) }
	berth(t, "", "push", aqua("1.0.1"), s.addr+"/open/aqua")
	berth(t, "", "push", aqua("5.3.0"), s.addr+"/open/aqua") // no gate there

	first := refused(t, aqua("1.0.1"), s.addr+"/gated/aqua", "gated/aqua:1.0.1 is the first version of gated/aqua the gate of namespace gated meets, and it is rated critical, above medium", "CRITICAL: may write RBAC roles or bindings across the cluster")
	approve(t, s, "gated/aqua:1.0.1", first)
	berth(t, "", "push", aqua("1.0.1"), s.addr+"/gated/aqua")

	fp := refused(t, aqua("5.3.0"), s.addr+"/gated/aqua", "gated/aqua:5.3.0 asks for permissions beyond those namespace gated has admitted for gated/aqua", "use securitycontextconstraints.security.openshift.io/privileged (cluster)")
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

	// Delete first: what the gate admitted for the name outlives it.
	waitUntil(t, s, "gated/aqua 1.0.1 indexed", func() bool {
		var v apiv1.Version
		return getJSON(t, s, "/api/v1/packages/gated/aqua/versions/1.0.1", &v) == 200
	})
	if code := deletePackage(s, "gated/aqua"); code != 200 {
		t.Fatalf("DELETE gated/aqua: %d", code)
	}
	refused(t, aqua("6.2.0"), s.addr+"/gated/aqua", "gated/aqua:6.2.0 asks for permissions beyond those namespace gated has admitted for gated/aqua")

	approve(t, s, "gated/aqua:5.3.0", fp)
	berth(t, "", "push", aqua("5.3.0"), s.addr+"/gated/aqua")
	waitUntil(t, s, "gated/aqua 5.3.0 indexed", func() bool {
		var v apiv1.Version
		return getJSON(t, s, "/api/v1/packages/gated/aqua/versions/5.3.0", &v) == 200
	})

	// The low-version detour: op 1.0.0 and 1.1.0 read configmaps; 0.0.1
	// asking for everything, and 2.0.0 replacing it, are refused, and 1.1.0
	// stays the head of stable.
	dir := t.TempDir()
	op := func(version, replaces, rules string) string { return opBundle(t, dir, version, replaces, rules) }
	berth(t, "", "push", op("1.0.0", "", narrow), s.addr+"/gated/op") // rated medium: no approval needed
	berth(t, "", "push", op("1.1.0", "1.0.0", narrow), s.addr+"/gated/op")
	refused(t, op("0.0.1", "", everything), s.addr+"/gated/op", "gated/op:0.0.1 asks for permissions beyond those namespace gated has admitted for gated/op (adds * *.* (cluster); rated critical, up from medium)")
	refused(t, op("2.0.0", "0.0.1", everything), s.addr+"/gated/op", "gated/op:2.0.0 asks for permissions beyond those namespace gated has admitted for gated/op")
	waitUntil(t, s, "gated/op 1.1.0 indexed", func() bool {
		var v apiv1.Version
		return getJSON(t, s, "/api/v1/packages/gated/op/versions/1.1.0", &v) == 200
	})
	if up := berth(t, "", "upgrades", "gated/op", "--from", "1.0.0", "--server", s.addr).stdout; !strings.Contains(up, "Head:    1.1.0") {
		t.Errorf("the head of gated/op's channel is not 1.1.0:\n%s", up)
	}

	// berth promote and berth mirror sync tag through the same gate.
	berth(t, "", "push", op("3.0.0", "1.1.0", everything), s.addr+"/open/op")
	if r := run(t, "", berthBin, "promote", s.addr+"/open/op:3.0.0", s.addr+"/gated/op"); r.code == 0 || !strings.Contains(r.stderr, "gated/op:3.0.0 asks for permissions beyond those namespace gated has admitted for gated/op") {
		t.Errorf("promote of a wider version: exit %d\n%s", r.code, r.stderr)
	}
	src := startServer(t, "")
	berth(t, "", "push", op("1.2.0", "1.1.0", narrow), src.addr+"/gated/op")
	berth(t, "", "push", op("4.0.0", "1.2.0", everything), src.addr+"/gated/op")
	synced := berth(t, "", "mirror", "sync", src.addr, s.addr, "--state", filepath.Join(dir, "state.json"), "--namespace", "gated")
	if !strings.Contains(synced.stdout, "Quarantined: gated/op:4.0.0") || !strings.Contains(synced.stdout, "gated/op:4.0.0 asks for permissions beyond those namespace gated has admitted for gated/op") {
		t.Errorf("mirror sync of a wider version:\n%s", synced.stdout)
	}
	waitUntil(t, s, "gated/op 1.2.0 synced and indexed", func() bool {
		var v apiv1.Version
		return getJSON(t, s, "/api/v1/packages/gated/op/versions/1.2.0", &v) == 200
	})
	// An archive carried into the site goes through it too.
	selection := filepath.Join(dir, "selection.yaml")
	if err := os.WriteFile(selection, []byte("packages:\n  - repository: gated/op\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	archive := filepath.Join(dir, "archive")
	berth(t, dir, "mirror", "export", "--images=false", "--source", src.addr, "--selection", selection, "-o", archive)
	imported := run(t, dir, berthBin, "mirror", "import", archive, s.addr)
	if !strings.Contains(imported.stdout, "Quarantined: gated/op:4.0.0") || !strings.Contains(imported.stdout, "gated/op:4.0.0 asks for permissions beyond those namespace gated has admitted for gated/op") {
		t.Errorf("mirror import of a wider version: exit %d\n%s%s", imported.code, imported.stdout, imported.stderr)
	}
	for _, tag := range []string{"3.0.0", "4.0.0"} {
		var v apiv1.Version
		if code := getJSON(t, s, "/api/v1/packages/gated/op/versions/"+tag, &v); code != 404 {
			t.Errorf("gated/op:%s after promote, mirror sync and import: %d, want 404", tag, code)
		}
	}
}

// Rules of op, the operator of opBundle: narrow is rated medium (reads
// across the cluster), everything critical.
const (
	narrow     = `[{apiGroups: [""], resources: [configmaps], verbs: [get]}]`
	everything = `[{apiGroups: ["*"], resources: ["*"], verbs: ["*"]}]`
)

// opBundle writes version of the OLM package op, in channel stable,
// replacing replaces and asking for rules across the cluster, into dir,
// and returns the bundle's folder.
func opBundle(t *testing.T, dir, version, replaces, rules string) string {
	t.Helper()
	csv := "apiVersion: operators.coreos.com/v1alpha1\nkind: ClusterServiceVersion\nmetadata:\n  name: op.v" + version + "\nspec:\n  version: " + version + "\n  displayName: op\n"
	if replaces != "" {
		csv += "  replaces: op.v" + replaces + "\n"
	}
	csv += "  install:\n    strategy: deployment\n    spec:\n      clusterPermissions:\n        - serviceAccountName: op\n          rules: " + rules + "\n"
	bundle := filepath.Join(dir, version)
	for name, body := range map[string]string{
		"manifests/op.v" + version + ".clusterserviceversion.yaml": csv,
		"metadata/annotations.yaml":                                "annotations:\n  operators.operatorframework.io.bundle.package.v1: op\n  operators.operatorframework.io.bundle.channels.v1: stable\n  operators.operatorframework.io.bundle.mediatype.v1: registry+v1\n",
	} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(bundle, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(bundle, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return bundle
}

// refused pushes dir to ref, expects the gate to refuse it saying each of
// says and naming the command that approves it, and returns the
// fingerprint of its rules.
func refused(t *testing.T, dir, ref string, says ...string) string {
	t.Helper()
	r := run(t, "", berthBin, "push", dir, ref)
	if r.code == 0 {
		t.Fatalf("push of %s to %s was admitted:\n%s", dir, ref, r.stdout)
	}
	for _, want := range append(says, "berth approve ") {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("the refusal does not say %q:\n%s", want, r.stderr)
		}
	}
	i := strings.Index(r.stderr, "--permissions")
	if i < 0 {
		t.Fatalf("the refusal names no permissions to approve:\n%s", r.stderr)
	}
	return regexp.MustCompile(`sha256:[0-9a-f]{64}`).FindString(r.stderr[i:])
}

// approve runs berth approve of ref with the rules fp.
func approve(t *testing.T, s *server, ref, fp string) {
	t.Helper()
	if out := berth(t, "", "approve", ref, "--permissions", fp, "--server", s.addr).stdout; !strings.Contains(out, "Approved "+ref+" with permissions "+fp) {
		t.Errorf("approve said %q", out)
	}
}

// TestPermissionGateOnTwoReplicas runs two berth serve processes on one
// PostgreSQL database and one S3 bucket with a gated namespace: what one
// replica admitted for a package name bounds what the other admits, also
// after the package is deleted through the first, and an approval given
// through one admits the push through the other.
func TestPermissionGateOnTwoReplicas(t *testing.T) {
	dir := t.TempDir()
	_, shared := sharedState(t, "gate", dir)
	cfg := filepath.Join(dir, "berth.yaml")
	if err := os.WriteFile(cfg, []byte(shared+"namespaces:\n  - name: gated\n    refuseWideningPermissions: true\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	a := startServer(t, t.TempDir(), "--config", cfg)
	b := startServer(t, t.TempDir(), "--config", cfg)

	berth(t, "", "push", opBundle(t, dir, "1.0.0", "", narrow), a.addr+"/gated/op")
	wider := opBundle(t, dir, "2.0.0", "1.0.0", everything)
	fp := refused(t, wider, b.addr+"/gated/op", "gated/op:2.0.0 asks for permissions beyond those namespace gated has admitted for gated/op")
	waitUntil(t, a, "gated/op 1.0.0 indexed", func() bool {
		var v apiv1.Version
		return getJSON(t, a, "/api/v1/packages/gated/op/versions/1.0.0", &v) == 200
	})
	if code := deletePackage(a, "gated/op"); code != 200 {
		t.Fatalf("DELETE gated/op: %d", code)
	}
	refused(t, opBundle(t, dir, "0.0.1", "", everything), b.addr+"/gated/op", "gated/op:0.0.1 asks for permissions beyond those namespace gated has admitted for gated/op")

	approve(t, a, "gated/op:2.0.0", fp)
	berth(t, "", "push", wider, b.addr+"/gated/op")
	berth(t, "", "push", opBundle(t, dir, "3.0.0", "2.0.0", everything), a.addr+"/gated/op") // within what 2.0.0 brought
}
