package catalog_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/distribution/distribution/v3"
	"github.com/distribution/reference"
	"github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/berth-registry/berth/catalog/apiv1"
	"github.com/berth-registry/berth/olm"
	"github.com/berth-registry/berth/pkgformat"
)

// TestOLMBundleOpmRefusesIsInvalid: a version whose bundle opm would refuse
// (strimzi-kafka-operator 0.20.0 lists docker.io/strimzi/operator@@sha256:…
// among its images) is recorded invalid, with opm's rule as its reason, and
// is not among the versions the namespace's OLM catalog is rendered from;
// the same package's valid version is.
func TestOLMBundleOpmRefusesIsInvalid(t *testing.T) {
	e := newEnv(t, envOptions{})
	good := load(t, "olm-community/cockroachdb/5.0.4")
	e.pushPackage("olm", good)

	files := make([]pkgformat.File, len(good.Files))
	for i, f := range good.Files {
		files[i] = f
		if strings.HasSuffix(f.Path, ".clusterserviceversion.yaml") {
			s := strings.ReplaceAll(string(f.Data), "5.0.4", "5.0.5")
			s = strings.Replace(s, "image: quay.io/helmoperators/cockroachdb:v5.0.5", "image: docker.io/strimzi/operator@@sha256:"+strings.Repeat("a", 64), 1)
			files[i].Data = []byte(s)
		}
	}
	bad, err := pkgformat.New(files, pkgformat.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e.pushPackage("olm", bad)

	var en = e.entry("olm", "cockroachdb", "5.0.5")
	e.waitFor("5.0.5 read", func() bool { en = e.entry("olm", "cockroachdb", "5.0.5"); return en != nil })
	if en.Status != apiv1.StatusInvalid || !strings.Contains(en.Reason, "olm bundle cockroachdb 5.0.5 is not valid for opm, so the namespace's catalog leaves it out") ||
		!strings.Contains(en.Reason, `invalid image pull spec "docker.io/strimzi/operator@@sha256:`) {
		t.Errorf("5.0.5 is %s (%s), want invalid naming the image pull spec opm refuses", en.Status, en.Reason)
	}
	e.waitFor("5.0.4 indexed", func() bool { g := e.entry("olm", "cockroachdb", "5.0.4"); return g != nil && g.OLM != nil })
	versions, err := e.cat.OLMVersions(e.ctx, "olm", "cockroachdb")
	if err != nil {
		t.Fatal(err)
	}
	if len(versions) != 1 || versions[0].Version != "5.0.4" {
		t.Errorf("the catalog is rendered from %+v, want 5.0.4 alone", versions)
	}
}

// TestDeletePackageNamedOLMKeepsTheCatalog: DELETE /api/v1/packages/team-b/olm
// of a package named olm, stored before the name was reserved, deletes that
// package and leaves team-b/olm/catalog, the namespace's OLM catalog image
// nested in its repository's path, as it was.
func TestDeletePackageNamedOLMKeepsTheCatalog(t *testing.T) {
	e := newEnv(t, envOptions{})
	putInProcess(t, e, "team-b/olm", "1.0.0", "a package stored before olm was reserved")
	catalogImage := putInProcess(t, e, olm.CatalogRepository("team-b"), olm.CatalogTag, "catalog layer")
	e.waitFor("team-b/olm:1.0.0 read", func() bool { return e.entry("team-b", "olm", "1.0.0") != nil })

	if _, err := e.cat.DeletePackage(e.ctx, "team-b", "olm"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.repo("team-b/olm").Resolve(e.ctx, "1.0.0"); err == nil {
		t.Errorf("team-b/olm:1.0.0 is still there")
	}
	desc, err := e.repo(olm.CatalogRepository("team-b")).Resolve(e.ctx, olm.CatalogTag)
	if err != nil || desc.Digest != catalogImage {
		t.Errorf("after deleting the package team-b/olm, %s:%s = %v, %v; want %s", olm.CatalogRepository("team-b"), olm.CatalogTag, desc.Digest, err, catalogImage)
	}
}

// putInProcess stores an image of one layer under repo:tag through the
// registry's namespace, as berth writes what it generates (no request
// reaches it, so no reserved name refuses it), and returns its digest.
func putInProcess(t *testing.T, e *env, repo, tag, layer string) digest.Digest {
	t.Helper()
	named, err := reference.WithName(repo)
	if err != nil {
		t.Fatal(err)
	}
	r, err := e.reg.Namespace().Repository(e.ctx, named)
	if err != nil {
		t.Fatal(err)
	}
	config, err := r.Blobs(e.ctx).Put(e.ctx, ocispec.MediaTypeImageConfig, []byte(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	l, err := r.Blobs(e.ctx).Put(e.ctx, ocispec.MediaTypeImageLayer, []byte(layer))
	if err != nil {
		t.Fatal(err)
	}
	payload, err := json.Marshal(ocispec.Manifest{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: ocispec.MediaTypeImageManifest, Config: config, Layers: []ocispec.Descriptor{l}})
	if err != nil {
		t.Fatal(err)
	}
	m, desc, err := distribution.UnmarshalManifest(ocispec.MediaTypeImageManifest, payload)
	if err != nil {
		t.Fatal(err)
	}
	ms, err := r.Manifests(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ms.Put(e.ctx, m, distribution.WithTag(tag)); err != nil {
		t.Fatal(err)
	}
	if err := r.Tags(e.ctx).Tag(e.ctx, tag, desc); err != nil {
		t.Fatal(err)
	}
	return desc.Digest
}
