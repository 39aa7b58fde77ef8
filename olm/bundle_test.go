package olm

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/berth-registry/berth/pkgformat"
)

// fixtures holds the real third-party packages (see its README).
const fixtures = "../../shared/fixtures"

// fixtureOLMVersions is how many OLM versions the fixtures hold.
const fixtureOLMVersions = 489

// pushed is a package version as berth push stores it: its content layer
// and a stand-in for its package manifest.
type pushed struct {
	p       *pkgformat.Package
	content ocispec.Descriptor
	data    []byte
	subject ocispec.Descriptor
}

// push returns files as berth push stores them, read back with
// pkgformat.New as the catalog reads them.
func push(t *testing.T, files []pkgformat.File, opts pkgformat.Options) pushed {
	t.Helper()
	var buf bytes.Buffer
	if err := pkgformat.WriteArchive(&buf, files); err != nil {
		t.Fatal(err)
	}
	p, err := pkgformat.New(files, opts)
	if err != nil {
		t.Fatal(err)
	}
	return pushedPackage(p, buf.Bytes())
}

// pushedPackage describes data, the content of p.
func pushedPackage(p *pkgformat.Package, data []byte) pushed {
	return pushed{
		p:       p,
		content: ocispec.Descriptor{MediaType: pkgformat.ContentMediaType, Digest: digest.FromBytes(data), Size: int64(len(data))},
		data:    data,
		subject: ocispec.Descriptor{MediaType: ocispec.MediaTypeImageManifest, Digest: digest.FromString(p.Metadata.Name + "@" + p.Metadata.Version), Size: 1234},
	}
}

func (v pushed) build() (*Bundle, error) { return BuildBundle(v.p, v.content, v.data, v.subject) }

// mustBuildOnce builds v.
func (v pushed) mustBuildOnce(t *testing.T) *Bundle {
	t.Helper()
	b, err := v.build()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// mustBuild builds v twice and checks that both give the same bytes.
func (v pushed) mustBuild(t *testing.T) *Bundle {
	t.Helper()
	b, err := v.build()
	if err != nil {
		t.Fatal(err)
	}
	again, err := v.build()
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(b, again) {
		t.Fatalf("two builds differ: %s and %s", b.Manifest.Digest, again.Manifest.Digest)
	}
	return b
}

// TestBuildBundleFixtures builds the bundle image of every OLM version of
// the fixtures three ways: as berth push stores it (a bundle at the root:
// the content is the layer), inside a top-level folder, and, for versions
// of the package-manifest layout, as the flat version folder (both with a
// generated layer). All three must give the same bundle record.
func TestBuildBundleFixtures(t *testing.T) {
	root := filepath.Join(fixtures, "olm-community")
	versions := 0
	for _, name := range subdirs(t, root) {
		dir := filepath.Join(root, name)
		pkgs, err := pkgformat.LoadRepository(dir, pkgformat.Options{})
		if err != nil {
			t.Fatal(err)
		}
		flat := flatFolders(t, dir, pkgs[0].Metadata.Name)
		for _, p := range pkgs {
			versions++
			t.Run(name+"/"+p.Metadata.Version, func(t *testing.T) {
				t.Parallel()
				data, err := p.Archive()
				if err != nil {
					t.Fatal(err)
				}
				v := pushedPackage(p, data)
				b := v.mustBuild(t)
				checkImage(t, v, b, true)
				checkRecord(t, p, b.Record)
				if err := ValidateBundle(&p.Metadata, b.Record); err != nil {
					t.Errorf("a real bundle is refused: %v", err)
				}

				inFolder := make([]pkgformat.File, len(p.Files))
				for i, f := range p.Files {
					inFolder[i] = pkgformat.File{Path: name + "-" + p.Metadata.Version + "/" + f.Path, Mode: f.Mode, Data: f.Data}
				}
				folded := push(t, inFolder, pkgformat.Options{})
				fb := folded.mustBuildOnce(t)
				checkImage(t, folded, fb, false)
				sameRecord(t, b.Record, fb.Record)

				if files, ok := flat[p.Metadata.Version]; ok {
					fv := push(t, files, pkgformat.Options{Name: p.Metadata.Name})
					flatBundle := fv.mustBuildOnce(t)
					checkImage(t, fv, flatBundle, false)
					sameRecord(t, b.Record, flatBundle.Record)
				}
			})
		}
	}
	if versions != fixtureOLMVersions {
		t.Errorf("%d OLM versions in the fixtures, want %d", versions, fixtureOLMVersions)
	}
}

// flatFolders returns the files of the version folders of dir that hold a
// CSV at their root (the package-manifest layout), by version.
func flatFolders(t *testing.T, dir, name string) map[string][]pkgformat.File {
	t.Helper()
	out := make(map[string][]pkgformat.File)
	for _, folder := range subdirs(t, dir) {
		if csvs, _ := filepath.Glob(filepath.Join(dir, folder, "*.clusterserviceversion.yaml")); len(csvs) == 0 {
			continue
		}
		files, err := pkgformat.ReadDir(filepath.Join(dir, folder), pkgformat.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		p, err := pkgformat.New(files, pkgformat.Options{Name: name})
		if err != nil {
			t.Fatal(err)
		}
		out[p.Metadata.Version] = files
	}
	return out
}

// subdirs lists the folders in dir.
func subdirs(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() {
			out = append(out, e.Name())
		}
	}
	return out
}

// checkImage checks the manifest, config and layer of b, built from v;
// reused says whether the content blob must be the layer.
func checkImage(t *testing.T, v pushed, b *Bundle, reused bool) {
	t.Helper()
	if b.Manifest.MediaType != ocispec.MediaTypeImageManifest || b.Manifest.Digest != digest.FromBytes(b.Payload) || b.Manifest.Size != int64(len(b.Payload)) {
		t.Fatalf("manifest descriptor %+v does not describe the payload", b.Manifest)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b.Payload, &raw); err != nil {
		t.Fatal(err)
	}
	if _, ok := raw["artifactType"]; ok {
		t.Errorf("manifest has an artifactType: %s", b.Payload)
	}
	var m ocispec.Manifest
	if err := json.Unmarshal(b.Payload, &m); err != nil {
		t.Fatal(err)
	}
	if m.SchemaVersion != 2 || m.MediaType != ocispec.MediaTypeImageManifest {
		t.Errorf("manifest schemaVersion %d mediaType %q", m.SchemaVersion, m.MediaType)
	}
	if m.Subject == nil || !reflect.DeepEqual(*m.Subject, v.subject) {
		t.Errorf("subject %+v, want %+v", m.Subject, v.subject)
	}
	if m.Annotations[AnnotationBundle] != "registry+v1" || len(m.Annotations) != 1 {
		t.Errorf("annotations %v", m.Annotations)
	}
	if len(m.Layers) != 1 || m.Layers[0].MediaType != ocispec.MediaTypeImageLayerGzip {
		t.Fatalf("layers %+v, want one gzipped tar layer", m.Layers)
	}
	layer := m.Layers[0]
	wantBlobs := 2
	if reused {
		wantBlobs = 1
		if layer.Digest != v.content.Digest || layer.Size != v.content.Size {
			t.Errorf("layer %s is not the content %s", layer.Digest, v.content.Digest)
		}
	} else if layer.Digest == v.content.Digest {
		t.Errorf("the content %s was reused though it is not a bundle at its root", layer.Digest)
	}
	if len(b.Blobs) != wantBlobs {
		t.Fatalf("%d blobs, want %d", len(b.Blobs), wantBlobs)
	}
	config := b.Blobs[0]
	if !reflect.DeepEqual(config.Descriptor, m.Config) || m.Config.MediaType != ocispec.MediaTypeImageConfig || config.Descriptor.Digest != digest.FromBytes(config.Data) {
		t.Errorf("config blob %+v does not match the manifest's %+v", config.Descriptor, m.Config)
	}
	layerData := v.data
	if !reused {
		if !reflect.DeepEqual(b.Blobs[1].Descriptor, layer) || layer.Digest != digest.FromBytes(b.Blobs[1].Data) {
			t.Fatalf("layer blob %+v does not match the manifest's %+v", b.Blobs[1].Descriptor, layer)
		}
		layerData = b.Blobs[1].Data
	}
	files, err := pkgformat.ReadArchive(bytes.NewReader(layerData), pkgformat.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	annotations, err := readAnnotations(fileData(files, bundleAnnotationsFile))
	if err != nil {
		t.Fatal(err)
	}
	if !reused {
		checkGeneratedLayer(t, v.p, files, annotations)
	}
	var img ocispec.Image
	if err := json.Unmarshal(config.Data, &img); err != nil {
		t.Fatal(err)
	}
	if img.Architecture != "amd64" || img.OS != "linux" || img.Created != nil || img.History != nil || img.RootFS.Type != "layers" {
		t.Errorf("config %s", config.Data)
	}
	if want := []digest.Digest{uncompressedDigest(t, layerData)}; !slices.Equal(img.RootFS.DiffIDs, want) {
		t.Errorf("diff_ids %v, want %v", img.RootFS.DiffIDs, want)
	}
	wantLabels := map[string]string{}
	for _, key := range bundleLabels {
		if v := annotations[key]; v != "" {
			wantLabels[key] = v
		}
	}
	if !reflect.DeepEqual(img.Config.Labels, wantLabels) || img.Config.Labels[labelPackage] != v.p.Metadata.Name {
		t.Errorf("labels %v, want %v", img.Config.Labels, wantLabels)
	}
	if b.Record.Digest != b.Manifest.Digest.String() || b.Record.Size != b.Manifest.Size {
		t.Errorf("record digest %s size %d, manifest %s %d", b.Record.Digest, b.Record.Size, b.Manifest.Digest, b.Manifest.Size)
	}
}

// checkGeneratedLayer checks the files of a generated layer: the YAML and
// JSON manifests of p under manifests/ and the annotations naming p's
// package and channels.
func checkGeneratedLayer(t *testing.T, p *pkgformat.Package, files []pkgformat.File, annotations map[string]string) {
	t.Helper()
	for _, f := range files {
		if !pkgformat.IsManifestFile(f.Path) || !strings.HasPrefix(f.Path, manifestsDir) && !strings.HasPrefix(f.Path, metadataDir) {
			t.Errorf("generated layer holds %s", f.Path)
		}
	}
	var channels []string
	for _, ch := range p.Metadata.Channels {
		channels = append(channels, ch.Name)
	}
	want := map[string]string{
		labelMediaType: "registry+v1",
		labelManifests: "manifests/",
		labelMetadata:  "metadata/",
		labelPackage:   p.Metadata.Name,
	}
	if len(channels) > 0 {
		want[labelChannels] = strings.Join(channels, ",")
	}
	if p.Metadata.DefaultChannel != "" {
		want[labelDefaultChannel] = p.Metadata.DefaultChannel
	}
	if !reflect.DeepEqual(annotations, want) {
		t.Errorf("annotations %v, want %v", annotations, want)
	}
	for _, f := range p.Files {
		if strings.HasSuffix(f.Path, ".clusterserviceversion.yaml") {
			if at := manifestsDir + strings.TrimPrefix(f.Path, manifestsDir); fileData(files, at) == nil {
				t.Errorf("generated layer lacks the CSV at %s", at)
			}
		}
	}
	again, err := pkgformat.New(files, pkgformat.Options{})
	if err != nil {
		t.Fatalf("generated layer does not read as a package: %v", err)
	}
	if again.Metadata.Name != p.Metadata.Name || again.Metadata.Version != p.Metadata.Version || again.Metadata.DefaultChannel != p.Metadata.DefaultChannel {
		t.Errorf("generated layer reads as %s %s (default channel %q)", again.Metadata.Name, again.Metadata.Version, again.Metadata.DefaultChannel)
	}
}

// uncompressedDigest is the sha256 of the gunzipped data.
func uncompressedDigest(t *testing.T, data []byte) digest.Digest {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return digest.FromBytes(raw)
}

// checkRecord checks the properties of r against what pkgformat read of p.
func checkRecord(t *testing.T, p *pkgformat.Package, r *BundleRecord) {
	t.Helper()
	md := &p.Metadata
	if r.Name != md.CSVName {
		t.Errorf("record name %q, want %q", r.Name, md.CSVName)
	}
	byType := map[string][]json.RawMessage{}
	for i, prop := range r.Properties {
		byType[prop.Type] = append(byType[prop.Type], prop.Value)
		if !json.Valid(prop.Value) {
			t.Errorf("property %s value %s is not JSON", prop.Type, prop.Value)
		}
		if i > 0 && i < len(r.Properties)-1 {
			prev := r.Properties[i-1]
			if prev.Type > prop.Type || prev.Type == prop.Type && string(prev.Value) >= string(prop.Value) {
				t.Errorf("properties out of order: %s %s before %s %s", prev.Type, prev.Value, prop.Type, prop.Value)
			}
		}
	}
	if last := r.Properties[len(r.Properties)-1]; last.Type != propCSVMetadata || len(byType[propCSVMetadata]) != 1 {
		t.Errorf("the last property is %s, want the one %s", last.Type, propCSVMetadata)
	}
	var pkg packageValue
	if len(byType[propPackage]) != 1 || json.Unmarshal(byType[propPackage][0], &pkg) != nil || pkg.PackageName != md.Name || pkg.Version != md.Version {
		t.Errorf("olm.package %s, want %s %s", byType[propPackage], md.Name, md.Version)
	}
	gvks := map[gvkValue]int{}
	for _, raw := range byType[propGVK] {
		var v gvkValue
		if err := json.Unmarshal(raw, &v); err != nil {
			t.Fatal(err)
		}
		gvks[v]++
	}
	for _, api := range md.ProvidedAPIs {
		if n := gvks[gvkValue{Group: api.Group, Kind: api.Kind, Version: api.Version}]; n != 1 {
			t.Errorf("provided API %s/%s %s has %d olm.gvk properties, want 1", api.Group, api.Version, api.Kind, n)
		}
	}
	if len(md.RequiredAPIs) > 0 && len(byType[propGVKRequired]) == 0 {
		t.Errorf("no olm.gvk.required for %v", md.RequiredAPIs)
	}
	var meta csvMetadata
	if err := json.Unmarshal(byType[propCSVMetadata][0], &meta); err != nil {
		t.Fatal(err)
	}
	keywords := slices.Compact(slices.Sorted(slices.Values(meta.Keywords)))
	if meta.DisplayName != md.DisplayName || !slices.Equal(keywords, md.Keywords) {
		t.Errorf("olm.csv.metadata displayName %q keywords %v, want %q %v", meta.DisplayName, meta.Keywords, md.DisplayName, md.Keywords)
	}
	images := map[string]bool{}
	for _, ri := range r.RelatedImages {
		images[ri.Image] = true
	}
	for _, img := range md.RelatedImages {
		if !images[img] {
			t.Errorf("related image %s missing", img)
		}
	}
	if !slices.IsSortedFunc(r.RelatedImages, func(a, b RelatedImage) int { return strings.Compare(a.Image, b.Image) }) {
		t.Errorf("related images not sorted: %v", r.RelatedImages)
	}
	if (md.Icon != nil) != (r.Icon != nil) || r.Icon != nil && digest.FromBytes(r.Icon.Data).String() != md.Icon.Digest {
		t.Errorf("icon %v, want %v", r.Icon, md.Icon)
	}
}

// sameRecord checks that a record of a generated layer is that of the
// pushed content, but for the image's digest and size.
func sameRecord(t *testing.T, want, got *BundleRecord) {
	t.Helper()
	w, g := *want, *got
	w.Digest, w.Size, g.Digest, g.Size = "", 0, "", 0
	if !reflect.DeepEqual(w, g) {
		wj, _ := json.Marshal(w)
		gj, _ := json.Marshal(g)
		t.Errorf("record differs from the pushed content's:\n got %.2000s\nwant %.2000s", gj, wj)
	}
}
