package e2e

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"sigs.k8s.io/yaml"

	"github.com/berth-registry/berth/catalog/apiv1"
	"github.com/berth-registry/berth/olm"
	"github.com/berth-registry/berth/pkgformat"
)

// opmInvalid is a bundle opm refuses, made from a fixture bundle by edit,
// and what berth's reason for leaving it out says.
type opmInvalid struct {
	name, pkg, reason string
	edit              func(csv map[string]any)
}

// opmInvalidBundles are bundles each of which, in a catalog, makes opm
// validate and opm serve refuse the whole catalog.
var opmInvalidBundles = []opmInvalid{
	{"strimzi-kafka-operator 0.20.0's related image", "bad-image", `relatedImages[0] (operator): invalid image pull spec "docker.io/strimzi/operator@@sha256:`, func(csv map[string]any) {
		spec(csv)["relatedImages"] = []any{map[string]any{"name": "operator", "image": "docker.io/strimzi/operator@@sha256:" + strings.Repeat("a", 64)}}
	}},
	{"a related image with capitals", "bad-capitals", "repository name must be lowercase", func(csv map[string]any) {
		spec(csv)["relatedImages"] = []any{map[string]any{"name": "operator", "image": "Strimzi/operator:0.20.0"}}
	}},
	{"a skipRange blang cannot read", "bad-skiprange", `skipRange ">=1.0 <2.0" is not a semver range`, func(csv map[string]any) {
		annotations(csv)["olm.skipRange"] = ">=1.0 <2.0"
	}},
	{"a property value of the wrong type", "bad-property", "(olm.package.required): value", func(csv map[string]any) {
		annotations(csv)["olm.properties"] = `[{"type":"olm.package.required","value":{"packageName":5,"versionRange":">=1.0.0"}}]`
	}},
	{"a release the bundle name lacks", "bad-release", `with a release, opm requires "bad-release-v1.0.0-1"`, func(csv map[string]any) {
		spec(csv)["release"] = "1"
	}},
	{"a package name that is no DNS-1123 label", "bad.dots", `package name "bad.dots" is not a DNS-1123 label`, func(map[string]any) {}},
}

// TestOLMCatalogLeavesOutBundlesOpmRefuses pushes, beside a valid package,
// bundles that opm refuses, each shown first to make the real opm validate
// refuse its catalog. berth leaves each out of the namespace's catalog
// image, which opm validate accepts, and says why in the API, berth show
// and the UI.
func TestOLMCatalogLeavesOutBundlesOpmRefuses(t *testing.T) {
	opm := newOpm(t)
	const ns = "opmbad"
	src := filepath.Join(fixtures, "olm-community", "cockroachdb", "5.0.4")
	good := makeBundle(t, src, bundleSpec{pkg: "good-op", csv: "good-op.v1.0.0", version: "1.0.0", channels: []string{"stable"}})
	if out := renderAlone(t, good); !validates(t, opm, out) {
		t.Fatalf("the valid bundle's catalog is refused by opm validate")
	}
	dirs := map[string]string{}
	for _, tc := range opmInvalidBundles {
		dir := makeBundle(t, src, bundleSpec{pkg: tc.pkg, csv: tc.pkg + ".v1.0.0", version: "1.0.0", channels: []string{"stable"}})
		editCSV(t, dir, tc.edit)
		if validates(t, opm, renderAlone(t, dir)) {
			t.Errorf("%s: opm validate accepts its catalog, so it is no case of a bundle opm refuses", tc.name)
		}
		dirs[tc.pkg] = dir
	}
	// The strimzi image again, in a version of the valid package.
	badVersion := makeBundle(t, src, bundleSpec{pkg: "good-op", csv: "good-op.v1.0.1", version: "1.0.1", replaces: "good-op.v1.0.0", channels: []string{"stable"}})
	editCSV(t, badVersion, opmInvalidBundles[0].edit)

	s := startServer(t, "")
	// The name olm is reserved: its repository would hold the catalog.
	named := makeBundle(t, src, bundleSpec{pkg: "olm", csv: "olm.v1.0.0", version: "1.0.0", channels: []string{"stable"}})
	if r := run(t, "", berthBin, "push", named, s.addr+"/"+ns+"/olm"); r.code == 0 || !strings.Contains(r.stderr, `package name "olm" is reserved`) {
		t.Errorf("berth push of a package named olm: exit %d %s, want refused as reserved", r.code, r.stderr)
	}
	berth(t, "", "push", good, s.addr+"/"+ns+"/good-op")
	for _, tc := range opmInvalidBundles {
		berth(t, "", "push", dirs[tc.pkg], s.addr+"/"+ns+"/"+tc.pkg)
	}
	berth(t, "", "push", badVersion, s.addr+"/"+ns+"/good-op")
	waitUntil(t, s, "every version read", func() bool {
		var st apiv1.Status
		return getJSON(t, s, "/api/v1/status", &st) == http.StatusOK && st.Versions+st.Unindexed >= 2+len(opmInvalidBundles)
	})
	waitUntilSlow(t, s, "good-op in the catalog", func() bool { return len(ofSchema(olmAll(t, s, ns), "olm.bundle")) == 1 })
	docs := opm.render(t, catalogRef(s, ns, steadyCatalog(t, s, ns)))
	validate(t, opm, docs)
	var fbc bytes.Buffer
	for _, d := range docs {
		fbc.WriteString(canonical(d, false) + "\n")
	}
	configs := t.TempDir()
	if err := os.WriteFile(filepath.Join(configs, "catalog.json"), fbc.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := runWith(t, command{env: opm.env}, opm.bin, "serve", configs, "--cache-only", "--pprof-addr=", "--termination-log="+filepath.Join(t.TempDir(), "log")); r.code != 0 {
		t.Errorf("opm serve of the catalog: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, d := range docs {
		if p := d.str("package"); d.str("schema") == "olm.bundle" && (p != "good-op" || d.str("name") != "good-op.v1.0.0") {
			t.Errorf("the catalog holds bundle %s of %s, which opm refuses", d.str("name"), p)
		}
	}

	for _, tc := range opmInvalidBundles {
		code, body := s.get(t, "/api/v1/packages/"+ns+"/"+tc.pkg)
		if code != http.StatusNotFound || !strings.Contains(body, "is not valid for opm") || !strings.Contains(body, jsonText(t, tc.reason)) {
			t.Errorf("%s: GET the package = %d %s, want 404 saying %q", tc.name, code, body, tc.reason)
		}
	}
	var pkg apiv1.Package
	getJSON(t, s, "/api/v1/packages/"+ns+"/good-op", &pkg)
	if len(pkg.Unindexed) != 1 || pkg.Unindexed[0].Tag != "1.0.1" || pkg.Unindexed[0].Status != apiv1.StatusInvalid ||
		!strings.Contains(pkg.Unindexed[0].Reason, opmInvalidBundles[0].reason) {
		t.Errorf("good-op's unindexed tags %+v, want 1.0.1 invalid saying %q", pkg.Unindexed, opmInvalidBundles[0].reason)
	}
	if out := berth(t, "", "show", ns+"/good-op", "--server", s.addr).stdout; !strings.Contains(out, "1.0.1") || !strings.Contains(out, opmInvalidBundles[0].reason) {
		t.Errorf("berth show does not say why 1.0.1 is left out:\n%s", out)
	}
	if code, body := s.get(t, "/ui/packages/"+ns+"/good-op"); code != http.StatusOK || !strings.Contains(body, "1.0.1: invalid") ||
		!strings.Contains(body, "invalid image pull spec &#34;docker.io/strimzi/operator@@sha256:") {
		t.Errorf("the UI's package page (%d) does not say why 1.0.1 is left out:\n%s", code, body)
	}
}

// renderAlone returns the FBC of the bundle folder dir as berth renders it
// when nothing leaves the bundle out: pkgformat reads it, olm.BuildBundle
// and olm.RenderPackage render it, as the only version of its package.
// ValidateBundle, which the indexer runs between them, is not run.
func renderAlone(t *testing.T, dir string) []byte {
	t.Helper()
	p, err := pkgformat.Load(dir, pkgformat.Options{})
	if err != nil {
		t.Fatal(err)
	}
	content, err := p.Archive()
	if err != nil {
		t.Fatal(err)
	}
	layer := ocispec.Descriptor{MediaType: pkgformat.ContentMediaType, Digest: digest.FromBytes(content), Size: int64(len(content))}
	subject := ocispec.Descriptor{MediaType: ocispec.MediaTypeImageManifest, Digest: digest.FromString(dir), Size: 1}
	b, err := olm.BuildBundle(p, layer, content, subject)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	v := olm.Version{Version: p.Metadata.Version, Digest: subject.Digest.String(), Metadata: &p.Metadata, Bundle: b.Record}
	if err := olm.RenderPackage(&out, "127.0.0.1:5000", "opmbad", p.Metadata.Name, []olm.Version{v}); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// validates reports whether opm validate accepts the catalog fbc.
func validates(t *testing.T, opm *opmCLI, fbc []byte) bool {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "catalog.json"), fbc, 0o644); err != nil {
		t.Fatal(err)
	}
	return runWith(t, command{env: opm.env}, opm.bin, "validate", dir).code == 0
}

// editCSV rewrites the CSV of the bundle folder dir through edit.
func editCSV(t *testing.T, dir string, edit func(csv map[string]any)) {
	t.Helper()
	path, csv := csvFile(t, dir)
	edit(csv)
	out, err := yaml.Marshal(csv)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
}

// spec and annotations return a CSV's spec and metadata.annotations.
func spec(csv map[string]any) map[string]any { return csv["spec"].(map[string]any) }

func annotations(csv map[string]any) map[string]any {
	md := csv["metadata"].(map[string]any)
	if md["annotations"] == nil {
		md["annotations"] = map[string]any{}
	}
	return md["annotations"].(map[string]any)
}

// jsonText is s as the content of a JSON string berth writes (HTML
// characters not escaped).
func jsonText(t *testing.T, s string) string {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		t.Fatal(err)
	}
	out := strings.TrimSpace(b.String())
	return out[1 : len(out)-1]
}
