package olm

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"strings"

	"github.com/opencontainers/go-digest"
	"github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"go.yaml.in/yaml/v3"

	"github.com/berth-registry/berth/pkgformat"
)

// The layout and labels of a registry+v1 bundle image.
const (
	// registryV1 is the bundle media type, the value of
	// AnnotationBundle and of the mediatype label.
	registryV1 = "registry+v1"

	bundleAnnotationsFile  = "metadata/annotations.yaml"
	bundleDependenciesFile = "metadata/dependencies.yaml"
	bundlePropertiesFile   = "metadata/properties.yaml"
	manifestsDir           = "manifests/"
	metadataDir            = "metadata/"

	labelMediaType      = "operators.operatorframework.io.bundle.mediatype.v1"
	labelManifests      = "operators.operatorframework.io.bundle.manifests.v1"
	labelMetadata       = "operators.operatorframework.io.bundle.metadata.v1"
	labelPackage        = "operators.operatorframework.io.bundle.package.v1"
	labelChannels       = "operators.operatorframework.io.bundle.channels.v1"
	labelDefaultChannel = "operators.operatorframework.io.bundle.channel.default.v1"

	// dockerLayerGzip is Docker's media type of a gzipped tar layer.
	dockerLayerGzip = "application/vnd.docker.image.rootfs.diff.tar.gzip"
	// tarEntryOverhead is what a tar entry may take beyond its content
	// (headers, PAX records, padding), as pkgformat counts it.
	tarEntryOverhead = 8 << 10
)

// bundleLabels are the annotations of metadata/annotations.yaml that the
// image config carries as labels.
var bundleLabels = []string{labelMediaType, labelManifests, labelMetadata, labelPackage, labelChannels, labelDefaultChannel}

// BuildBundle returns the registry+v1 bundle image of an OLM package version:
// p as pkgformat.New read it, content its content layer descriptor and
// contentData that layer's bytes, subject the version's package manifest,
// which the image names as its subject.
//
// When the content is already a bundle at the root of its tarball
// (metadata/annotations.yaml and the CSV under manifests/), the image's one
// layer is the content blob itself; otherwise (a version folder of the
// package-manifest layout, or a bundle inside a top-level folder) BuildBundle
// generates a layer of the manifests under manifests/ and an annotations.yaml
// naming the package and channels of p.Metadata. The result depends on its
// arguments alone: the same version always yields the same digest.
//
// Errors wrap pkgformat.ErrInvalid for a package that is not OLM or cannot
// make a bundle (no CSV of p's CSV name, owned APIs the bundle lacks, content
// bytes that do not match content or are not a gzipped tar, a subject that is
// not a manifest), or pkgformat.ErrLimit for YAML too large to parse.
func BuildBundle(p *pkgformat.Package, content ocispec.Descriptor, contentData []byte, subject ocispec.Descriptor) (*Bundle, error) {
	if p == nil {
		return nil, fmt.Errorf("olm bundle: no package: %w", pkgformat.ErrInvalid)
	}
	md := &p.Metadata
	if md.Format != pkgformat.OLM {
		return nil, fmt.Errorf("olm bundle: %s %s is a %s package, not OLM: %w", md.Name, md.Version, md.Format, pkgformat.ErrInvalid)
	}
	if err := checkBlob("content", content, contentData); err != nil {
		return nil, err
	}
	if err := checkSubject(subject); err != nil {
		return nil, err
	}
	src := bundleSource(p)
	parsed, err := parseBundle(src)
	if err != nil {
		return nil, fmt.Errorf("olm bundle %s %s: %w", md.Name, md.Version, err)
	}
	if name := parsed.csv.Metadata.Name; name == "" || name != md.CSVName {
		return nil, fmt.Errorf("olm bundle %s %s: %s: the ClusterServiceVersion is named %q, not %q: %w",
			md.Name, md.Version, parsed.csvPath, parsed.csv.Metadata.Name, md.CSVName, pkgformat.ErrInvalid)
	}
	layer, err := bundleLayer(p, src, parsed.csvPath, content, contentData)
	if err != nil {
		return nil, fmt.Errorf("olm bundle %s %s: %w", md.Name, md.Version, err)
	}
	if pkg := strings.TrimSpace(layer.annotations[labelPackage]); pkg != md.Name {
		return nil, fmt.Errorf("olm bundle %s %s: %s names package %q: %w", md.Name, md.Version, bundleAnnotationsFile, pkg, pkgformat.ErrInvalid)
	}
	record, err := parsed.record(md.Name)
	if err != nil {
		return nil, fmt.Errorf("olm bundle %s %s: %w", md.Name, md.Version, err)
	}
	b, err := assemble(layer, subject)
	if err != nil {
		return nil, err
	}
	record.Digest, record.Size = b.Manifest.Digest.String(), b.Manifest.Size
	b.Record = record
	return b, nil
}

// source is what a bundle is made of: the files of its manifests/ and
// metadata/ folders, at their paths in the bundle.
type source struct {
	// bundle is true when p.Files are laid out as a bundle already.
	bundle bool
	files  []pkgformat.File
}

// bundleSource returns the bundle files of p: its own manifests/ and
// metadata/ when it is a bundle, else its YAML and JSON files moved under
// manifests/, as pkgformat's package-manifest import moves them.
func bundleSource(p *pkgformat.Package) source {
	var s source
	for _, f := range p.Files {
		if f.Path == bundleAnnotationsFile || strings.HasPrefix(f.Path, manifestsDir) {
			s.bundle = true
		}
	}
	for _, f := range p.Files {
		switch {
		case s.bundle && (f.Path == bundleDependenciesFile || f.Path == bundlePropertiesFile):
		case s.bundle && strings.HasPrefix(f.Path, manifestsDir) && pkgformat.IsManifestFile(f.Path):
		case !s.bundle && pkgformat.IsManifestFile(f.Path):
			f.Path = manifestsDir + f.Path
		default:
			continue
		}
		s.files = append(s.files, f)
	}
	return s
}

// fileData returns the content of the file at name in files, or nil.
func fileData(files []pkgformat.File, name string) []byte {
	for _, f := range files {
		if f.Path == name {
			return f.Data
		}
	}
	return nil
}

// imageLayer is the one layer of a bundle image.
type imageLayer struct {
	desc   ocispec.Descriptor
	diffID digest.Digest
	// generated is the layer's blob, or nil when it is the content blob.
	generated *Blob
	// annotations are those of its metadata/annotations.yaml.
	annotations map[string]string
}

// bundleLayer returns the image layer of p: the content blob when it is a
// bundle at its root and holds p's files, else a layer generated from src.
func bundleLayer(p *pkgformat.Package, src source, csvPath string, content ocispec.Descriptor, contentData []byte) (*imageLayer, error) {
	found, diffID, err := scanLayer(contentData, layerBudget())
	if err != nil {
		return nil, fmt.Errorf("content %s: %w", content.Digest, err)
	}
	if src.bundle && found[bundleAnnotationsFile] != "" && found[csvPath] != "" {
		if err := sameFiles(found, p.Files); err != nil {
			return nil, fmt.Errorf("content %s: %w", content.Digest, err)
		}
		annotations, err := readAnnotations(fileData(p.Files, bundleAnnotationsFile))
		if err != nil {
			return nil, err
		}
		desc := ocispec.Descriptor{MediaType: ocispec.MediaTypeImageLayerGzip, Digest: content.Digest, Size: content.Size}
		return &imageLayer{desc: desc, diffID: diffID, annotations: annotations}, nil
	}
	annotations := synthesizedAnnotations(&p.Metadata)
	data, err := yaml.Marshal(struct {
		Annotations map[string]string `yaml:"annotations"`
	}{annotations})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", bundleAnnotationsFile, err)
	}
	files := append(slices.Clone(src.files), pkgformat.File{Path: bundleAnnotationsFile, Mode: 0o644, Data: data})
	var buf bytes.Buffer
	if err := pkgformat.WriteArchive(&buf, files); err != nil {
		return nil, err
	}
	if _, diffID, err = scanLayer(buf.Bytes(), layerBudget()); err != nil {
		return nil, fmt.Errorf("generated layer: %w", err)
	}
	desc := ocispec.Descriptor{MediaType: ocispec.MediaTypeImageLayerGzip, Digest: digest.FromBytes(buf.Bytes()), Size: int64(buf.Len())}
	return &imageLayer{desc: desc, diffID: diffID, generated: &Blob{Descriptor: desc, Data: buf.Bytes()}, annotations: annotations}, nil
}

// synthesizedAnnotations are the bundle annotations of a generated layer:
// the layout, and the package and channels of md.
func synthesizedAnnotations(md *pkgformat.Metadata) map[string]string {
	ann := map[string]string{
		labelMediaType: registryV1,
		labelManifests: manifestsDir,
		labelMetadata:  metadataDir,
		labelPackage:   md.Name,
	}
	names := make([]string, 0, len(md.Channels))
	for _, ch := range md.Channels {
		names = append(names, ch.Name)
	}
	if len(names) > 0 {
		ann[labelChannels] = strings.Join(names, ",")
	}
	if md.DefaultChannel != "" {
		ann[labelDefaultChannel] = md.DefaultChannel
	}
	return ann
}

// layerBudget is how large an uncompressed layer may be: what pkgformat's
// default limits allow a package's tarball.
func layerBudget() int64 {
	limits := pkgformat.DefaultLimits()
	return limits.MaxTotalSize + 2*int64(limits.MaxFiles+8)*tarEntryOverhead
}

// scanLayer reads a gzipped tar layer once, within budget uncompressed
// bytes, and returns the sha256 of each regular file by path and the sha256
// of the uncompressed stream (the layer's diff_id). It holds no more than a
// buffer of the uncompressed stream.
func scanLayer(gz []byte, budget int64) (map[string]digest.Digest, digest.Digest, error) {
	compressed := bytes.NewReader(gz)
	zr, err := gzip.NewReader(compressed)
	if err != nil {
		return nil, "", fmt.Errorf("not a gzip stream: %v: %w", err, pkgformat.ErrInvalid)
	}
	zr.Multistream(false)
	diffID := sha256.New()
	limited := &io.LimitedReader{R: zr, N: budget + 1}
	stream := io.TeeReader(limited, diffID)
	tr := tar.NewReader(stream)
	files := make(map[string]digest.Digest)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil && !errors.Is(err, tar.ErrInsecurePath) {
			return nil, "", layerError(err, limited, budget)
		}
		name := strings.TrimPrefix(hdr.Name, "./")
		if path.IsAbs(name) || slices.Contains(strings.Split(name, "/"), "..") {
			return nil, "", fmt.Errorf("tar entry %q is outside the layer root: %w", hdr.Name, pkgformat.ErrInvalid)
		}
		if hdr.Typeflag != tar.TypeReg {
			continue
		}
		h := sha256.New()
		if _, err := io.Copy(h, tr); err != nil {
			return nil, "", layerError(err, limited, budget)
		}
		files[name] = digest.NewDigest(digest.SHA256, h)
	}
	if _, err := io.Copy(io.Discard, stream); err != nil {
		return nil, "", layerError(err, limited, budget)
	}
	if limited.N == 0 {
		return nil, "", layerError(nil, limited, budget)
	}
	if compressed.Len() > 0 {
		return nil, "", fmt.Errorf("data after the end of the gzip stream: %w", pkgformat.ErrInvalid)
	}
	return files, digest.NewDigest(digest.SHA256, diffID), nil
}

// sameFiles checks that the regular files of a layer, by path and sha256,
// are files of the package (whose links pkgformat made copies).
func sameFiles(layer map[string]digest.Digest, files []pkgformat.File) error {
	want := make(map[string][]byte, len(files))
	for _, f := range files {
		want[f.Path] = f.Data
	}
	for name, sum := range layer {
		data, ok := want[name]
		if !ok {
			return fmt.Errorf("%s is not a file of the package: %w", name, pkgformat.ErrInvalid)
		}
		if digest.FromBytes(data) != sum {
			return fmt.Errorf("%s differs from the package's file: %w", name, pkgformat.ErrInvalid)
		}
	}
	return nil
}

// layerError describes an error reading a layer through r, or the layer's
// being larger than budget once r ran out.
func layerError(err error, r *io.LimitedReader, budget int64) error {
	if r.N == 0 {
		return fmt.Errorf("uncompressed layer is larger than %d bytes: %w", budget, pkgformat.ErrLimit)
	}
	return fmt.Errorf("corrupt or truncated layer: %v: %w", err, pkgformat.ErrInvalid)
}

// readAnnotations reads the annotations of a bundle's
// metadata/annotations.yaml as operator-registry does.
func readAnnotations(data []byte) (map[string]string, error) {
	var doc struct {
		Annotations map[string]string `json:"annotations"`
	}
	if err := decodeMetadata(bundleAnnotationsFile, data, &doc); err != nil {
		return nil, err
	}
	return doc.Annotations, nil
}

// checkBlob checks that data is the blob desc describes, a gzipped tar.
func checkBlob(what string, desc ocispec.Descriptor, data []byte) error {
	switch desc.MediaType {
	case pkgformat.ContentMediaType, ocispec.MediaTypeImageLayerGzip, dockerLayerGzip:
	default:
		return fmt.Errorf("olm bundle: %s media type %q is not a gzipped tar: %w", what, desc.MediaType, pkgformat.ErrInvalid)
	}
	if err := desc.Digest.Validate(); err != nil {
		return fmt.Errorf("olm bundle: %s digest %q: %v: %w", what, desc.Digest, err, pkgformat.ErrInvalid)
	}
	if desc.Size != int64(len(data)) {
		return fmt.Errorf("olm bundle: %s %s: %d bytes given, the descriptor says %d: %w", what, desc.Digest, len(data), desc.Size, pkgformat.ErrInvalid)
	}
	if got := desc.Digest.Algorithm().FromBytes(data); got != desc.Digest {
		return fmt.Errorf("olm bundle: %s %s: the bytes given have digest %s: %w", what, desc.Digest, got, pkgformat.ErrInvalid)
	}
	return nil
}

// checkSubject checks that subject describes an image manifest.
func checkSubject(subject ocispec.Descriptor) error {
	if subject.MediaType != ocispec.MediaTypeImageManifest {
		return fmt.Errorf("olm bundle: subject media type %q is not %s: %w", subject.MediaType, ocispec.MediaTypeImageManifest, pkgformat.ErrInvalid)
	}
	if err := subject.Digest.Validate(); err != nil {
		return fmt.Errorf("olm bundle: subject digest %q: %v: %w", subject.Digest, err, pkgformat.ErrInvalid)
	}
	if subject.Size <= 0 {
		return fmt.Errorf("olm bundle: subject %s has size %d: %w", subject.Digest, subject.Size, pkgformat.ErrInvalid)
	}
	return nil
}

// assemble returns the image of layer: its config, carrying the bundle
// labels of the layer's annotations, its manifest, naming subject, and its
// blobs: the config and the layer if generated.
func assemble(layer *imageLayer, subject ocispec.Descriptor) (*Bundle, error) {
	labels := make(map[string]string)
	for _, key := range bundleLabels {
		if v := strings.TrimSpace(layer.annotations[key]); v != "" {
			labels[key] = v
		}
	}
	config := ocispec.Image{
		Platform: ocispec.Platform{Architecture: "amd64", OS: "linux"},
		Config:   ocispec.ImageConfig{Labels: labels},
		RootFS:   ocispec.RootFS{Type: "layers", DiffIDs: []digest.Digest{layer.diffID}},
	}
	configData, err := json.Marshal(config)
	if err != nil {
		return nil, fmt.Errorf("olm bundle: config: %w", err)
	}
	configDesc := ocispec.Descriptor{MediaType: ocispec.MediaTypeImageConfig, Digest: digest.FromBytes(configData), Size: int64(len(configData))}
	manifest := ocispec.Manifest{
		Versioned:   specs.Versioned{SchemaVersion: 2},
		MediaType:   ocispec.MediaTypeImageManifest,
		Config:      configDesc,
		Layers:      []ocispec.Descriptor{layer.desc},
		Subject:     &ocispec.Descriptor{MediaType: subject.MediaType, Digest: subject.Digest, Size: subject.Size},
		Annotations: map[string]string{AnnotationBundle: registryV1},
	}
	payload, err := json.Marshal(manifest)
	if err != nil {
		return nil, fmt.Errorf("olm bundle: manifest: %w", err)
	}
	b := &Bundle{
		Manifest: ocispec.Descriptor{MediaType: ocispec.MediaTypeImageManifest, Digest: digest.FromBytes(payload), Size: int64(len(payload))},
		Payload:  payload,
		Blobs:    []Blob{{Descriptor: configDesc, Data: configData}},
	}
	if layer.generated != nil {
		b.Blobs = append(b.Blobs, *layer.generated)
	}
	return b, nil
}
