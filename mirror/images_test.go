package mirror_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/distribution/distribution/v3/configuration"
	"github.com/distribution/distribution/v3/registry/handlers"
	"github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/sirupsen/logrus"
	"oras.land/oras-go/v2/registry/remote"

	"github.com/berth-registry/berth/catalog"
	"github.com/berth-registry/berth/catalog/apiv1"
	"github.com/berth-registry/berth/client"
	"github.com/berth-registry/berth/client/registrytest"
	"github.com/berth-registry/berth/mirror"
	"github.com/berth-registry/berth/registry"
	"github.com/berth-registry/berth/signing"
)

// upstream is a registry standing in for quay.io, holding org/app:1.0, an
// index of three platforms signed by tag, and org/tool, one image.
type upstream struct {
	host     string
	index    ocispec.Descriptor
	children map[string]ocispec.Descriptor // by os/arch
	tool     ocispec.Descriptor
}

// newLenientRegistry starts a distribution registry configured to accept
// an image index whose children are not all present
// (validation.manifests.indexes.platforms: none), as a mirror of an index
// exported with --platform must be, and layers that name URLs. If wrap is
// not nil, the registry's handler is passed through it.
func newLenientRegistry(t *testing.T, wrap func(http.Handler) http.Handler) string {
	t.Helper()
	logrus.SetOutput(io.Discard)
	config := &configuration.Configuration{Storage: configuration.Storage{
		"inmemory":    configuration.Parameters{},
		"maintenance": configuration.Parameters{"uploadpurging": map[any]any{"enabled": false}},
	}}
	config.HTTP.Secret = "test"
	config.Catalog.MaxEntries = 1000
	config.Validation.Manifests.Indexes.Platforms = "none"
	config.Validation.Manifests.URLs.Allow = []string{"^https://"}
	ctx, cancel := context.WithCancel(context.Background())
	var h http.Handler = handlers.NewApp(ctx, config)
	if wrap != nil {
		h = wrap(h)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(func() { srv.Close(); cancel() })
	return strings.TrimPrefix(srv.URL, "http://")
}

func pushBytes(t *testing.T, repo *remote.Repository, mediaType string, data []byte, tag string) ocispec.Descriptor {
	t.Helper()
	desc := ocispec.Descriptor{MediaType: mediaType, Digest: digest.FromBytes(data), Size: int64(len(data))}
	ctx := context.Background()
	var err error
	switch {
	case tag != "":
		err = repo.PushReference(ctx, desc, bytes.NewReader(data), tag)
	case mediaType == ocispec.MediaTypeImageManifest || mediaType == ocispec.MediaTypeImageIndex:
		err = repo.Manifests().Push(ctx, desc, bytes.NewReader(data))
	default:
		err = repo.Blobs().Push(ctx, desc, bytes.NewReader(data))
	}
	if err != nil {
		t.Fatal(err)
	}
	return desc
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// pushImage pushes an image of one platform (a config and two layers, one
// of them shared by every image) and returns its manifest's descriptor.
func pushImage(t *testing.T, repo *remote.Repository, platform ocispec.Platform, tag string) ocispec.Descriptor {
	t.Helper()
	config := pushBytes(t, repo, ocispec.MediaTypeImageConfig, mustJSON(t, ocispec.Image{Platform: platform}), "")
	shared := pushBytes(t, repo, ocispec.MediaTypeImageLayer, []byte("the base layer every image shares"), "")
	own := pushBytes(t, repo, ocispec.MediaTypeImageLayer, []byte("the layer of "+repo.Reference.Repository+" "+platformOf(platform)), "")
	m := ocispec.Manifest{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: ocispec.MediaTypeImageManifest, Config: config,
		Layers: []ocispec.Descriptor{shared, own}}
	return pushBytes(t, repo, ocispec.MediaTypeImageManifest, mustJSON(t, m), tag)
}

func platformOf(p ocispec.Platform) string { return p.OS + "/" + p.Architecture }

func newUpstream(t *testing.T, c *client.Client, signer *signing.Signer) *upstream {
	t.Helper()
	u := &upstream{host: registrytest.New(t, nil), children: map[string]ocispec.Descriptor{}}
	app := c.Repository(u.host, "org/app")
	idx := ocispec.Index{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: ocispec.MediaTypeImageIndex}
	for _, arch := range []string{"amd64", "arm64", "s390x"} {
		p := ocispec.Platform{OS: "linux", Architecture: arch}
		d := pushImage(t, app, p, "")
		d.Platform = &p
		u.children[platformOf(p)] = d
		idx.Manifests = append(idx.Manifests, d)
	}
	u.index = pushBytes(t, app, ocispec.MediaTypeImageIndex, mustJSON(t, idx), "1.0")
	if _, err := c.Sign(context.Background(), mustRef(t, u.host+"/org/app@"+u.index.Digest.String()), signer, client.SignOptions{}); err != nil {
		t.Fatal(err)
	}
	u.tool = pushImage(t, c.Repository(u.host, "org/tool"), ocispec.Platform{OS: "linux", Architecture: "amd64"}, "2.0")
	return u
}

// withImages makes the versions of src run the upstream's images, and a
// missing one, and two that are not valid references.
func withImages(src *source, u *upstream) {
	app := apiv1.VersionImage{Reference: "quay.io/org/app:1.0"}
	// The bundle image the source generated travels as a referrer of its
	// version, not as an image: this one exists nowhere, and carrying it
	// would fail.
	bundle := apiv1.VersionImage{Reference: src.host + "/charts/x@" + digest.FromString("bundle").String(), Found: []string{catalog.BundleImageFound}}
	src.images = map[string][]apiv1.VersionImage{
		"1.0.0": {app, {Reference: "quay.io/org/tool@" + u.tool.Digest.String()}, bundle},
		"1.1.0": {app, {Reference: "quay.io/org/missing:1"}, {Reference: "quay.io/org/app@@"}},
		"2.0.0": {{Reference: "Bad Ref", Problem: "invalid reference format"}},
	}
}

func exportImages(t *testing.T, src *source, u *upstream, out string, base *mirror.Inventory) *mirror.Summary {
	t.Helper()
	sum, err := mirror.Export(context.Background(), mirror.ExportOptions{Client: src.c, Source: src.host, Catalog: src,
		Selection: &mirror.Selection{Packages: []mirror.Rule{{Namespace: "charts"}}}, Output: out, Base: base,
		RegistryMap: mirror.RegistryMap{"quay.io": u.host}, Platforms: []ocispec.Platform{{OS: "linux", Architecture: "amd64"}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(sum.Failed) != 0 {
		t.Fatalf("export failed: %+v", sum.Failed)
	}
	return sum
}

func importImages(t *testing.T, c *client.Client, path, target string, prefixes mirror.ImagePrefixes) (*mirror.Summary, []string) {
	t.Helper()
	a, err := mirror.OpenArchive(path)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	var warnings []string
	sum, err := mirror.Import(context.Background(), a, mirror.ImportOptions{Client: c, Target: target, ImagePrefixes: prefixes,
		Warn: func(s string) { warnings = append(warnings, s) }})
	if err != nil {
		t.Fatal(err)
	}
	return sum, warnings
}

func exists(t *testing.T, repo *remote.Repository, d ocispec.Descriptor) bool {
	t.Helper()
	ok, err := repo.Manifests().Exists(context.Background(), d)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

func TestExportImportImages(t *testing.T) {
	ctx := context.Background()
	src := newSource(t)
	u := newUpstream(t, src.c, src.keys.Signer)
	withImages(src, u)
	out := filepath.Join(t.TempDir(), "site")
	sum := exportImages(t, src, u, out, nil)

	// Two images are carried; the missing one and the two bad references
	// are reported with the versions that run them.
	if sum.Images != 2 {
		t.Errorf("exported %d images, want 2", sum.Images)
	}
	failed := map[string]mirror.ImageProblem{}
	for _, p := range sum.ImagesFailed {
		failed[p.Reference] = p
	}
	for ref, want := range map[string]string{
		"quay.io/org/missing:1": "read from " + u.host + "/org/missing",
		"quay.io/org/app@@":     "not a valid image reference",
		"Bad Ref":               "invalid reference format",
	} {
		p, ok := failed[ref]
		if !ok || !strings.Contains(p.Reason, want) || len(p.Versions) != 1 {
			t.Errorf("image %s: reported %+v, want a reason with %q and the version that runs it", ref, p, want)
		}
	}
	if len(failed) != 3 {
		t.Errorf("reported %d images, want 3: %+v", len(failed), sum.ImagesFailed)
	}

	a, err := mirror.OpenArchive(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Verify(ctx, nil); err != nil {
		t.Fatalf("verify: %v", err)
	}
	m := a.Manifest()
	var app mirror.Image
	for _, img := range m.Images {
		if img.Reference == "quay.io/org/app:1.0" {
			app = img
		}
	}
	if app.Digest != u.index.Digest || app.Tag != "1.0" || app.Repository != "quay.io/org/app" || !slices.Equal(app.Platforms, []string{"linux/amd64"}) ||
		!slices.Equal(app.Versions, []string{"charts/hello:1.0.0", "charts/hello:1.1.0"}) || len(app.Tags) != 1 || !strings.HasSuffix(app.Tags[0].Tag, ".sig") {
		t.Errorf("archive manifest records app as %+v", app)
	}
	named := map[string]digest.Digest{}
	for _, d := range a.Index().Manifests {
		named[d.Annotations[ocispec.AnnotationRefName]] = d.Digest
	}
	if named["quay.io/org/app:1.0"] != u.index.Digest || named["quay.io/org/tool@"+u.tool.Digest.String()] != u.tool.Digest {
		t.Errorf("index.json names %v", named)
	}
	a.Close()

	target := newLenientRegistry(t, nil)
	imp, warnings := importImages(t, src.c, out, target, mirror.ImagePrefixes{})
	if imp.Images != 2 || imp.Versions != 3 || len(imp.ImagesFailed)+len(imp.Failed) != 0 {
		t.Fatalf("import: %+v", imp)
	}
	if len(warnings) != 3 || !strings.Contains(strings.Join(warnings, "\n"), "the archive lacks image quay.io/org/missing:1 (needed by charts/hello:1.1.0)") {
		t.Errorf("import warned %q", warnings)
	}
	wantMirrors := []apiv1.ImageMirror{{Source: "quay.io/org/app", Mirror: target + "/mirror/org/app"}, {Source: "quay.io/org/tool", Mirror: target + "/mirror/org/tool"}}
	if !slices.Equal(imp.ImageMirrors, wantMirrors) {
		t.Errorf("mirrors %+v, want %+v", imp.ImageMirrors, wantMirrors)
	}

	// The index keeps its digest and pulls for amd64 only.
	mapped := src.c.Repository(target, "mirror/org/app")
	got, err := mapped.Resolve(ctx, "1.0")
	if err != nil || got.Digest != u.index.Digest {
		t.Fatalf("mirror/org/app:1.0 is %v (%v), want the index %s", got.Digest, err, u.index.Digest)
	}
	for p, d := range u.children {
		if have := exists(t, mapped, d); have != (p == "linux/amd64") {
			t.Errorf("child %s in the mirror: %v", p, have)
		}
	}
	if !exists(t, src.c.Repository(target, "mirror/org/tool"), u.tool) {
		t.Error("org/tool is not in the mirror by digest")
	}
	policy := signing.NewPolicyOf(signing.Rule{Repositories: []string{"mirror/org/app"}, Keys: []signing.Key{src.keys.Key}})
	report, err := signing.Check(ctx, src.c.Fetcher(target), policy, "mirror/org/app", u.index.Digest.String())
	if err != nil || !report.Verified() {
		t.Errorf("the image's signature did not travel: %v %+v", err, report)
	}

	// Again: nothing is sent.
	again, _ := importImages(t, src.c, out, target, mirror.ImagePrefixes{})
	if again.Blobs+again.Manifests != 0 || again.Images != 2 {
		t.Errorf("a second import sent %+v", again)
	}

	// A tag of the mirror moved elsewhere is re-pointed, and said so.
	if err := mapped.Tag(ctx, u.children["linux/amd64"], "1.0"); err != nil {
		t.Fatal(err)
	}
	moved, _ := importImages(t, src.c, out, target, mirror.ImagePrefixes{})
	if len(moved.Moved) != 1 || !strings.Contains(moved.Moved[0], "mirror/org/app:1.0 named "+u.children["linux/amd64"].Digest.String()) {
		t.Errorf("moved: %q", moved.Moved)
	}
	if got, err := mapped.Resolve(ctx, "1.0"); err != nil || got.Digest != u.index.Digest {
		t.Errorf("after import mirror/org/app:1.0 is %v (%v), want %s", got.Digest, err, u.index.Digest)
	}

	// A registry that refuses an index whose children are not all there
	// is told how to accept it.
	strict, _ := importImages(t, src.c, out, registrytest.New(t, nil), mirror.ImagePrefixes{})
	if len(strict.ImagesFailed) != 1 || !strings.Contains(strict.ImagesFailed[0].Reason, "validation.manifests.indexes.platforms: none") {
		t.Errorf("import into a strict registry: %+v", strict.ImagesFailed)
	}

	// verify and import check the images of the archive manifest: one that
	// needs what the content list lacks is refused, naming it.
	path := filepath.Join(out, mirror.ManifestFile)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var raw map[string]any
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	content := raw["content"].([]any)
	for i, en := range content {
		if en.(map[string]any)["digest"] == u.children["linux/amd64"].Digest.String() {
			raw["content"] = append(content[:i], content[i+1:]...)
		}
	}
	if err := os.WriteFile(path, mustJSON(t, raw), 0o644); err != nil {
		t.Fatal(err)
	}
	a, err = mirror.OpenArchive(out)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	want := "image 2 (quay.io/org/app:1.0) needs " + u.children["linux/amd64"].Digest.String() + ", which the content list lacks"
	if err := a.Verify(ctx, nil); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("verify of a manifest whose image lacks an entry: %v, want %q", err, want)
	}
}

// TestImportImagesMovedTagWithInventory: into a target whose inventory
// import reads, a tag of the mirror that names another digest is still
// reported as moved.
func TestImportImagesMovedTagWithInventory(t *testing.T) {
	defer func(n int) { *mirror.InventoryFrom = n }(*mirror.InventoryFrom)
	*mirror.InventoryFrom = 0
	src := newSource(t)
	u := newUpstream(t, src.c, src.keys.Signer)
	withImages(src, u)
	out := filepath.Join(t.TempDir(), "site")
	exportImages(t, src, u, out, nil)
	// The target answers the inventory it held before the import: empty.
	inv := &mirror.Inventory{MediaType: mirror.InventoryMediaType, Repositories: map[string][]digest.Digest{}}
	target := newLenientRegistry(t, func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/api/v1/inventory" {
				next.ServeHTTP(w, r)
				return
			}
			w.Header().Set("Content-Type", apiv1.MediaTypeJSON)
			json.NewEncoder(w).Encode(inv)
		})
	})
	mapped := src.c.Repository(target, "mirror/org/app")
	pushImage(t, mapped, ocispec.Platform{OS: "linux", Architecture: "riscv64"}, "1.0")
	imp, _ := importImages(t, src.c, out, target, mirror.ImagePrefixes{})
	if len(imp.Moved) != 1 || !strings.Contains(imp.Moved[0], "mirror/org/app:1.0 named sha256:") {
		t.Errorf("moved: %q", imp.Moved)
	}
	if got, err := mapped.Resolve(context.Background(), "1.0"); err != nil || got.Digest != u.index.Digest {
		t.Errorf("mirror/org/app:1.0 is %v (%v), want %s", got.Digest, err, u.index.Digest)
	}
}

// TestImportImagesIntoBerth: exported without --platform, an index goes
// whole into a berth target, under the default prefix.
func TestImportImagesIntoBerth(t *testing.T) {
	src := newSource(t)
	u := newUpstream(t, src.c, src.keys.Signer)
	withImages(src, u)
	out := filepath.Join(t.TempDir(), "all")
	if _, err := mirror.Export(context.Background(), mirror.ExportOptions{Client: src.c, Source: src.host, Catalog: src,
		Selection: &mirror.Selection{Packages: []mirror.Rule{{Namespace: "charts"}}}, Output: out,
		RegistryMap: mirror.RegistryMap{"quay.io": u.host}}); err != nil {
		t.Fatal(err)
	}
	target := registrytest.NewBerth(t, registry.Options{}, nil)
	imp, _ := importImages(t, src.c, out, target, mirror.ImagePrefixes{})
	if imp.Images != 2 || imp.Versions != 3 || len(imp.ImagesFailed)+len(imp.Failed) != 0 {
		t.Fatalf("import: %+v", imp)
	}
	mapped := src.c.Repository(target, "mirror/org/app")
	for p, d := range u.children {
		if !exists(t, mapped, d) {
			t.Errorf("child %s is not in the mirror", p)
		}
	}

	// Exported with --platform, the index goes in part, unchanged: berth
	// accepts an index whose other platforms are absent.
	amd64 := filepath.Join(t.TempDir(), "amd64")
	if _, err := mirror.Export(context.Background(), mirror.ExportOptions{Client: src.c, Source: src.host, Catalog: src,
		Selection: &mirror.Selection{Packages: []mirror.Rule{{Namespace: "charts"}}}, Output: amd64,
		RegistryMap: mirror.RegistryMap{"quay.io": u.host}, Platforms: []ocispec.Platform{{OS: "linux", Architecture: "amd64"}}}); err != nil {
		t.Fatal(err)
	}
	part := registrytest.NewBerth(t, registry.Options{}, nil)
	imp, _ = importImages(t, src.c, amd64, part, mirror.ImagePrefixes{})
	if imp.Images != 2 || len(imp.ImagesFailed)+len(imp.Failed) != 0 {
		t.Fatalf("import of an index in part into berth: %+v", imp)
	}
	mapped = src.c.Repository(part, "mirror/org/app")
	if !exists(t, mapped, u.index) || !exists(t, mapped, u.children["linux/amd64"]) {
		t.Error("the index or its linux/amd64 manifest is not in the mirror")
	}
	if exists(t, mapped, u.children["linux/arm64"]) {
		t.Error("linux/arm64, left behind by --platform, is in the mirror")
	}
}

func TestExportImagesDelta(t *testing.T) {
	src := newSource(t)
	u := newUpstream(t, src.c, src.keys.Signer)
	withImages(src, u)
	dir := t.TempDir()
	first := filepath.Join(dir, "first")
	exportImages(t, src, u, first, nil)
	target := newLenientRegistry(t, nil)
	prefixes := mirror.ImagePrefixes{ByRegistry: map[string]string{"quay.io": "site/quay"}}
	importImages(t, src.c, first, target, prefixes)

	prev, _, err := mirror.ReadManifest(filepath.Join(first, mirror.ManifestFile))
	if err != nil {
		t.Fatal(err)
	}
	inv, err := mirror.TakeInventory(context.Background(), src.c, target, nil)
	if err != nil {
		t.Fatal(err)
	}
	for name, base := range map[string]*mirror.Inventory{"since": mirror.InventoryOf(prev), "inventory": inv} {
		t.Run(name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "delta")
			exportImages(t, src, u, out, base)
			m, _, err := mirror.ReadManifest(filepath.Join(out, mirror.ManifestFile))
			if err != nil {
				t.Fatal(err)
			}
			// A walk of a plain registry (the inventory) sees only what tags
			// reach: org/tool, pulled by digest, is carried again.
			var toolNeeds []digest.Digest
			for _, img := range m.Images {
				if name == "inventory" && img.Repository == "quay.io/org/tool" {
					toolNeeds = img.Needs
				}
			}
			for _, en := range m.Content {
				if en.Carried && !slices.Contains(toolNeeds, en.Digest) {
					t.Errorf("the delta carries %+v", en)
				}
			}
			imp, _ := importImages(t, src.c, out, target, prefixes)
			if len(imp.Failed)+len(imp.ImagesFailed) != 0 || imp.Images != 2 || imp.Blobs+imp.Manifests != 0 {
				t.Errorf("delta import: %+v", imp)
			}
		})
	}
	// The delta against the previous archive names the image blobs by their
	// source repository, which an import into a new target under another
	// prefix maps: the blobs are mounted from where the images went.
	other := newLenientRegistry(t, nil)
	importImages(t, src.c, first, other, mirror.ImagePrefixes{Default: "elsewhere"})
	out := filepath.Join(t.TempDir(), "since")
	exportImages(t, src, u, out, mirror.InventoryOf(prev))
	if imp, _ := importImages(t, src.c, out, other, mirror.ImagePrefixes{Default: "elsewhere"}); len(imp.ImagesFailed) != 0 {
		t.Errorf("delta import under another prefix: %+v", imp.ImagesFailed)
	}
}

func TestExportWithoutImages(t *testing.T) {
	src := newSource(t)
	u := newUpstream(t, src.c, src.keys.Signer)
	withImages(src, u)
	out := filepath.Join(t.TempDir(), "pkgs")
	sum, err := mirror.Export(context.Background(), mirror.ExportOptions{Client: src.c, Source: src.host, Catalog: src,
		Selection: &mirror.Selection{Packages: []mirror.Rule{{Namespace: "charts"}}}, Output: out, SkipImages: true})
	if err != nil {
		t.Fatal(err)
	}
	m, _, err := mirror.ReadManifest(filepath.Join(out, mirror.ManifestFile))
	if err != nil {
		t.Fatal(err)
	}
	if sum.Images != 0 || len(sum.ImagesFailed) != 0 || len(m.Images) != 0 {
		t.Errorf("--images=false carried %d images, reported %+v", len(m.Images), sum.ImagesFailed)
	}
}

// TestExportImagesNotListed: a source that does not list the images of
// versions (an older berth) fails each version's images, saying how to
// carry the packages alone; the versions are carried.
func TestExportImagesNotListed(t *testing.T) {
	src := newSource(t)
	src.imagesErr = fmt.Errorf("images: %w: answered 404 Not Found", client.ErrRegistry)
	sum := src.export(t, filepath.Join(t.TempDir(), "old"), nil)
	if sum.Versions != 3 || len(sum.ImagesFailed) != 3 || !strings.Contains(sum.ImagesFailed[0].Reason, "--images=false carries the packages alone") {
		t.Errorf("export from an older berth: %d versions, images failed %+v", sum.Versions, sum.ImagesFailed)
	}
}

// TestExportImageIndexOfManyPlatforms carries an index of 200 platforms,
// and refuses a platform the index lacks, naming it.
func TestExportImageIndexOfManyPlatforms(t *testing.T) {
	src := newSource(t)
	host := registrytest.New(t, nil)
	repo := src.c.Repository(host, "org/wide")
	idx := ocispec.Index{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: ocispec.MediaTypeImageIndex}
	for i := range 200 {
		p := ocispec.Platform{OS: "linux", Architecture: fmt.Sprintf("arch%d", i)}
		d := pushImage(t, repo, p, "")
		d.Platform = &p
		idx.Manifests = append(idx.Manifests, d)
	}
	pushBytes(t, repo, ocispec.MediaTypeImageIndex, mustJSON(t, idx), "1")
	src.images = map[string][]apiv1.VersionImage{"1.0.0": {{Reference: "quay.io/org/wide:1"}}}
	for _, tc := range []struct {
		platforms []ocispec.Platform
		needs     int
		problem   string
	}{
		{nil, 1 + 200*3 + 1, ""},
		{[]ocispec.Platform{{OS: "linux", Architecture: "arch7"}}, 1 + 3 + 1, ""},
		{[]ocispec.Platform{{OS: "windows", Architecture: "amd64"}}, 0, "none of the platforms asked for"},
	} {
		out := filepath.Join(t.TempDir(), "wide")
		sum, err := mirror.Export(context.Background(), mirror.ExportOptions{Client: src.c, Source: src.host, Catalog: src,
			Selection: &mirror.Selection{Packages: []mirror.Rule{{Namespace: "charts"}}}, Output: out,
			RegistryMap: mirror.RegistryMap{"quay.io": host}, Platforms: tc.platforms})
		if err != nil {
			t.Fatal(err)
		}
		m, _, err := mirror.ReadManifest(filepath.Join(out, mirror.ManifestFile))
		if err != nil {
			t.Fatal(err)
		}
		img := m.Images[0]
		if len(img.Needs) != tc.needs || !strings.Contains(img.Problem, tc.problem) || (tc.problem != "") != (len(sum.ImagesFailed) == 1) {
			t.Errorf("platforms %v: needs %d (want %d), problem %q (want %q)", tc.platforms, len(img.Needs), tc.needs, img.Problem, tc.problem)
		}
	}
}

// TestExportImageWithForeignLayer: a layer that names URLs (a Windows base
// layer) is left where they point; the image is carried without it.
func TestExportImageWithForeignLayer(t *testing.T) {
	src := newSource(t)
	host := newLenientRegistry(t, nil)
	repo := src.c.Repository(host, "org/win")
	config := pushBytes(t, repo, ocispec.MediaTypeImageConfig, []byte("{}"), "")
	own := pushBytes(t, repo, ocispec.MediaTypeImageLayer, []byte("app layer"), "")
	foreign := ocispec.Descriptor{MediaType: "application/vnd.oci.image.layer.nondistributable.v1.tar+gzip", Digest: digest.FromString("base"), Size: 4,
		URLs: []string{"https://mcr.microsoft.com/base.tar.gz"}}
	m := ocispec.Manifest{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: ocispec.MediaTypeImageManifest, Config: config,
		Layers: []ocispec.Descriptor{foreign, own}}
	d := pushBytes(t, repo, ocispec.MediaTypeImageManifest, mustJSON(t, m), "1")
	src.images = map[string][]apiv1.VersionImage{"1.0.0": {{Reference: "quay.io/org/win:1"}}}
	out := filepath.Join(t.TempDir(), "win")
	sum, err := mirror.Export(context.Background(), mirror.ExportOptions{Client: src.c, Source: src.host, Catalog: src,
		Selection: &mirror.Selection{Packages: []mirror.Rule{{Namespace: "charts"}}}, Output: out, RegistryMap: mirror.RegistryMap{"quay.io": host}})
	if err != nil {
		t.Fatal(err)
	}
	man, _, err := mirror.ReadManifest(filepath.Join(out, mirror.ManifestFile))
	if err != nil {
		t.Fatal(err)
	}
	if sum.Images != 1 || len(man.Images) != 1 || !slices.Equal(man.Images[0].Needs, sortedDigests(d.Digest, config.Digest, own.Digest)) {
		t.Errorf("exported %+v: %+v", sum, man.Images)
	}
}

func sortedDigests(ds ...digest.Digest) []digest.Digest {
	slices.Sort(ds)
	return ds
}
