package pkgformat

import (
	"cmp"
	"encoding/json"
	"fmt"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// Media types of a Helm chart pushed by `helm push`.
const (
	// HelmConfigMediaType is the config media type of a Helm chart. berth
	// treats such charts as packages: their tags are immutable and the catalog
	// indexes them.
	HelmConfigMediaType = "application/vnd.cncf.helm.config.v1+json"
	// HelmChartContentMediaType is the layer that holds the chart tarball.
	HelmChartContentMediaType = "application/vnd.cncf.helm.chart.content.v1.tar+gzip"
)

// orasUnknownArtifactType is the artifactType `oras push` writes when it is
// given none: it says nothing about what the artifact is.
const orasUnknownArtifactType = "application/vnd.unknown.artifact.v1"

// Kind is what a manifest is to berth.
type Kind int

// The kinds of manifest ClassifyManifest tells apart.
const (
	// NotPackage is any manifest that is not a package version: its tags are
	// mutable, tag admission does not apply and the catalog never serves it.
	NotPackage Kind = iota
	// BerthPackage is a berth package (DESIGN.md, "Package artifact").
	BerthPackage
	// HelmChart is a Helm chart pushed by `helm push`.
	HelmChart
)

// Manifest is what ClassifyManifest found a manifest to be.
type Manifest struct {
	Kind Kind
	// Content is the package tarball (a berth package's layers[0], or the
	// chart layer of a Helm chart); zero for NotPackage.
	Content ocispec.Descriptor
	// Reason says why a manifest is NotPackage.
	Reason string
	// Parsed is the manifest as decoded; zero when it is not JSON.
	Parsed ocispec.Manifest
}

// IsPackage reports whether the manifest is a package version.
func (m Manifest) IsPackage() bool { return m.Kind != NotPackage }

// ClassifyManifest is berth's one definition of a package version. The
// registry's immutability guard and tag admission, the catalog's indexer and
// the client all decide with it, so that whatever the catalog serves as a
// version is exactly what the registry protects.
//
// mediaType is the manifest's media type as the registry stores it (the
// Content-Type it was pushed with); the payload's own mediaType, when set,
// must agree. A manifest is a package version when it is an OCI image
// manifest and either
//   - a berth package: its config is the berth config or the OCI empty
//     config, its artifactType is berth's or unset (or oras's placeholder for
//     unset), and layers[0] is the berth content layer; or
//   - a Helm chart: its config is Helm's, its artifactType is unset or Helm's
//     config media type, and one of its layers is the chart.
//
// Everything else, including image manifests, indexes and artifacts of other
// types that carry a berth layer, is NotPackage, with the reason.
func ClassifyManifest(mediaType string, payload []byte) Manifest {
	var m ocispec.Manifest
	if err := json.Unmarshal(payload, &m); err != nil {
		return Manifest{Reason: fmt.Sprintf("manifest is not JSON: %v", err)}
	}
	if m.MediaType != "" && mediaType != "" && m.MediaType != mediaType {
		return Manifest{Reason: fmt.Sprintf("not a package: the manifest says it is a %s but was stored as a %s", m.MediaType, mediaType)}
	}
	m.MediaType = cmp.Or(m.MediaType, mediaType)
	out := Manifest{Parsed: m}
	if m.MediaType != ocispec.MediaTypeImageManifest {
		out.Reason = fmt.Sprintf("not a package: a %s", m.MediaType)
		return out
	}
	artifactType := m.ArtifactType
	if artifactType == orasUnknownArtifactType {
		artifactType = ""
	}
	cfg := m.Config.MediaType
	claimsBerth := artifactType == ArtifactType || cfg == ConfigMediaType
	switch {
	case cfg == HelmConfigMediaType && (artifactType == "" || artifactType == HelmConfigMediaType):
		for _, l := range m.Layers {
			if l.MediaType == HelmChartContentMediaType {
				out.Kind, out.Content = HelmChart, l
				return out
			}
		}
		out.Reason = "Helm chart manifest has no layer of media type " + HelmChartContentMediaType
	case (cfg == ConfigMediaType || cfg == ocispec.MediaTypeEmptyJSON) && (artifactType == "" || artifactType == ArtifactType):
		if len(m.Layers) > 0 && m.Layers[0].MediaType == ContentMediaType {
			out.Kind, out.Content = BerthPackage, m.Layers[0]
			return out
		}
		if claimsBerth {
			out.Reason = "package manifest has no content layer: layers[0] must be of media type " + ContentMediaType
		} else {
			out.Reason = "not a package: an artifact with an empty config and no berth content layer at layers[0]"
		}
	case claimsBerth:
		out.Reason = fmt.Sprintf("not a package: artifactType %q with config media type %q", m.ArtifactType, cfg)
	default:
		out.Reason = fmt.Sprintf("not a package: artifact of type %s", cmp.Or(m.ArtifactType, cfg))
	}
	return out
}
