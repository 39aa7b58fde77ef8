package pkgformat

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/opencontainers/go-digest"
	"github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// Artifact is everything needed to push a package: the manifest, config and
// content blobs and their descriptors.
type Artifact struct {
	Manifest     []byte
	ManifestDesc ocispec.Descriptor
	Config       []byte
	ConfigDesc   ocispec.Descriptor
	Content      []byte
	ContentDesc  ocispec.Descriptor
}

// Artifact builds the OCI image manifest of the package (DESIGN.md, "Package
// artifact"): artifactType ArtifactType, the Metadata JSON as config
// (ConfigMediaType), the reproducible content tarball as the one layer
// (ContentMediaType, titled ContentTitle), and org.opencontainers.image.*
// and dev.berth.package.format annotations. Nothing comes from the clock or
// the host, so the same package always gives the same manifest digest.
// Errors wrap ErrInvalid for an invalid name or version or an unsafe file list.
func (p *Package) Artifact() (*Artifact, error) {
	md := &p.Metadata
	if err := ValidName(md.Name); err != nil {
		return nil, err
	}
	if err := ValidVersion(md.Version); err != nil {
		return nil, err
	}
	config, err := marshalJSON(md)
	if err != nil {
		return nil, fmt.Errorf("encode metadata: %w", err)
	}
	content, err := p.Archive()
	if err != nil {
		return nil, err
	}
	a := &Artifact{
		Config:     config,
		ConfigDesc: blobDescriptor(ConfigMediaType, config),
		Content:    content,
	}
	a.ContentDesc = blobDescriptor(ContentMediaType, content)
	a.ContentDesc.Annotations = map[string]string{ocispec.AnnotationTitle: ContentTitle(md.Name, md.Version)}
	annotations := map[string]string{AnnotationFormat: string(md.Format)}
	for key, value := range map[string]string{
		ocispec.AnnotationTitle:       md.Name,
		ocispec.AnnotationVersion:     md.Version,
		ocispec.AnnotationDescription: md.Description,
		ocispec.AnnotationSource:      md.Source,
		ocispec.AnnotationLicenses:    md.License,
		ocispec.AnnotationVendor:      md.Vendor,
	} {
		if value != "" {
			annotations[key] = value
		}
	}
	if md.Created != nil {
		annotations[ocispec.AnnotationCreated] = md.Created.UTC().Format(time.RFC3339)
	}
	manifest := ocispec.Manifest{
		Versioned:    specs.Versioned{SchemaVersion: 2},
		MediaType:    ocispec.MediaTypeImageManifest,
		ArtifactType: ArtifactType,
		Config:       a.ConfigDesc,
		Layers:       []ocispec.Descriptor{a.ContentDesc},
		Annotations:  annotations,
	}
	if a.Manifest, err = marshalJSON(manifest); err != nil {
		return nil, fmt.Errorf("encode manifest: %w", err)
	}
	a.ManifestDesc = blobDescriptor(ocispec.MediaTypeImageManifest, a.Manifest)
	a.ManifestDesc.ArtifactType = ArtifactType
	a.ManifestDesc.Annotations = annotations
	return a, nil
}

// marshalJSON encodes v as compact JSON without escaping <, > and & (which
// skip ranges such as ">=1.0.0 <1.1.0" hold): a deterministic encoding, since
// struct fields keep their order and map keys are sorted.
func marshalJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// blobDescriptor describes data of the given media type.
func blobDescriptor(mediaType string, data []byte) ocispec.Descriptor {
	return ocispec.Descriptor{MediaType: mediaType, Digest: digest.FromBytes(data), Size: int64(len(data))}
}

// MetadataFromArtifact returns the metadata of a pushed package from its
// config blob and, where needed, its content tarball:
//   - ConfigMediaType: the config is the Metadata JSON; content is not read.
//   - the OCI empty config (application/vnd.oci.empty.v1+json), as plain
//     `oras push` writes: the metadata is derived from the content tarball
//     with New, opts.Name and opts.Version giving the repository's name and
//     the tag where the package carries none.
//   - HelmConfigMediaType: from the content (the chart tarball) when given,
//     else from the config, which is Chart.yaml as JSON.
//
// Name and version must be valid and, when opts sets them, match (versions
// compared as tags). Errors wrap ErrInvalid (unknown config media type, bad
// JSON, missing content, or any error of ReadArchive and New) or ErrLimit.
func MetadataFromArtifact(config []byte, configMediaType string, content io.Reader, opts Options) (*Metadata, error) {
	opts.Limits = opts.Limits.withDefaults()
	const configName = "config"
	if int64(len(config)) > opts.Limits.MaxFileSize {
		return nil, overLimit(configName, "config blob is larger than %d bytes", opts.Limits.MaxFileSize)
	}
	var md *Metadata
	switch {
	case configMediaType == ConfigMediaType:
		md = new(Metadata)
		if err := json.Unmarshal(config, md); err != nil {
			return nil, invalid(configName, "package metadata is not valid JSON: %v", err)
		}
		if md.Format == "" {
			return nil, invalid(configName, "package metadata has no format")
		}
	case configMediaType == HelmConfigMediaType && content == nil:
		m, err := helmMetadata(configName, config, newYAMLBudget(opts.Context, opts.Limits))
		if err != nil {
			return nil, err
		}
		md = m
		md.SchemaVersion = MetadataSchemaVersion
		normalize(md)
	case configMediaType == ocispec.MediaTypeEmptyJSON || configMediaType == HelmConfigMediaType:
		if content == nil {
			return nil, invalid("content", "the config is empty, so the metadata must come from the content, which is missing")
		}
		files, err := ReadArchive(content, opts.Limits)
		if err != nil {
			return nil, err
		}
		p, err := New(files, opts)
		if err != nil {
			return nil, err
		}
		return &p.Metadata, nil
	default:
		return nil, invalid(configName, "unsupported config media type %q", configMediaType)
	}
	if err := finishConfig(md, configName, opts); err != nil {
		return nil, err
	}
	return md, nil
}

// finishConfig checks the name and version of metadata read from a config
// blob, and that they match opts.
func finishConfig(md *Metadata, file string, opts Options) error {
	if err := ValidName(md.Name); err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	if err := ValidVersion(md.Version); err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	if opts.Name != "" && opts.Name != md.Name {
		return invalid(file, "package name %q does not match the expected name %q", md.Name, opts.Name)
	}
	if opts.Version != "" && Tag(opts.Version) != Tag(md.Version) {
		return invalid(file, "version %q does not match the expected version %q", md.Version, opts.Version)
	}
	return nil
}
