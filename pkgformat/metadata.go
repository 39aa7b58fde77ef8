package pkgformat

import "time"

// Media types and annotations of the berth package artifact (DESIGN.md, "Package artifact").
const (
	// ArtifactType is the manifest artifactType of a berth package.
	ArtifactType = "application/vnd.berth.package.v1"
	// ConfigMediaType is the media type of the config blob, which holds the Metadata JSON.
	ConfigMediaType = "application/vnd.berth.package.config.v1+json"
	// ContentMediaType is the media type of layers[0], the package directory as a gzipped tar.
	ContentMediaType = "application/vnd.berth.package.content.v1.tar+gzip"
	// AnnotationFormat is the manifest annotation that names the package format.
	AnnotationFormat = "dev.berth.package.format"
	// MetadataSchemaVersion is the schemaVersion written into every Metadata.
	MetadataSchemaVersion = 1
)

// Format names a package format.
type Format string

// The package formats berth reads.
const (
	KUDO  Format = "kudo"
	OLM   Format = "olm"
	Helm  Format = "helm"
	Plain Format = "plain"
)

// Metadata is the one model every package format maps onto. It is the JSON
// document stored in the package config blob; field names are part of the wire
// format and keep their meaning.
type Metadata struct {
	SchemaVersion int    `json:"schemaVersion"`
	Name          string `json:"name"`
	Version       string `json:"version"`
	Format        Format `json:"format"`
	AppVersion    string `json:"appVersion,omitempty"`
	// OperatorVersion is KUDO's operatorVersion, kept beside Version (which is
	// "<appVersion>_<operatorVersion>" when appVersion is set).
	OperatorVersion string `json:"operatorVersion,omitempty"`
	// CSVName is an OLM ClusterServiceVersion's metadata.name, the name OLM's
	// replaces and skips edges (Channel.Replaces, Channel.Skips) refer to.
	CSVName     string       `json:"csvName,omitempty"`
	DisplayName string       `json:"displayName,omitempty"`
	Description string       `json:"description,omitempty"`
	Keywords    []string     `json:"keywords,omitempty"`
	Maintainers []Maintainer `json:"maintainers,omitempty"`
	Links       []Link       `json:"links,omitempty"`
	License     string       `json:"license,omitempty"`
	// Vendor is the organisation that provides the package (an OLM CSV's
	// spec.provider.name).
	Vendor string `json:"vendor,omitempty"`
	Icon   *Icon  `json:"icon,omitempty"`
	// Channels this version belongs to, with its upgrade edges in each.
	Channels       []Channel `json:"channels,omitempty"`
	DefaultChannel string    `json:"defaultChannel,omitempty"`
	ProvidedAPIs   []API     `json:"providedAPIs,omitempty"`
	RequiredAPIs   []API     `json:"requiredAPIs,omitempty"`
	// RequiredPackages are other packages this one depends on.
	RequiredPackages []PackageRequirement `json:"requiredPackages,omitempty"`
	MinKubeVersion   string               `json:"minKubeVersion,omitempty"`
	MaxKubeVersion   string               `json:"maxKubeVersion,omitempty"`
	Permissions      *Permissions         `json:"permissions,omitempty"`
	RelatedImages    []string             `json:"relatedImages,omitempty"`
	// Images are the container images the version runs, derived from its
	// content per format (docs/package-format.md, "Images"), ordered by
	// reference.
	Images []Image `json:"images,omitempty"`
	// ImagesIncomplete says why Images may miss some: a chart or operator
	// whose templates do not render with their default values. Empty when
	// every image could be derived.
	ImagesIncomplete string `json:"imagesIncomplete,omitempty"`
	// Created comes from the package content (e.g. a CSV's createdAt), never
	// from the clock, so that the same directory always yields the same digest.
	Created *time.Time `json:"created,omitempty"`
	Source  string     `json:"source,omitempty"`
	// Readme is the long description in Markdown (a README file, or an OLM CSV's spec.description).
	Readme string     `json:"readme,omitempty"`
	Files  []FileInfo `json:"files"`
}

// Maintainer is a person or team responsible for a package.
type Maintainer struct {
	Name  string `json:"name"`
	Email string `json:"email,omitempty"`
	URL   string `json:"url,omitempty"`
}

// Link is a named URL (home page, documentation, source).
type Link struct {
	Name string `json:"name"`
	URL  string `json:"url"`
}

// Icon identifies a package icon by content digest, never inline. Path names the
// file that holds it when the icon is a file of the package; URL is set when the
// package only points at an icon elsewhere (Helm's icon field).
type Icon struct {
	MediaType string `json:"mediaType,omitempty"`
	Digest    string `json:"digest,omitempty"`
	Size      int64  `json:"size,omitempty"`
	Path      string `json:"path,omitempty"`
	URL       string `json:"url,omitempty"`
}

// Channel is a channel this version belongs to and its upgrade edges there.
type Channel struct {
	Name      string   `json:"name"`
	Replaces  string   `json:"replaces,omitempty"`
	Skips     []string `json:"skips,omitempty"`
	SkipRange string   `json:"skipRange,omitempty"`
}

// API is a Kubernetes API (usually a CRD) by group, version and kind.
type API struct {
	Group   string `json:"group"`
	Version string `json:"version"`
	Kind    string `json:"kind"`
	// Plural is the resource name when known (e.g. "etcdclusters").
	Plural string `json:"plural,omitempty"`
}

// PackageRequirement names another package and the version range required.
type PackageRequirement struct {
	Name         string `json:"name"`
	VersionRange string `json:"versionRange,omitempty"`
}

// Permissions are the RBAC rules a package asks for.
type Permissions struct {
	Cluster    []PolicyRule `json:"cluster,omitempty"`
	Namespaced []PolicyRule `json:"namespaced,omitempty"`
}

// PolicyRule is a Kubernetes RBAC rule.
type PolicyRule struct {
	APIGroups       []string `json:"apiGroups,omitempty"`
	Resources       []string `json:"resources,omitempty"`
	ResourceNames   []string `json:"resourceNames,omitempty"`
	Verbs           []string `json:"verbs"`
	NonResourceURLs []string `json:"nonResourceURLs,omitempty"`
}

// Image is a container image a version runs, as its content names it.
type Image struct {
	// Reference is the reference as written, normalised to its full form
	// (docker.io/library/nginx:1.25 for nginx:1.25); as written when it
	// does not parse (Problem says why).
	Reference string `json:"reference"`
	// Found lists where the content names it, e.g. "CSV spec.relatedImages
	// (etcd-operator)" or "templates/deployment.yaml: Deployment my-app,
	// container app".
	Found []string `json:"found"`
	// Mutable is true when the reference names a tag rather than a digest:
	// what it pulls can change.
	Mutable bool `json:"mutable,omitempty"`
	// Problem says why the reference is not a valid image reference; empty
	// when it is.
	Problem string `json:"problem,omitempty"`
}

// FileInfo is one file of the package content.
type FileInfo struct {
	Path string `json:"path"`
	Size int64  `json:"size"`
}
