package catalog

import (
	"context"
	"fmt"

	"github.com/distribution/distribution/v3"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/berth-registry/berth/olm"
)

// A Source that is also an olm.Writer stores the OLM bundle images of the
// versions it indexes: the embedded registry, written in process
// (DistributionSource), which is also the OLM catalog publisher's registry.
// OLM versions indexed from a Source that is not one get no bundle image.
var (
	_ olm.Registry = (*DistributionSource)(nil)
	_ olm.Resolver = (*DistributionSource)(nil)
)

// BlobExists reports whether repo holds (links) the blob d.
func (s *DistributionSource) BlobExists(ctx context.Context, repo string, d digest.Digest) (bool, error) {
	r, err := s.repository(ctx, repo)
	if err != nil {
		return false, err
	}
	_, err = r.Blobs(ctx).Stat(ctx, d)
	switch {
	case err == nil:
		return true, nil
	case isUnknown(err):
		return false, nil
	}
	return false, blobError(repo, d.String(), err)
}

// PushBlob stores b in repo, checking its digest.
func (s *DistributionSource) PushBlob(ctx context.Context, repo string, b olm.Blob) error {
	r, err := s.repository(ctx, repo)
	if err != nil {
		return err
	}
	desc, err := r.Blobs(ctx).Put(ctx, b.Descriptor.MediaType, b.Data)
	if err != nil {
		return fmt.Errorf("%s: put blob %s: %w: %w", repo, b.Descriptor.Digest, ErrUnavailable, err)
	}
	if desc.Digest != b.Descriptor.Digest {
		return fmt.Errorf("%s: blob %s was stored as %s", repo, b.Descriptor.Digest, desc.Digest)
	}
	return nil
}

// PushManifest stores a manifest in repo through the registry's manifest
// service, which checks that its blobs are there and keeps the referrers
// index (a manifest with a subject) as a push over HTTP would.
func (s *DistributionSource) PushManifest(ctx context.Context, repo, tag string, desc ocispec.Descriptor, payload []byte) error {
	m, _, err := distribution.UnmarshalManifest(desc.MediaType, payload)
	if err != nil {
		return fmt.Errorf("%s: manifest %s: %w", repo, desc.Digest, err)
	}
	r, err := s.repository(ctx, repo)
	if err != nil {
		return err
	}
	ms, err := r.Manifests(ctx)
	if err != nil {
		return fmt.Errorf("%s: %w: %w", repo, ErrUnavailable, err)
	}
	var opts []distribution.ManifestServiceOption
	if tag != "" {
		opts = append(opts, distribution.WithTag(tag))
	}
	d, err := ms.Put(ctx, m, opts...)
	if err != nil {
		return fmt.Errorf("%s: put manifest %s: %w", repo, desc.Digest, err)
	}
	if d != desc.Digest {
		return fmt.Errorf("%s: manifest %s was stored as %s", repo, desc.Digest, d)
	}
	// The manifest service checks a tag it is given but does not write it:
	// distribution's HTTP handler tags after it, and so does this.
	if tag != "" {
		if err := r.Tags(ctx).Tag(ctx, tag, desc); err != nil {
			return fmt.Errorf("%s: tag %s: %w", repo, tag, err)
		}
	}
	return nil
}

// storeBundle stores an OLM version's bundle image in its repository: the
// blobs it does not reuse, then its manifest, by digest.
func storeBundle(ctx context.Context, w olm.Writer, repo string, b *olm.Bundle) error {
	for _, blob := range b.Blobs {
		ok, err := w.BlobExists(ctx, repo, blob.Descriptor.Digest)
		if err != nil {
			return err
		}
		if !ok {
			if err := w.PushBlob(ctx, repo, blob); err != nil {
				return err
			}
		}
	}
	return w.PushManifest(ctx, repo, "", b.Manifest, b.Payload)
}
