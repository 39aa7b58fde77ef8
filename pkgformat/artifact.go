package pkgformat

import (
	"bytes"
	"encoding/json"
	"fmt"
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
// Errors wrap ErrInvalid for an invalid name or version, a reserved name
// (NotReserved) or an unsafe file list.
func (p *Package) Artifact() (*Artifact, error) {
	return p.ArtifactWith(nil)
}

// ArtifactWith is Artifact with extra manifest annotations, such as where
// the package was fetched from (org.opencontainers.image.source and
// .revision), which replace those of the metadata. They cannot replace the
// format, title or version annotations, which name the package: an error
// wrapping ErrInvalid says which was given.
func (p *Package) ArtifactWith(extra map[string]string) (*Artifact, error) {
	md := &p.Metadata
	for _, err := range []error{ValidName(md.Name), NotReserved(md.Name)} {
		if err != nil {
			return nil, err
		}
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
	for key, value := range extra {
		if key == AnnotationFormat || key == ocispec.AnnotationTitle || key == ocispec.AnnotationVersion {
			return nil, fmt.Errorf("annotation %s names the package and cannot be replaced: %w", key, ErrInvalid)
		}
		annotations[key] = value
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
