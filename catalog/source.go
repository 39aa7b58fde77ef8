package catalog

import (
	"context"
	"io"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// Source is the registry the catalog indexes: in berth serve the embedded
// registry, read in process (DistributionSource); split, any OCI registry
// read over the distribution API (RemoteSource). Methods return errors
// wrapping ErrNotFound for a repository, tag or blob that does not exist, and
// ErrUnavailable when the registry cannot be read.
type Source interface {
	// Repositories lists every repository.
	Repositories(ctx context.Context) ([]string, error)
	// Tags lists the tags of a repository with the manifest digest each names.
	Tags(ctx context.Context, repo string) ([]TagRef, error)
	// Resolve returns the digest a tag names now.
	Resolve(ctx context.Context, repo, tag string) (string, error)
	// Manifest returns a manifest's media type and bytes.
	Manifest(ctx context.Context, repo, digest string) (mediaType string, payload []byte, err error)
	// Blob opens a blob of the repository.
	Blob(ctx context.Context, repo, digest string) (io.ReadCloser, error)
	// Referrers lists the manifests of the repository whose subject is
	// digest (OCI referrers): none for an unknown repository or digest.
	Referrers(ctx context.Context, repo, digest string) ([]ocispec.Descriptor, error)
	// DeleteRepository deletes every manifest and tag of a repository.
	DeleteRepository(ctx context.Context, repo string) error
}

// TagRepairer is a Source that can also remove the dangling tags of a
// repository — listed, yet naming no manifest — as it lists them: the
// reconciler lists tags through it, so that such tags, which a crash in the
// middle of a delete can leave, go at the next reconciliation.
type TagRepairer interface {
	// RepairTags lists the tags of a repository as Source.Tags does, and
	// removes the dangling ones from the registry.
	RepairTags(ctx context.Context, repo string) ([]TagRef, error)
}

// TagRef is a tag and the manifest digest it names.
type TagRef struct {
	Tag, Digest string
}
