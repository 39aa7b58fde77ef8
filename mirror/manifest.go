package mirror

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/berth-registry/berth/catalog/apiv1"
)

// Archive file names: the archive manifest, its cosign sign-blob signature,
// and the listing that ends each part of a split archive.
const (
	ManifestFile  = "berth-mirror.json"
	SignatureFile = "berth-mirror.json.sig"
	PartFile      = "berth-part.json"
)

// Media types of berth's own mirror documents.
const (
	ManifestMediaType  = "application/vnd.berth.mirror.manifest.v1+json"
	PartMediaType      = "application/vnd.berth.mirror.part.v1+json"
	InventoryMediaType = apiv1.InventoryMediaType
)

// Manifest is the archive manifest, berth-mirror.json: what an archive
// holds and what the far side needs already.
type Manifest struct {
	SchemaVersion int    `json:"schemaVersion"`
	MediaType     string `json:"mediaType"`
	// Source is the registry the versions were exported from, host[:port].
	Source string `json:"source"`
	// Created is when the export ran.
	Created time.Time `json:"created"`
	// Selection is what was asked for.
	Selection *Selection `json:"selection,omitempty"`
	// Base says what the far side was known to hold when the archive was
	// made: the inventory or previous archive the delta was taken against.
	Base *Base `json:"base,omitempty"`
	// Versions are the versions exported, by repository and tag.
	Versions []Version `json:"versions"`
	// Images are the container images the versions run, each once by
	// reference, ordered by reference; empty in an archive made with
	// --images=false or before berth carried images.
	Images []Image `json:"images,omitempty"`
	// Content is every manifest and blob the versions and images need,
	// once each, ordered by digest, whether the archive carries it or not.
	Content []Entry `json:"content"`
	// Parts are the parts of a split archive, in order; empty when it is
	// one file or directory.
	Parts []Part `json:"parts,omitempty"`
}

// Version is one exported package version.
type Version struct {
	// Repository is namespace/name.
	Repository string `json:"repository"`
	// Tag is the version's tag in the repository.
	Tag string `json:"tag"`
	// Version is the package version ("" when the tag is not one).
	Version string `json:"version,omitempty"`
	// Format is the package format, as the source's catalog has it.
	Format string `json:"format,omitempty"`
	// Digest is the digest of the version's manifest.
	Digest digest.Digest `json:"digest"`
	// Tags are cosign's tags (sha256-<hex>.sig, .att, .sbom) of the version
	// and of its referrers, with the manifest each names.
	Tags []Tag `json:"tags,omitempty"`
	// Referrers are the manifests that refer to the version, directly or
	// through another referrer, ordered by digest.
	Referrers []digest.Digest `json:"referrers,omitempty"`
	// Needs is every manifest and blob the version, its tags and referrers
	// need in its repository, the version's manifest included, ordered by
	// digest.
	Needs []digest.Digest `json:"needs"`
}

// Image is one container image the exported versions run, carried by
// digest.
type Image struct {
	// Repository is the source repository, normalised (quay.io/org/img,
	// docker.io/library/nginx): the name the image keeps in the archive,
	// the mapping and generated resources, whatever --registry-map read it
	// from.
	Repository string `json:"repository"`
	// Reference is the reference as the versions' content names it,
	// normalised (docker.io/library/nginx:1.25).
	Reference string `json:"reference"`
	// Tag is the tag Reference names, if any; Digest is what the tag named
	// at export, or the digest Reference names.
	Tag    string        `json:"tag,omitempty"`
	Digest digest.Digest `json:"digest,omitempty"`
	// MediaType is the media type of the manifest or index Digest names.
	MediaType string `json:"mediaType,omitempty"`
	// Platforms are the platforms (os/arch[/variant]) whose manifests the
	// archive carries of an index exported with --platform; empty when
	// every child is carried. The index itself is carried unchanged, so
	// that its digest stays the one the packages name.
	Platforms []string `json:"platforms,omitempty"`
	// Tags are cosign's tags (sha256-<hex>.sig, .att, .sbom) of the image,
	// of the children carried and of the referrers, with the manifest
	// each names.
	Tags []Tag `json:"tags,omitempty"`
	// Referrers are the manifests that refer to the image or a carried
	// child, directly or through another referrer, ordered by digest.
	Referrers []digest.Digest `json:"referrers,omitempty"`
	// Needs is every manifest and blob the image, its tags and referrers
	// need, ordered by digest.
	Needs []digest.Digest `json:"needs,omitempty"`
	// Versions are the versions that run the image, as repository:tag,
	// ordered.
	Versions []string `json:"versions"`
	// Problem says why the image is not carried (it could not be read, or
	// its reference is not valid); empty when it is.
	Problem string `json:"problem,omitempty"`
}

// Tag is a tag and the manifest it names.
type Tag struct {
	Tag    string        `json:"tag"`
	Digest digest.Digest `json:"digest"`
}

// Entry is a manifest or blob the versions need.
type Entry struct {
	Digest    digest.Digest `json:"digest"`
	Size      int64         `json:"size"`
	MediaType string        `json:"mediaType"`
	// Manifest says it is a manifest or index (pushed by digest to each
	// repository that needs it) rather than a blob.
	Manifest bool `json:"manifest,omitempty"`
	// Carried says the archive holds it. When false the far side holds it
	// already, in repository At (for a blob, a repository to mount it from).
	Carried bool   `json:"carried"`
	At      string `json:"at,omitempty"`
	// Part is the number of the part that carries it, from 1, in a split
	// archive; 0 otherwise.
	Part int `json:"part,omitempty"`
}

// Base is what the far side held when a delta was made.
type Base struct {
	// Kind is "inventory" or "archive".
	Kind string `json:"kind"`
	// Registry is the inventory's registry; empty for an archive.
	Registry string `json:"registry,omitempty"`
	// Taken is when the inventory was taken or the previous archive made.
	Taken time.Time `json:"taken"`
	// Digest is the sha256 digest of the inventory or previous manifest file.
	Digest digest.Digest `json:"digest"`
}

// Part is one part of a split archive.
type Part struct {
	// Number counts from 1.
	Number int `json:"number"`
	// File is the part's file name.
	File string `json:"file"`
	// Size is the part's size in bytes, and Digest the sha256 of its bytes;
	// both are empty for the last part, which holds this manifest.
	Size   int64         `json:"size,omitempty"`
	Digest digest.Digest `json:"digest,omitempty"`
}

// PartListing is berth-part.json, the last entry of each part of a split
// archive: which part it is and every entry it holds, so that a part can be
// checked on its own.
type PartListing struct {
	MediaType string `json:"mediaType"`
	// Archive identifies the archive the part belongs to: the same value in
	// every part of one export.
	Archive string `json:"archive"`
	Number  int    `json:"number"`
	// Last says this part holds index.json and the archive manifest.
	Last bool `json:"last,omitempty"`
	// Blobs are the blobs the part holds, in the order written.
	Blobs []PartBlob `json:"blobs"`
}

// PartBlob is a blob held by a part.
type PartBlob struct {
	Digest digest.Digest `json:"digest"`
	Size   int64         `json:"size"`
}

// Inventory is what a registry holds: for each repository, the digests of
// the manifests and blobs it has. berth mirror inventory writes it and
// export --inventory reads it; a berth server answers it at
// GET /api/v1/inventory.
type Inventory = apiv1.Inventory

// maxManifestFile caps the archive manifest read by ReadManifest.
const maxManifestFile = 256 << 20

// ReadManifest reads an archive manifest file (berth-mirror.json), as
// export --since takes it, and returns it with the sha256 digest of the
// file's bytes.
func ReadManifest(path string) (*Manifest, digest.Digest, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, "", err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxManifestFile+1))
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", path, err)
	}
	if len(b) > maxManifestFile {
		return nil, "", fmt.Errorf("%s: larger than %d bytes", path, maxManifestFile)
	}
	m, err := parseManifestFile(b)
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", path, err)
	}
	return m, digest.FromBytes(b), nil
}

// parseManifestFile decodes an archive manifest and checks its media type.
func parseManifestFile(b []byte) (*Manifest, error) {
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%s is not valid JSON: %w", ManifestFile, err)
	}
	if m.MediaType != ManifestMediaType {
		return nil, fmt.Errorf("%s has mediaType %q, not %s", ManifestFile, m.MediaType, ManifestMediaType)
	}
	return &m, nil
}
