package catalog

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/distribution/distribution/v3"
	storagedriver "github.com/distribution/distribution/v3/registry/storage/driver"
	"github.com/distribution/reference"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// DistributionSource reads a distribution registry in process, through its
// storage, with no HTTP hop.
type DistributionSource struct {
	ns        distribution.Namespace
	referrers ReferrersFunc
	untag     UntagDanglingFunc
	recent    RecentContent
}

var _ Source = (*DistributionSource)(nil)

// ReferrersFunc lists the manifests of repo whose subject is subject, of the
// given artifact type when it is not empty: the embedded registry's
// (*registry.Registry).Referrers, which distribution itself does not have.
type ReferrersFunc func(ctx context.Context, repo string, subject digest.Digest, artifactType string) ([]ocispec.Descriptor, error)

// UntagDanglingFunc removes tag from repo if it is dangling — listed, yet
// naming no manifest, as a crash in the middle of a delete can leave it —
// deciding under the lock that pushes of the tag hold: the embedded
// registry's (*registry.Registry).UntagDangling. It reports whether it
// removed the tag.
type UntagDanglingFunc func(ctx context.Context, repo, tag string) (bool, error)

// RecentContent is what the embedded registry has just received, which
// DistributionSource reads before the storage: the manifests it accepted
// and the blobs uploaded to it, by repository and digest
// ((*registry.Registry).RecentManifest and RecentBlob). ok is false for
// what it does not hold. The bytes returned are not to be changed.
type RecentContent interface {
	RecentManifest(repo string, d digest.Digest) (mediaType string, payload []byte, ok bool)
	RecentBlob(repo string, d digest.Digest) (b []byte, ok bool)
}

// ReadRecent makes the source read manifests and blobs from recent before
// the storage, and returns it. It is called before the source is used.
func (s *DistributionSource) ReadRecent(recent RecentContent) *DistributionSource {
	s.recent = recent
	return s
}

// NewDistributionSource reads the repositories of ns, and their referrers
// with referrers; nil means that no manifest has referrers. RepairTags
// removes dangling tags with untag; nil means that it leaves them.
func NewDistributionSource(ns distribution.Namespace, referrers ReferrersFunc, untag UntagDanglingFunc) *DistributionSource {
	return &DistributionSource{ns: ns, referrers: referrers, untag: untag}
}

// Repositories lists every repository of the registry.
func (s *DistributionSource) Repositories(ctx context.Context) ([]string, error) {
	var all []string
	buf := make([]string, 1000)
	last := ""
	for {
		n, err := s.ns.Repositories(ctx, buf, last)
		all = append(all, buf[:n]...)
		if errors.Is(err, io.EOF) {
			return all, nil
		}
		if isUnknown(err) {
			return all, nil // no repository yet
		}
		if err != nil {
			return nil, fmt.Errorf("list repositories: %w: %w", ErrUnavailable, err)
		}
		if n == 0 {
			return all, nil
		}
		last = buf[n-1]
	}
}

func (s *DistributionSource) repository(ctx context.Context, repo string) (distribution.Repository, error) {
	named, err := reference.WithName(repo)
	if err != nil {
		return nil, fmt.Errorf("%s: %w: %w", repo, ErrNotFound, err)
	}
	r, err := s.ns.Repository(ctx, named)
	if err != nil {
		return nil, fmt.Errorf("%s: %w: %w", repo, ErrUnavailable, err)
	}
	return r, nil
}

// Tags lists a repository's tags and the digest each names. A tag removed
// while listing is left out, and so is a dangling tag, whose manifest is gone
// (a crash in the middle of a delete can leave one): it names no version.
func (s *DistributionSource) Tags(ctx context.Context, repo string) ([]TagRef, error) {
	refs, _, err := s.tags(ctx, repo)
	return refs, err
}

// RepairTags lists a repository's tags as Tags does, and removes the dangling
// ones it meets from the registry, so that the registry lists no tag that
// names nothing. Each is checked again before it is removed (see
// UntagDanglingFunc). An error removing one is an error of the listing.
func (s *DistributionSource) RepairTags(ctx context.Context, repo string) ([]TagRef, error) {
	refs, dangling, err := s.tags(ctx, repo)
	if err != nil || s.untag == nil {
		return refs, err
	}
	for _, tag := range dangling {
		if _, err := s.untag(ctx, repo, tag); err != nil {
			return nil, fmt.Errorf("%s:%s: remove the dangling tag: %w: %w", repo, tag, ErrUnavailable, err)
		}
	}
	return refs, nil
}

// tags lists a repository's tags and the digest each names, and apart the
// tags it lists that name no manifest: removed while listing, or dangling.
func (s *DistributionSource) tags(ctx context.Context, repo string) (refs []TagRef, dangling []string, err error) {
	r, err := s.repository(ctx, repo)
	if err != nil {
		return nil, nil, err
	}
	ts := r.Tags(ctx)
	ms, err := r.Manifests(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w: %w", repo, ErrUnavailable, err)
	}
	tags, err := ts.All(ctx)
	if err != nil {
		if isUnknown(err) {
			return nil, nil, nil
		}
		return nil, nil, fmt.Errorf("%s: list tags: %w: %w", repo, ErrUnavailable, err)
	}
	refs = make([]TagRef, 0, len(tags))
	for _, tag := range tags {
		d, err := tagDigest(ctx, ts, ms, repo, tag)
		if errors.Is(err, ErrNotFound) {
			dangling = append(dangling, tag)
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		refs = append(refs, TagRef{Tag: tag, Digest: d})
	}
	return refs, dangling, nil
}

// Resolve returns the digest a tag names; a tag whose manifest is gone names none.
func (s *DistributionSource) Resolve(ctx context.Context, repo, tag string) (string, error) {
	r, err := s.repository(ctx, repo)
	if err != nil {
		return "", err
	}
	ms, err := r.Manifests(ctx)
	if err != nil {
		return "", fmt.Errorf("%s: %w: %w", repo, ErrUnavailable, err)
	}
	return tagDigest(ctx, r.Tags(ctx), ms, repo, tag)
}

// tagDigest returns the digest tag names, or an error wrapping ErrNotFound
// when there is no such tag or its manifest is gone.
func tagDigest(ctx context.Context, ts distribution.TagService, ms distribution.ManifestService, repo, tag string) (string, error) {
	desc, err := ts.Get(ctx, tag)
	if isUnknown(err) {
		return "", fmt.Errorf("%s:%s: %w", repo, tag, ErrNotFound)
	}
	if err != nil {
		return "", fmt.Errorf("%s:%s: %w: %w", repo, tag, ErrUnavailable, err)
	}
	ok, err := ms.Exists(ctx, desc.Digest)
	if err != nil {
		return "", fmt.Errorf("%s:%s: %w: %w", repo, tag, ErrUnavailable, err)
	}
	if !ok {
		return "", fmt.Errorf("%s:%s: manifest %s is gone: %w", repo, tag, desc.Digest, ErrNotFound)
	}
	return desc.Digest.String(), nil
}

// Manifest returns a manifest's media type and bytes, those the registry
// has just accepted if it holds them (ReadRecent).
func (s *DistributionSource) Manifest(ctx context.Context, repo, dgst string) (string, []byte, error) {
	d, err := digest.Parse(dgst)
	if err != nil {
		return "", nil, fmt.Errorf("%s@%s: %w: %w", repo, dgst, ErrNotFound, err)
	}
	if s.recent != nil {
		if mt, payload, ok := s.recent.RecentManifest(repo, d); ok {
			return mt, payload, nil
		}
	}
	r, err := s.repository(ctx, repo)
	if err != nil {
		return "", nil, err
	}
	ms, err := r.Manifests(ctx)
	if err != nil {
		return "", nil, fmt.Errorf("%s: %w: %w", repo, ErrUnavailable, err)
	}
	m, err := ms.Get(ctx, d)
	if err != nil {
		if isUnknown(err) {
			return "", nil, fmt.Errorf("%s@%s: %w", repo, dgst, ErrNotFound)
		}
		// distribution refuses manifests it cannot parse; they are not packages.
		return "", nil, fmt.Errorf("%s@%s: %w", repo, dgst, err)
	}
	mt, payload, err := m.Payload()
	if err != nil {
		return "", nil, fmt.Errorf("%s@%s: %w", repo, dgst, err)
	}
	return mt, payload, nil
}

// Blob opens a blob of the repository, from the bytes the registry has just
// received if it holds them (ReadRecent).
func (s *DistributionSource) Blob(ctx context.Context, repo, dgst string) (io.ReadCloser, error) {
	d, err := digest.Parse(dgst)
	if err != nil {
		return nil, fmt.Errorf("%s@%s: %w: %w", repo, dgst, ErrNotFound, err)
	}
	if s.recent != nil {
		if b, ok := s.recent.RecentBlob(repo, d); ok {
			return io.NopCloser(bytes.NewReader(b)), nil
		}
	}
	r, err := s.repository(ctx, repo)
	if err != nil {
		return nil, err
	}
	blobs := r.Blobs(ctx)
	desc, err := blobs.Stat(ctx, d)
	if err != nil {
		return nil, blobError(repo, dgst, err)
	}
	// distribution's blob reader buffers 4 MiB per open blob: a small blob
	// is read whole instead, which costs its size.
	if desc.Size <= smallBlob {
		b, err := blobs.Get(ctx, d)
		if err != nil {
			return nil, blobError(repo, dgst, err)
		}
		return io.NopCloser(bytes.NewReader(b)), nil
	}
	rc, err := blobs.Open(ctx, d)
	if err != nil {
		return nil, blobError(repo, dgst, err)
	}
	return rc, nil
}

// Referrers lists the manifests whose subject is dgst, through the
// ReferrersFunc the source was made with.
func (s *DistributionSource) Referrers(ctx context.Context, repo, dgst string) ([]ocispec.Descriptor, error) {
	d, err := digest.Parse(dgst)
	if err != nil {
		return nil, fmt.Errorf("%s@%s: %w: %w", repo, dgst, ErrNotFound, err)
	}
	if _, err := reference.WithName(repo); err != nil {
		return nil, fmt.Errorf("%s: %w: %w", repo, ErrNotFound, err)
	}
	if s.referrers == nil {
		return nil, nil
	}
	refs, err := s.referrers(ctx, repo, d, "")
	if err != nil {
		return nil, fmt.Errorf("%s: referrers of %s: %w: %w", repo, dgst, ErrUnavailable, err)
	}
	return refs, nil
}

// smallBlob is the largest blob DistributionSource.Blob reads whole.
const smallBlob = 1 << 20

func blobError(repo, dgst string, err error) error {
	if isUnknown(err) {
		return fmt.Errorf("%s: blob %s: %w", repo, dgst, ErrNotFound)
	}
	return fmt.Errorf("%s: blob %s: %w: %w", repo, dgst, ErrUnavailable, err)
}

// DeleteRepository removes the repository: every tag and manifest link. The
// blobs stay until garbage collection.
func (s *DistributionSource) DeleteRepository(ctx context.Context, repo string) error {
	named, err := reference.WithName(repo)
	if err != nil {
		return fmt.Errorf("%s: %w: %w", repo, ErrNotFound, err)
	}
	remover, ok := s.ns.(distribution.RepositoryRemover)
	if !ok {
		return fmt.Errorf("%s: the registry cannot delete repositories", repo)
	}
	if err := remover.Remove(ctx, named); err != nil {
		if isUnknown(err) {
			return fmt.Errorf("%s: %w", repo, ErrNotFound)
		}
		return fmt.Errorf("%s: delete: %w: %w", repo, ErrUnavailable, err)
	}
	return nil
}

// isUnknown reports whether err is one of distribution's "does not exist" errors.
func isUnknown(err error) bool {
	if err == nil {
		return false
	}
	var (
		tag  distribution.ErrTagUnknown
		repo distribution.ErrRepositoryUnknown
		man  distribution.ErrManifestUnknownRevision
		man2 distribution.ErrManifestUnknown
	)
	return errors.As(err, &tag) || errors.As(err, &repo) || errors.As(err, &man) || errors.As(err, &man2) ||
		errors.Is(err, distribution.ErrBlobUnknown) || isPathNotFound(err)
}

func isPathNotFound(err error) bool {
	var pnf storagedriver.PathNotFoundError
	return errors.As(err, &pnf)
}
