package mirror_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/opencontainers/go-digest"
	"oras.land/oras-go/v2/registry/remote/credentials"

	"github.com/berth-registry/berth/catalog/apiv1"
	"github.com/berth-registry/berth/client"
	"github.com/berth-registry/berth/client/registrytest"
	"github.com/berth-registry/berth/mirror"
	"github.com/berth-registry/berth/pkgformat"
	"github.com/berth-registry/berth/registry"
	"github.com/berth-registry/berth/signing"
	"github.com/berth-registry/berth/signing/signingtest"
)

// source is a registry holding Helm charts charts/hello 1.0.0, 1.1.0 and
// 2.0.0, the first signed by tag and the second by referrer, and a catalog
// that lists them.
type source struct {
	host    string
	c       *client.Client
	keys    signingtest.KeyPair
	digests map[string]digest.Digest // version → digest
	// images are the images each version runs, as the catalog lists them;
	// imagesErr, when set, is the catalog's answer instead.
	images    map[string][]apiv1.VersionImage
	imagesErr error
}

func newSource(t *testing.T) *source {
	t.Helper()
	ctx := context.Background()
	c, err := client.New(client.Options{Credentials: credentials.NewMemoryStore()})
	if err != nil {
		t.Fatal(err)
	}
	s := &source{host: registrytest.NewBerth(t, registry.Options{}, nil), c: c,
		keys: signingtest.NewKeyPair(t, "pw"), digests: map[string]digest.Digest{}}
	for _, v := range []string{"1.0.0", "1.1.0", "2.0.0"} {
		pkg, err := pkgformat.New([]pkgformat.File{
			{Path: "Chart.yaml", Mode: 0o644, Data: []byte("apiVersion: v2\nname: hello\nversion: " + v + "\n")},
			{Path: "templates/cm.yaml", Mode: 0o644, Data: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: hello-" + v + "\n")},
		}, pkgformat.Options{})
		if err != nil {
			t.Fatal(err)
		}
		art, err := pkg.Artifact()
		if err != nil {
			t.Fatal(err)
		}
		ref, _ := client.ParseReference(s.host + "/charts/hello")
		desc, err := c.Push(ctx, ref, art)
		if err != nil {
			t.Fatal(err)
		}
		s.digests[v] = desc.Digest
	}
	for v, referrer := range map[string]bool{"1.0.0": false, "1.1.0": true} {
		ref, _ := client.ParseReference(s.host + "/charts/hello:" + v)
		if _, err := c.Sign(ctx, ref, s.keys.Signer, client.SignOptions{Referrer: referrer}); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// SearchAll, Package and Upgrades make source a mirror.CatalogReader.
func (s *source) SearchAll(context.Context, client.SearchOptions) (*apiv1.SearchResponse, error) {
	return &apiv1.SearchResponse{Packages: []apiv1.PackageSummary{{Namespace: "charts", Name: "hello", Format: pkgformat.Helm}}, Total: 1}, nil
}

func (s *source) Package(_ context.Context, ns, name string) (*apiv1.Package, error) {
	p := &apiv1.Package{Namespace: ns, Name: name, Format: pkgformat.Helm}
	for _, v := range []string{"2.0.0", "1.1.0", "1.0.0"} {
		p.Versions = append(p.Versions, apiv1.VersionSummary{Version: v, Digest: s.digests[v].String(), Verified: v != "2.0.0"})
	}
	return p, nil
}

func (s *source) Upgrades(context.Context, string, string, string, string) (*apiv1.Upgrades, error) {
	return nil, errors.New("no channels")
}

// VersionImages makes source a mirror.ExportCatalog.
func (s *source) VersionImages(_ context.Context, ns, name, version string) (*apiv1.VersionImages, error) {
	if s.imagesErr != nil {
		return nil, s.imagesErr
	}
	return &apiv1.VersionImages{Namespace: ns, Name: name, Version: version, Images: s.images[version]}, nil
}

func (s *source) export(t *testing.T, out string, base *mirror.Inventory) *mirror.Summary {
	t.Helper()
	sum, err := mirror.Export(context.Background(), mirror.ExportOptions{Client: s.c, Source: s.host, Catalog: s,
		Selection: &mirror.Selection{Packages: []mirror.Rule{{Namespace: "charts"}}}, Output: out, Base: base, Signer: s.keys.Signer})
	if err != nil {
		t.Fatal(err)
	}
	if len(sum.Failed) != 0 {
		t.Fatalf("export failed: %+v", sum.Failed)
	}
	return sum
}

func importArchive(t *testing.T, c *client.Client, paths []string, target string, policy *signing.Policy) *mirror.Summary {
	t.Helper()
	a, err := mirror.OpenArchive(paths...)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	sum, err := mirror.Import(context.Background(), a, mirror.ImportOptions{Client: c, Target: target, Policy: policy})
	if err != nil {
		t.Fatal(err)
	}
	return sum
}

// tagsOf maps every tag of charts/hello in host to its digest.
func tagsOf(t *testing.T, c *client.Client, host string) map[string]digest.Digest {
	t.Helper()
	ctx := context.Background()
	repo := c.Repository(host, "charts/hello")
	out := map[string]digest.Digest{}
	err := repo.Tags(ctx, "", func(tags []string) error {
		for _, tag := range tags {
			if referrersFallback.MatchString(tag) {
				// oras-go's referrers tag schema, in a registry without
				// the referrers API.
				continue
			}
			d, err := repo.Resolve(ctx, tag)
			if err != nil {
				return err
			}
			out[tag] = d.Digest
		}
		return nil
	})
	if err != nil && !strings.Contains(err.Error(), "NAME_UNKNOWN") {
		t.Fatal(err)
	}
	return out
}

var referrersFallback = regexp.MustCompile(`^sha256-[0-9a-f]{64}$`)

func TestExportImport(t *testing.T) {
	src := newSource(t)
	for _, out := range []string{"dir", "one.tar", "split.tar"} {
		t.Run(out, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), out)
			var sum *mirror.Summary
			if out == "split.tar" {
				var err error
				sum, err = mirror.Export(context.Background(), mirror.ExportOptions{Client: src.c, Source: src.host, Catalog: src,
					Selection: &mirror.Selection{Packages: []mirror.Rule{{Namespace: "charts"}}}, Output: path, MaxSize: 16 << 10})
				if err != nil {
					t.Fatal(err)
				}
			} else {
				sum = src.export(t, path, nil)
			}
			if sum.Versions != 3 || len(sum.Files) == 0 {
				t.Fatalf("export: %+v", sum)
			}
			target := registrytest.New(t, nil)
			imp := importArchive(t, src.c, sum.Files, target, nil)
			if imp.Versions != 3 || len(imp.Failed)+len(imp.Quarantined) != 0 {
				t.Fatalf("import: %+v", imp)
			}
			want := tagsOf(t, src.c, src.host)
			if got := tagsOf(t, src.c, target); !maps.Equal(got, want) {
				t.Errorf("target tags %v, want the source's %v", got, want)
			}
			report, err := src.c.VerifyKeys(context.Background(), mustRef(t, target+"/charts/hello:1.1.0"), []signing.Key{src.keys.Key})
			if err != nil || !report.Verified() {
				t.Errorf("the referrer signature did not travel: %v %+v", err, report)
			}
			again := importArchive(t, src.c, sum.Files, target, nil)
			if again.Blobs+again.Manifests != 0 || again.Bytes != 0 {
				t.Errorf("a second import sent %+v", again)
			}
		})
	}
}

func TestExportDeltaCarriesOnlyWhatIsMissing(t *testing.T) {
	src := newSource(t)
	first := filepath.Join(t.TempDir(), "first")
	src.export(t, first, nil)
	m, _, err := mirror.ReadManifest(filepath.Join(first, mirror.ManifestFile))
	if err != nil {
		t.Fatal(err)
	}
	delta := filepath.Join(t.TempDir(), "delta.tar")
	sum := src.export(t, delta, mirror.InventoryOf(m))
	if sum.Blobs+sum.Manifests != 0 || sum.BytesSkipped == 0 {
		t.Errorf("a delta against the previous archive carries %+v", sum)
	}
	a, err := mirror.OpenArchive(delta)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	for _, en := range a.Manifest().Content {
		if en.Carried || en.At != "charts/hello" {
			t.Errorf("entry %+v: want not carried, at charts/hello", en)
		}
	}
	// Imported over the first archive, the delta completes nothing new and fails nothing.
	target := registrytest.New(t, nil)
	importArchive(t, src.c, []string{first}, target, nil)
	if imp := importArchive(t, src.c, []string{delta}, target, nil); imp.Versions != 0 || len(imp.Failed) != 0 {
		t.Errorf("delta import: %+v", imp)
	}
	// Into an empty target, the delta names what is missing.
	empty := registrytest.New(t, nil)
	imp := importArchive(t, src.c, []string{delta}, empty, nil)
	if len(imp.Failed) != 3 || !strings.Contains(imp.Failed[0].Reason, "take a new inventory") {
		t.Errorf("a delta into a target that lacks its base: %+v", imp.Failed)
	}
}

func TestImportCorruptBlobIsNotTagged(t *testing.T) {
	src := newSource(t)
	dir := filepath.Join(t.TempDir(), "archive")
	src.export(t, dir, nil)
	a, err := mirror.OpenArchive(dir)
	if err != nil {
		t.Fatal(err)
	}
	var victim mirror.Version
	for _, v := range a.Manifest().Versions {
		if v.Tag == "2.0.0" {
			victim = v
		}
	}
	a.Close()
	// The largest blob of 2.0.0: its content layer.
	var layer mirror.Entry
	for _, en := range a.Manifest().Content {
		if slices.Contains(victim.Needs, en.Digest) && !en.Manifest && en.Size > layer.Size {
			layer = en
		}
	}
	file := filepath.Join(dir, "blobs", "sha256", layer.Digest.Encoded())
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 1
	if err := os.WriteFile(file, b, 0o644); err != nil {
		t.Fatal(err)
	}
	target := registrytest.New(t, nil)
	imp := importArchive(t, src.c, []string{dir}, target, nil)
	if len(imp.Failed) != 1 || imp.Failed[0].Tag != "2.0.0" || !strings.Contains(imp.Failed[0].Reason, layer.Digest.String()) {
		t.Fatalf("failed: %+v, want 2.0.0 naming %s", imp.Failed, layer.Digest)
	}
	tags := tagsOf(t, src.c, target)
	if _, ok := tags["2.0.0"]; ok || imp.Versions != 2 {
		t.Errorf("tags after a corrupt import: %v (%d versions)", tags, imp.Versions)
	}
}

func TestImportQuarantinesUnverified(t *testing.T) {
	src := newSource(t)
	dir := filepath.Join(t.TempDir(), "archive")
	src.export(t, dir, nil)
	policy := signing.NewPolicyOf(signing.Rule{Repositories: []string{"charts/*"}, Keys: []signing.Key{src.keys.Key}, Require: true})
	target := registrytest.New(t, nil)
	imp := importArchive(t, src.c, []string{dir}, target, policy)
	if imp.Versions != 2 || len(imp.Quarantined) != 1 || imp.Quarantined[0].Tag != "2.0.0" {
		t.Fatalf("import under a policy: %+v", imp)
	}
	tags := tagsOf(t, src.c, target)
	if _, ok := tags["2.0.0"]; ok {
		t.Errorf("the unsigned 2.0.0 was tagged")
	}
	if _, ok := tags["1.0.0"]; !ok {
		t.Errorf("the signed 1.0.0 was not tagged: %v", tags)
	}
}

func TestImportChecksArchiveSignature(t *testing.T) {
	src := newSource(t)
	dir := filepath.Join(t.TempDir(), "archive")
	src.export(t, dir, nil)
	a, err := mirror.OpenArchive(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	other := signingtest.NewKeyPair(t, "pw")
	_, err = mirror.Import(context.Background(), a, mirror.ImportOptions{Client: src.c, Target: registrytest.New(t, nil), ArchiveKey: &other.Key})
	if err == nil {
		t.Fatal("an archive signed by another key was imported")
	}
	if _, err := mirror.Import(context.Background(), a, mirror.ImportOptions{Client: src.c, Target: registrytest.New(t, nil), ArchiveKey: &src.keys.Key}); err != nil {
		t.Errorf("the archive's own key: %v", err)
	}
}

func mustRef(t *testing.T, s string) client.Reference {
	t.Helper()
	r, err := client.ParseReference(s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestImportWithTargetInventory: into a target that answers its inventory,
// import asks it once and sends only what the target lacks, without asking
// per blob.
func TestImportWithTargetInventory(t *testing.T) {
	defer func(n int) { *mirror.InventoryFrom = n }(*mirror.InventoryFrom)
	*mirror.InventoryFrom = 0
	src := newSource(t)
	dir := filepath.Join(t.TempDir(), "archive")
	src.export(t, dir, nil)

	var host string
	var inventories, heads atomic.Int64
	var walking atomic.Bool
	host = registrytest.New(t, func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch {
			case r.URL.Path == "/api/v1/inventory" && walking.CompareAndSwap(false, true):
				// Answered by walking the registry, during which this
				// route says it has no inventory.
				defer walking.Store(false)
				inventories.Add(1)
				inv, err := mirror.TakeInventory(r.Context(), src.c, host, nil)
				if err != nil {
					http.Error(w, err.Error(), http.StatusInternalServerError)
					return
				}
				w.Header().Set("Content-Type", apiv1.MediaTypeJSON)
				json.NewEncoder(w).Encode(inv)
			case strings.HasPrefix(r.URL.Path, "/api/"):
				http.NotFound(w, r)
			default:
				if r.Method == http.MethodHead && !walking.Load() {
					heads.Add(1)
				}
				next.ServeHTTP(w, r)
			}
		})
	})
	first := importArchive(t, src.c, []string{dir}, host, nil)
	if first.Versions != 3 || len(first.Failed) != 0 || inventories.Load() != 1 {
		t.Fatalf("import: %+v, %d inventories", first, inventories.Load())
	}
	if heads.Load() != 0 {
		t.Errorf("an import into an empty target that answered its inventory asked %d HEADs", heads.Load())
	}
	if got, want := tagsOf(t, src.c, host), tagsOf(t, src.c, src.host); !maps.Equal(got, want) {
		t.Errorf("target tags %v, want %v", got, want)
	}
	again := importArchive(t, src.c, []string{dir}, host, nil)
	if again.Blobs+again.Manifests != 0 || again.Versions != 0 || len(again.Failed) != 0 {
		t.Errorf("a second import sent %+v", again)
	}
}

// TestImportDamagedArchive: with a part of a split archive missing, the
// versions whose content is all in the other parts are imported, and the
// others are reported with the part they lack.
func TestImportDamagedArchive(t *testing.T) {
	// The part to lose: one, not the last, that some versions need and
	// others do not. Content fills the parts in digest order, and the
	// signatures' digests change from source to source, so that in about
	// one archive in fifteen every part holds something of every version:
	// the test takes the first of several sources that gives such a part.
	var (
		src   *source
		sum   *mirror.Summary
		m     *mirror.Manifest
		needs map[int]map[string]bool
		lose  int
	)
	for range 5 {
		src = newSource(t)
		path := filepath.Join(t.TempDir(), "split.tar")
		var err error
		sum, err = mirror.Export(context.Background(), mirror.ExportOptions{Client: src.c, Source: src.host, Catalog: src,
			Selection: &mirror.Selection{Packages: []mirror.Rule{{Namespace: "charts"}}}, Output: path, MaxSize: 16 << 10})
		if err != nil {
			t.Fatal(err)
		}
		a, err := mirror.OpenArchive(sum.Files...)
		if err != nil {
			t.Fatal(err)
		}
		m = a.Manifest()
		a.Close()
		part := map[digest.Digest]int{}
		for _, e := range m.Content {
			part[e.Digest] = e.Part
		}
		needs = map[int]map[string]bool{}
		for _, v := range m.Versions {
			for _, d := range v.Needs {
				if needs[part[d]] == nil {
					needs[part[d]] = map[string]bool{}
				}
				needs[part[d]][v.Tag] = true
			}
		}
		for n := 1; n < len(m.Parts) && lose == 0; n++ {
			if len(needs[n]) > 0 && len(needs[n]) < len(m.Versions) {
				lose = n
			}
		}
		if lose != 0 {
			break
		}
	}
	if lose == 0 {
		t.Fatalf("in no archive of five does a part hold the content of some versions only: %v", needs)
	}
	files := slices.Delete(slices.Clone(sum.Files), lose-1, lose)
	target := registrytest.New(t, nil)
	imp := importArchive(t, src.c, files, target, nil)
	if imp.Versions != len(m.Versions)-len(needs[lose]) || len(imp.Failed) != len(needs[lose]) {
		t.Fatalf("import without part %d: %+v", lose, imp)
	}
	if len(imp.Damaged) != 1 || !strings.Contains(imp.Damaged[0], fmt.Sprintf("part %d of %d", lose, len(m.Parts))) {
		t.Errorf("damaged: %q", imp.Damaged)
	}
	for _, f := range imp.Failed {
		if !needs[lose][f.Tag] || !strings.Contains(f.Reason, "is missing") {
			t.Errorf("failed: %+v", f)
		}
	}
	tags := tagsOf(t, src.c, target)
	for _, v := range m.Versions {
		if _, ok := tags[v.Tag]; ok == needs[lose][v.Tag] {
			t.Errorf("%s tagged %v, though it needs the lost part %v", v.Tag, ok, needs[lose][v.Tag])
		}
	}
}
