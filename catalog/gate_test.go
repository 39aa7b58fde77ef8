package catalog_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/berth-registry/berth/approval"
	"github.com/berth-registry/berth/catalog"
	"github.com/berth-registry/berth/catalog/sqlite"
	"github.com/berth-registry/berth/permissions"
	"github.com/berth-registry/berth/pkgformat"
)

// TestPermissionGate pushes a real operator to a gated namespace: its
// first version, rated above medium, needs an approval; the versions that
// ask for no more are admitted; 5.3.0, which asks for more, is refused
// until exactly its permissions are approved. Elsewhere, no gate.
func TestPermissionGate(t *testing.T) {
	e := newEnv(t, envOptions{gated: "gated"})
	versions := loadRepository(t, "olm-community/aqua")
	first, wider := versions[0], version(t, versions, "5.3.0")
	firstFP := permissions.Fingerprint(first.Metadata.Permissions)

	_, err := e.tryPushPackage("gated", first)
	wantRefusal(t, err, "gated/aqua:"+first.Metadata.Version, firstFP,
		"is the first version of gated/aqua the gate of namespace gated meets, and it is rated "+permissions.Of(first.Metadata.Permissions).Rating.String()+", above medium",
		"(CRITICAL: ")
	if _, err := e.cat.Approve(e.ctx, "gated", "aqua", first.Metadata.Version, firstFP, "alice"); err != nil {
		t.Fatal(err)
	}
	for _, p := range versions {
		if p == wider {
			break
		}
		e.pushPackage("gated", p) // 0.0.1 to 1.0.2 ask for the same
	}
	e.waitFor("the versions before 5.3.0", func() bool {
		p, err := e.cat.Package(e.ctx, all, "gated", "aqua")
		return err == nil && p.LatestVersion == "1.0.2"
	})

	_, err = e.tryPushPackage("gated", wider)
	fp := permissions.Fingerprint(wider.Metadata.Permissions)
	wantRefusal(t, err, "gated/aqua:5.3.0", fp,
		"403: denied: gated/aqua:5.3.0 asks for permissions beyond those namespace gated has admitted for gated/aqua (adds * *.route.openshift.io (cluster), ",
		"use securitycontextconstraints.security.openshift.io/privileged (cluster))",
		"namespace gated refuses that without an approval")
	if _, err := e.cat.Version(e.ctx, all, "gated", "aqua", "5.3.0"); !errors.Is(err, catalog.ErrNotFound) {
		t.Errorf("the refused version is served: %v", err)
	}

	// An approval of other permissions (1.0.2's), or of these for another
	// version, admits nothing.
	for _, other := range [][2]string{{"5.3.0", firstFP}, {"6.0.0", fp}} {
		if _, err := e.cat.Approve(e.ctx, "gated", "aqua", other[0], other[1], "alice"); err != nil {
			t.Fatal(err)
		}
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

// TestPermissionGateSurvivesDelete deletes a package whose wider version
// was refused and pushes a wider version again: still refused, for what
// the gate admitted for the name outlives the package. A version within
// it is admitted again without an approval.
func TestPermissionGateSurvivesDelete(t *testing.T) {
	e := newEnv(t, envOptions{gated: "gated"})
	versions := loadRepository(t, "olm-community/aqua")
	first := versions[0]
	if _, err := e.cat.Approve(e.ctx, "gated", "aqua", first.Metadata.Version, permissions.Fingerprint(first.Metadata.Permissions), "alice"); err != nil {
		t.Fatal(err)
	}
	e.pushPackage("gated", first)
	latest := version(t, versions, "6.2.0")
	if _, err := e.tryPushPackage("gated", version(t, versions, "5.3.0")); err == nil {
		t.Fatal("5.3.0 was admitted")
	}
	e.waitFor("0.0.1 indexed", func() bool {
		_, err := e.cat.Version(e.ctx, all, "gated", "aqua", first.Metadata.Version)
		return err == nil
	})
	if _, err := e.cat.DeletePackage(e.ctx, "gated", "aqua"); err != nil {
		t.Fatal(err)
	}
	_, err := e.tryPushPackage("gated", latest)
	wantRefusal(t, err, "gated/aqua:6.2.0", permissions.Fingerprint(latest.Metadata.Permissions), "asks for permissions beyond those namespace gated has admitted for gated/aqua")
	e.pushPackage("gated", version(t, versions, "1.0.2"))
}

// TestPermissionGateSeedsExistingPackages: a package stored before the
// gate kept records (here: its records removed) gets its allowance from
// the versions stored when the gate first meets it, and keeps it after a
// delete.
func TestPermissionGateSeedsExistingPackages(t *testing.T) {
	e := newEnv(t, envOptions{gated: "gated"})
	versions := loadRepository(t, "olm-community/aqua")
	first, old := versions[0], version(t, versions, "1.0.2")
	if _, err := e.cat.Approve(e.ctx, "gated", "aqua", first.Metadata.Version, permissions.Fingerprint(first.Metadata.Permissions), "alice"); err != nil {
		t.Fatal(err)
	}
	e.pushPackage("gated", first)
	e.pushPackage("gated", old)
	e.waitFor("1.0.2 indexed", func() bool {
		_, err := e.cat.Version(e.ctx, all, "gated", "aqua", "1.0.2")
		return err == nil
	})
	if err := e.reg.StorageDriver().Delete(e.ctx, "/berth"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.tryPushPackage("gated", version(t, versions, "5.3.0")); err == nil || !strings.Contains(err.Error(), "beyond those namespace gated has admitted") {
		t.Fatalf("5.3.0 after the records were removed: %v", err)
	}
	allowed, err := approval.New(e.reg.StorageDriver()).Allowance(e.ctx, "gated", "aqua")
	if err != nil || len(allowed) != 1 || allowed[0].Reason != "stored before the gate kept a record of the package" {
		t.Fatalf("seeded allowance = %+v, %v", allowed, err)
	}
	if _, err := e.cat.DeletePackage(e.ctx, "gated", "aqua"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.tryPushPackage("gated", version(t, versions, "5.3.0")); err == nil {
		t.Fatal("5.3.0 was admitted after the seeded package was deleted")
	}
}

// Rules of the operators below: narrow is rated medium (reads across the
// cluster), everything critical.
const (
	narrow     = `[{apiGroups: [""], resources: [configmaps], verbs: [get, list, watch]}]`
	everything = `[{apiGroups: ["*"], resources: ["*"], verbs: ["*"]}]`
)

// op is one version of OLM package op, in channel, with its upgrade edges
// and cluster rules.
type op struct {
	version, channel, replaces, skips, skipRange, rules string
}

// pkg builds the package.
func (o op) pkg(t *testing.T) *pkgformat.Package {
	t.Helper()
	csv := "apiVersion: operators.coreos.com/v1alpha1\nkind: ClusterServiceVersion\nmetadata:\n  name: op.v" + o.version + "\n"
	if o.skipRange != "" {
		csv += "  annotations:\n    olm.skipRange: \"" + o.skipRange + "\"\n"
	}
	csv += "spec:\n  version: " + o.version + "\n  displayName: op\n"
	if o.replaces != "" {
		csv += "  replaces: op.v" + o.replaces + "\n"
	}
	if o.skips != "" {
		csv += "  skips: [op.v" + o.skips + "]\n"
	}
	csv += "  install:\n    strategy: deployment\n    spec:\n      clusterPermissions:\n        - serviceAccountName: op\n          rules: " + o.rules + "\n"
	channel := o.channel
	if channel == "" {
		channel = "stable"
	}
	annotations := "annotations:\n  operators.operatorframework.io.bundle.package.v1: op\n  operators.operatorframework.io.bundle.channels.v1: " + channel + "\n  operators.operatorframework.io.bundle.mediatype.v1: registry+v1\n"
	p, err := pkgformat.New([]pkgformat.File{
		{Path: "metadata/annotations.yaml", Mode: 0o644, Data: []byte(annotations)},
		{Path: "manifests/op.v" + o.version + ".clusterserviceversion.yaml", Mode: 0o644, Data: []byte(csv)},
	}, pkgformat.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestPermissionGateEveryPath: once op 1.0.0 and 1.1.0 ask for narrow rules,
// no way of tagging a version that asks for everything gets it through:
// a lower version and one that replaces it, a new channel, skips and
// skipRange edges, a push by digest then by tag, a copy from another
// namespace, a second replica. One approved is admitted, and then so is
// everything asking for no more.
func TestPermissionGateEveryPath(t *testing.T) {
	e := newEnv(t, envOptions{gated: "gated"})
	e.pushPackage("gated", op{version: "1.0.0", rules: narrow}.pkg(t)) // a first version rated medium needs no approval
	e.pushPackage("gated", op{version: "1.1.0", replaces: "1.0.0", rules: narrow}.pkg(t))
	e.pushPackage("gated", op{version: "0.0.2", rules: narrow}.pkg(t)) // within the allowance, wherever it goes

	tagByDigest := func(p *pkgformat.Package, ns string) error {
		repo, d, manifest := e.uploadPackage(ns, p)
		if err := repo.Push(e.ctx, d, bytes.NewReader(manifest)); err != nil {
			t.Fatal(err)
		}
		return repo.Tag(e.ctx, d, pkgformat.Tag(p.Metadata.Version))
	}
	replica := e.gateCatalog(permissions.DefaultMaxUnapproved)
	onReplica := func(p *pkgformat.Package, ns string) error { return e.admit(replica, ns, p) }
	byTag := func(p *pkgformat.Package, ns string) error { _, err := e.tryPushPackage(ns, p); return err }
	copied := func(p *pkgformat.Package, _ string) error {
		e.pushPackage("open", p)
		return tagByDigest(p, "gated")
	}

	for _, tc := range []struct {
		what string
		op   op
		push func(*pkgformat.Package, string) error
	}{
		{"a lower version", op{version: "0.0.1", rules: everything}, byTag},
		{"a version replacing the lower one", op{version: "2.0.0", replaces: "0.0.1", rules: everything}, byTag},
		{"a version in a new channel", op{version: "3.0.0", channel: "fast", rules: everything}, byTag},
		{"a skips edge", op{version: "1.2.0", skips: "1.0.0", rules: everything}, byTag},
		{"a skipRange edge", op{version: "1.3.0", skipRange: ">=1.0.0 <1.3.0", rules: everything}, byTag},
		{"a push by digest, then by tag", op{version: "1.4.0", replaces: "1.1.0", rules: everything}, tagByDigest},
		{"a copy from another namespace (promote)", op{version: "1.5.0", replaces: "1.1.0", rules: everything}, copied},
		{"another replica", op{version: "1.6.0", replaces: "1.1.0", rules: everything}, onReplica},
	} {
		t.Run(tc.what, func(t *testing.T) {
			p := tc.op.pkg(t)
			wantRefusal(t, tc.push(p, "gated"), "gated/op:"+tc.op.version, permissions.Fingerprint(p.Metadata.Permissions),
				"gated/op:"+tc.op.version+" asks for permissions beyond those namespace gated has admitted for gated/op (adds * *.* (cluster); rated critical, up from medium)")
		})
	}

	p := op{version: "1.4.0", replaces: "1.1.0", rules: everything}.pkg(t)
	if _, err := e.cat.Approve(e.ctx, "gated", "op", "1.4.0", permissions.Fingerprint(p.Metadata.Permissions), "alice"); err != nil {
		t.Fatal(err)
	}
	if err := tagByDigest(p, "gated"); err != nil {
		t.Fatalf("approved, a push by digest then by tag: %v", err)
	}
	// Once approved, everything is in op's allowance: another version
	// asking for it needs no approval, on either replica.
	e.pushPackage("gated", op{version: "4.0.0", rules: everything}.pkg(t))
	if err := onReplica(op{version: "4.1.0", rules: everything}.pkg(t), "gated"); err != nil {
		t.Errorf("the replica does not see the allowance: %v", err)
	}
}

// TestPermissionGateFirstVersion: the first version of a package is
// admitted without an approval up to the namespace's maxUnapprovedRating,
// and refused above it, naming its rating and findings.
func TestPermissionGateFirstVersion(t *testing.T) {
	e := newEnv(t, envOptions{gated: "gated"})
	p := op{version: "1.0.0", rules: `[{apiGroups: [""], resources: [secrets], verbs: [get]}]`}.pkg(t)
	_, err := e.tryPushPackage("gated", p)
	wantRefusal(t, err, "gated/op:1.0.0", permissions.Fingerprint(p.Metadata.Permissions),
		"gated/op:1.0.0 is the first version of gated/op the gate of namespace gated meets, and it is rated high, above medium, the most namespace gated admits without an approval (HIGH: may read Secrets across the cluster)")
	e.pushPackage("open", p)

	// Where the namespace admits a first version rated up to high, one
	// rated critical is refused and one rated high admitted.
	high := e.gateCatalog(permissions.High)
	if err := e.admit(high, "gated", op{version: "1.0.0", rules: everything}.pkg(t)); err == nil || !strings.Contains(err.Error(), "rated critical, above high") {
		t.Errorf("a first version rated critical, admitted up to high: %v", err)
	}
	if err := e.admit(high, "gated", p); err != nil {
		t.Errorf("a first version rated high, admitted up to high: %v", err)
	}
}

// TestPermissionGateRefusesWhatItCannotRead: a package whose permissions
// the gate cannot review is refused, not let through to be recorded as
// invalid: a read that fails for a passing reason (a timeout under load)
// could succeed when the catalog reads it again.
func TestPermissionGateRefusesWhatItCannotRead(t *testing.T) {
	critical := op{version: "1.0.0", rules: everything}.pkg(t)
	for _, tc := range []struct {
		what string
		opts envOptions
		push func(e *env) error
		says string
	}{
		{"content that is not gzip", envOptions{gated: "gated"}, func(e *env) error {
			m := e.manifestOf("gated/op", pkgformat.ArtifactType, layer{pkgformat.ConfigMediaType, []byte("{}")}, layer{pkgformat.ContentMediaType, []byte("plain text")})
			d := ocispec.Descriptor{MediaType: ocispec.MediaTypeImageManifest, Digest: digest.FromBytes(m), Size: int64(len(m))}
			return e.repo("gated/op").PushReference(e.ctx, d, bytes.NewReader(m), "1.0.0")
		}, "cannot be read: content: archive: corrupt or truncated gzip stream"},
		{"a read that times out", envOptions{gated: "gated", indexTimeout: time.Nanosecond}, func(e *env) error {
			_, err := e.tryPushPackage("gated", critical)
			return err
		}, "cannot be read: "},
	} {
		t.Run(tc.what, func(t *testing.T) {
			e := newEnv(t, tc.opts)
			err := tc.push(e)
			if want := "gated/op:1.0.0: namespace gated admits only versions whose permissions it can review, and this one " + tc.says; err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("push of %s: %v, want a refusal saying %q", tc.what, err, want)
			}
			if _, err := e.repo("gated/op").Resolve(e.ctx, "1.0.0"); err == nil {
				t.Error("the refused version is tagged")
			}
		})
	}
}

// gateCatalog returns a second catalog on e's registry storage, with a
// store of its own, as another replica would be, gating namespace gated
// with maxUnapproved.
func (e *env) gateCatalog(maxUnapproved permissions.Rating) *catalog.Catalog {
	e.t.Helper()
	store, err := sqlite.Open(e.ctx, filepath.Join(e.t.TempDir(), "replica.db"))
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { store.Close() })
	c, err := catalog.New(catalog.Options{Store: store, Source: catalog.NewDistributionSource(e.reg.Namespace(), e.reg.Referrers, e.reg.UntagDangling),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Approvals: approval.New(e.reg.StorageDriver()),
		RefuseWideningPermissions: func(ns string) bool { return ns == "gated" },
		MaxUnapprovedRating:       func(string) permissions.Rating { return maxUnapproved }})
	if err != nil {
		e.t.Fatal(err)
	}
	return c
}

// admit uploads p's blobs to ns and asks c to admit its manifest by tag.
func (e *env) admit(c *catalog.Catalog, ns string, p *pkgformat.Package) error {
	e.t.Helper()
	_, d, manifest := e.uploadPackage(ns, p)
	return c.AdmitPermissions(e.ctx, ns+"/"+p.Metadata.Name, pkgformat.Tag(p.Metadata.Version), d.MediaType, manifest)
}

// wantRefusal checks that err refuses ref with the approval command of
// the rules fp, and says each of says.
func wantRefusal(t *testing.T, err error, ref, fp string, says ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s was admitted", ref)
	}
	for _, want := range append(says, fmt.Sprintf("an administrator of %s may approve exactly these permissions with `berth approve %s --permissions %s`, then push again", ref[:strings.LastIndex(ref, ":")], ref, fp)) {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal %q does not say %q", err, want)
		}
	}
	if got := regexp.MustCompile(`sha256:[0-9a-f]{64}`).FindString(err.Error()); got != fp {
		t.Errorf("refusal names permissions %s, want %s", got, fp)
	}
}

// version returns version v of a fixture package.
func version(t *testing.T, versions []*pkgformat.Package, v string) *pkgformat.Package {
	t.Helper()
	for _, p := range versions {
		if p.Metadata.Version == v {
			return p
		}
	}
	t.Fatalf("no version %s in the fixtures", v)
	return nil
}
