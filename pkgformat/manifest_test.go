package pkgformat

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// layerOf describes a blob of mediaType.
func layerOf(mediaType string) ocispec.Descriptor {
	return ocispec.Descriptor{MediaType: mediaType, Digest: digest.FromString(mediaType), Size: 1}
}

// manifestJSON encodes an OCI image manifest of these parts.
func manifestJSON(t *testing.T, mediaType, artifactType, config string, layers ...string) []byte {
	t.Helper()
	m := ocispec.Manifest{MediaType: mediaType, ArtifactType: artifactType, Config: layerOf(config), Layers: []ocispec.Descriptor{}}
	m.SchemaVersion = 2
	for _, l := range layers {
		m.Layers = append(m.Layers, layerOf(l))
	}
	b, err := json.Marshal(m)
	must(t, err)
	return b
}

// TestClassifyManifest is the one definition of a package version, over the
// shapes of manifest a pusher can send.
func TestClassifyManifest(t *testing.T) {
	const (
		oci     = ocispec.MediaTypeImageManifest
		empty   = ocispec.MediaTypeEmptyJSON
		image   = ocispec.MediaTypeImageConfig
		imgLyr  = ocispec.MediaTypeImageLayerGzip
		unknown = "application/vnd.unknown.artifact.v1"
		other   = "application/vnd.example.thing.v1"
		helmPrv = "application/vnd.cncf.helm.chart.provenance.v1.prov"
		docker  = "application/vnd.docker.distribution.manifest.v2+json"
	)
	tests := []struct {
		name      string
		stored    string // the media type the registry stores the manifest under
		payload   []byte
		want      Kind
		content   int    // index of the content layer, for a package
		reasonHas string // for NotPackage
	}{
		{"berth push: artifactType, berth config, content", oci, manifestJSON(t, oci, ArtifactType, ConfigMediaType, ContentMediaType), BerthPackage, 0, ""},
		{"berth config without artifactType", oci, manifestJSON(t, oci, "", ConfigMediaType, ContentMediaType), BerthPackage, 0, ""},
		{"oras push --artifact-type, empty config", oci, manifestJSON(t, oci, ArtifactType, empty, ContentMediaType), BerthPackage, 0, ""},
		{"oras push without --artifact-type (oras's placeholder)", oci, manifestJSON(t, oci, unknown, empty, ContentMediaType), BerthPackage, 0, ""},
		{"no artifactType, empty config, content", oci, manifestJSON(t, oci, "", empty, ContentMediaType), BerthPackage, 0, ""},
		{"content first, more layers after", oci, manifestJSON(t, oci, ArtifactType, ConfigMediaType, ContentMediaType, imgLyr), BerthPackage, 0, ""},
		{"manifest without mediaType, stored as OCI", oci, manifestJSON(t, "", ArtifactType, ConfigMediaType, ContentMediaType), BerthPackage, 0, ""},
		{"helm push", oci, manifestJSON(t, oci, "", HelmConfigMediaType, HelmChartContentMediaType), HelmChart, 0, ""},
		{"helm chart with provenance first", oci, manifestJSON(t, oci, "", HelmConfigMediaType, helmPrv, HelmChartContentMediaType), HelmChart, 1, ""},
		{"helm config as artifactType", oci, manifestJSON(t, oci, HelmConfigMediaType, HelmConfigMediaType, HelmChartContentMediaType), HelmChart, 0, ""},

		{"berth artifactType, content as a later layer", oci, manifestJSON(t, oci, ArtifactType, ConfigMediaType, imgLyr, ContentMediaType), NotPackage, 0, "no content layer"},
		{"empty config, content as a later layer", oci, manifestJSON(t, oci, "", empty, imgLyr, ContentMediaType), NotPackage, 0, "no berth content layer"},
		{"berth artifactType, no layers", oci, manifestJSON(t, oci, ArtifactType, empty), NotPackage, 0, "no content layer"},
		{"empty config, other layer", oci, manifestJSON(t, oci, "", empty, imgLyr), NotPackage, 0, "no berth content layer"},
		{"image manifest carrying a berth layer", oci, manifestJSON(t, oci, "", image, ContentMediaType), NotPackage, 0, "artifact of type " + image},
		{"berth artifactType with an image config", oci, manifestJSON(t, oci, ArtifactType, image, ContentMediaType), NotPackage, 0, "with config media type"},
		{"other artifactType, empty config, berth layer", oci, manifestJSON(t, oci, other, empty, ContentMediaType), NotPackage, 0, "artifact of type " + other},
		{"other artifactType, berth config", oci, manifestJSON(t, oci, other, ConfigMediaType, ContentMediaType), NotPackage, 0, "with config media type"},
		{"helm config, no chart layer", oci, manifestJSON(t, oci, "", HelmConfigMediaType, ContentMediaType), NotPackage, 0, "no layer of media type " + HelmChartContentMediaType},
		{"helm config, berth artifactType", oci, manifestJSON(t, oci, ArtifactType, HelmConfigMediaType, HelmChartContentMediaType), NotPackage, 0, "with config media type"},
		{"cosign signature", oci, manifestJSON(t, oci, "", "application/vnd.oci.image.config.v1+json", "application/vnd.dev.cosign.simplesigning.v1+json"), NotPackage, 0, "artifact of type"},
		{"docker image manifest with a berth layer", docker, manifestJSON(t, docker, "", ConfigMediaType, ContentMediaType), NotPackage, 0, "a " + docker},
		{"payload says OCI, stored as docker", docker, manifestJSON(t, oci, ArtifactType, ConfigMediaType, ContentMediaType), NotPackage, 0, "stored as a " + docker},
		{"image index", ocispec.MediaTypeImageIndex, []byte(`{"schemaVersion":2,"mediaType":"` + ocispec.MediaTypeImageIndex + `","artifactType":"` + ArtifactType + `","manifests":[]}`), NotPackage, 0, "a " + ocispec.MediaTypeImageIndex},
		{"not JSON", oci, []byte("{"), NotPackage, 0, "not JSON"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ClassifyManifest(tt.stored, tt.payload)
			if got.Kind != tt.want {
				t.Fatalf("kind %v, want %v (reason %q)", got.Kind, tt.want, got.Reason)
			}
			if got.IsPackage() != (tt.want != NotPackage) {
				t.Errorf("IsPackage %v for kind %v", got.IsPackage(), got.Kind)
			}
			if tt.want == NotPackage {
				if got.Content.Digest != "" || !strings.Contains(got.Reason, tt.reasonHas) {
					t.Errorf("content %v, reason %q, want a reason with %q", got.Content, got.Reason, tt.reasonHas)
				}
				return
			}
			if got.Reason != "" || got.Content.Digest != got.Parsed.Layers[tt.content].Digest {
				t.Errorf("content %v (reason %q), want layers[%d] %v", got.Content, got.Reason, tt.content, got.Parsed.Layers[tt.content])
			}
		})
	}
}
