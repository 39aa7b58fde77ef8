package olm

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/berth-registry/berth/pkgformat"
)

// The reserved reference of a namespace's catalog image. Package
// repositories are exactly <namespace>/<name> (pkgformat.ValidRepository),
// so a repository of three components can never be a package's; no package
// may be pushed under the name of its second component
// (pkgformat.ReservedName), whose repository would hold it in its path.
const (
	// catalogRepositorySuffix follows the namespace in CatalogRepository.
	catalogRepositorySuffix = "/" + pkgformat.ReservedName + "/catalog"
	// CatalogTag is the tag of the current catalog image.
	CatalogTag = "latest"
)

// CatalogRepository is the repository of namespace's catalog image.
func CatalogRepository(namespace string) string { return namespace + catalogRepositorySuffix }

// CatalogObjectName is the name of the Kubernetes objects that serve
// namespace's catalog to a cluster (ClusterCatalog, CatalogSource, opm's
// Deployment and Service): "berth-<namespace>", made a DNS-1035 label (a
// Service's name, and a label value): '.' and '_' written '-', and when
// that changed the name or it is longer than 63 characters, cut and
// followed by 8 hex digits of the namespace's sha256, so that two
// namespaces never share a name.
func CatalogObjectName(namespace string) string {
	name := "berth-" + strings.NewReplacer(".", "-", "_", "-").Replace(namespace)
	if name == "berth-"+namespace && len(name) <= 63 {
		return name
	}
	sum := sha256.Sum256([]byte(namespace))
	return strings.TrimRight(name[:min(len(name), 63-9)], "-") + "-" + hex.EncodeToString(sum[:4])
}

// CatalogNamespace reports whether repo is a namespace's catalog repository,
// and which namespace's.
func CatalogNamespace(repo string) (string, bool) {
	ns, ok := strings.CutSuffix(repo, catalogRepositorySuffix)
	if !ok || pkgformat.ValidNamespace(ns) != nil {
		return "", false
	}
	return ns, true
}

// OpmImage is the opm image that serves a namespace's catalog image to OLM
// v0 (docs/olm.md): the opm release berth's catalog images are tested with
// (tools/opm).
const OpmImage = "quay.io/operator-framework/opm:v1.69.0"

// Labels and media types of the images berth generates.
const (
	// LabelConfigs marks a catalog image and names its FBC directory.
	LabelConfigs = "operators.operatorframework.io.index.configs.v1"
	// ConfigsDir is where a catalog image holds its FBC.
	ConfigsDir = "/configs"
	// AnnotationBundle marks a bundle image berth generated, on its
	// manifest; its value is "registry+v1".
	AnnotationBundle = "dev.berth.olm.bundle"
)

// Blob is one blob of a generated image, with its bytes.
type Blob struct {
	Descriptor ocispec.Descriptor
	Data       []byte
}

// Bundle is the bundle image of one OLM package version, as BuildBundle
// generates it.
type Bundle struct {
	// Manifest is the image manifest's descriptor (media type, digest,
	// size) and Payload its bytes.
	Manifest ocispec.Descriptor
	Payload  []byte
	// Blobs are the blobs to store besides the version's content layer,
	// which the image reuses when it is already bundle-shaped: the config,
	// and a generated layer when it is not.
	Blobs []Blob
	// Record is what the catalog keeps of it.
	Record *BundleRecord
}

// BundleRecord is what the catalog keeps of a version's bundle image: its
// digest, and the parts of the version's olm.bundle FBC document that come
// from the CSV, so that the catalog can render the FBC without reading the
// content again.
type BundleRecord struct {
	// Digest and Size of the bundle image manifest.
	Digest string `json:"digest"`
	Size   int64  `json:"size"`
	// Name is the bundle's name: the CSV's metadata.name.
	Name string `json:"name"`
	// Properties are the olm.bundle properties as opm render writes them:
	// olm.gvk, olm.gvk.required, olm.package, olm.package.required and
	// those of the bundle's properties.yaml and its CSV's olm.properties,
	// sorted by type then value, and olm.csv.metadata last.
	Properties []Property `json:"properties"`
	// RelatedImages are the CSV's spec.relatedImages and the images of its
	// deployments (not the bundle image itself, whose reference depends
	// on the host: RenderPackage adds it).
	RelatedImages []RelatedImage `json:"relatedImages,omitempty"`
	// Icon is the CSV's first icon, for the package's olm.package document.
	Icon *Icon `json:"icon,omitempty"`
	// Description is the CSV's spec.description, for the olm.package document.
	Description string `json:"description,omitempty"`
}

// Property is one FBC property: a type and its JSON value.
type Property struct {
	Type  string          `json:"type"`
	Value json.RawMessage `json:"value"`
}

// RelatedImage is one entry of an olm.bundle's relatedImages.
type RelatedImage struct {
	Name  string `json:"name"`
	Image string `json:"image"`
}

// Icon is a package icon as FBC carries it.
type Icon struct {
	Data      []byte `json:"base64data"` // encoding/json writes it in base64
	MediaType string `json:"mediatype"`
}

// Version is one indexed OLM version of a package, as RenderPackage and the
// Publisher need it.
type Version struct {
	// Version is the version's tag, Digest its package manifest's digest.
	Version, Digest string
	Metadata        *pkgformat.Metadata
	// Bundle is nil for a version whose bundle image could not be built;
	// such a version is left out of the FBC.
	Bundle *BundleRecord
}
