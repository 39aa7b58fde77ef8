package pkgsource

import (
	"encoding/json"
	"fmt"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// AnnotationSources is the manifest annotation of a version built from
// sources: the JSON list of its Built sources, in order.
const AnnotationSources = "dev.berth.package.sources"

// Built is one source of a version as it was built: what the source
// resolved to and where in the package its files went.
type Built struct {
	Resolved
	// Destination is Spec.Destination.
	Destination string `json:"destination,omitempty"`
}

// Annotations are the manifest annotations that record where a version
// came from: AnnotationSources, and for a single source also
// org.opencontainers.image.source (its URL) and
// org.opencontainers.image.revision (its commit, ETag or digest).
func Annotations(built []Built) (map[string]string, error) {
	list, err := json.Marshal(built)
	if err != nil {
		return nil, fmt.Errorf("encode the sources: %w", err)
	}
	a := map[string]string{AnnotationSources: string(list)}
	if len(built) == 1 {
		a[ocispec.AnnotationSource] = built[0].URL
		if built[0].Revision != "" {
			a[ocispec.AnnotationRevision] = built[0].Revision
		}
	}
	return a, nil
}
