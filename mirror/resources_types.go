package mirror

import "github.com/berth-registry/berth/catalog/apiv1"

// ClusterResources is what a cluster needs to pull the images of an
// import from the mirror, as WriteClusterResources writes it: the
// mapping for ImageDigestMirrorSet, ImageTagMirrorSet and a containers
// registries.conf drop-in, and the namespaces whose catalog a
// CatalogSource or ClusterCatalog serves.
type ClusterResources struct {
	// Target is the far registry, host[:port].
	Target string
	// Mirrors map each source repository to where its images now live.
	Mirrors []apiv1.ImageMirror
	// ByTag are the source repositories some image of which is named by
	// tag (an ImageTagMirrorSet covers them), ordered.
	ByTag []string
	// OLMNamespaces are the namespaces of the OLM versions imported, for
	// CatalogSource and ClusterCatalog, ordered.
	OLMNamespaces []string
}
